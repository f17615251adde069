"""The wording the lessons share, checked on both sides of each turn of phrase."""

from lifecycle.lessons.words import and_joined, cache_size, counted, mib, milliseconds, ms, share_in_words


def test_a_share_is_half_only_near_half():
    assert share_in_words(0.5) == "about half"
    assert share_in_words(0.51) == "about half"
    assert "half" not in share_in_words(0.609)
    assert share_in_words(0.609) == "about three fifths"
    assert share_in_words(0.886) == "about nine tenths"
    assert share_in_words(0.34) == "about a third"
    assert share_in_words(0.56) == "less than three fifths"
    assert share_in_words(0.99) == "nearly all"
    assert share_in_words(0.01) == "almost none"


def test_durations_in_the_pages_format_and_in_plain_milliseconds():
    assert ms(None) == "–"
    assert ms(0.00042) == "0.42 ms"
    assert ms(0.2184) == "218.4 ms"
    assert ms(9.9994) == "9,999.4 ms" and ms(12.34) == "12.3 s"
    assert milliseconds(0.2373) == "237.3 ms" and milliseconds(12.34) == "12,340.0 ms"


def test_sizes_and_lists():
    assert mib(47 * 2**20 + 2**19) == "47.5 MiB"
    assert cache_size(2**20 - 1) == "1,024.0 KiB" and cache_size(2**20) == "1.00 MiB"
    assert and_joined(["a"]) == "a"
    assert and_joined(["a", "b"]) == "a and b"
    assert and_joined(["a", "b", "c"]) == "a, b and c"


def test_a_count_takes_the_singular_only_at_one():
    assert counted(1, "message") == "1 message"
    assert counted(0, "message") == "0 messages"
    assert counted(2, "stored message") == "2 stored messages"
    assert counted(1_024, "entry", "entries") == "1,024 entries"
