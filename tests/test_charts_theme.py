"""The chart theme's helpers."""

from charts.theme import wrap_label


def test_wrap_label_breaks_long_labels_at_spaces_and_keeps_words_whole():
    assert wrap_label("inspection pass (extra)") == "inspection pass<br>(extra)"
    assert wrap_label("with 2 tools, 2 documents", 14) == "with 2 tools,<br>2 documents"
    assert wrap_label("prefill") == "prefill"
    assert wrap_label("averyveryverylongsingleword", 5) == "averyveryverylongsingleword"
