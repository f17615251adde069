"""The wording the lessons share, checked on both sides of each turn of phrase."""

from lifecycle.lessons.words import share_in_words


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
