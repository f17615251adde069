"""Detokenization chart: one column pair per token, the token's bytes and the bytes held back after it."""

from charts.detokenization import bytes_bars


def test_columns_are_the_token_and_held_byte_counts():
    labels = ["1: <0x20><0xF0><0x9F>", "2: <0xA6>", "3: <0x80>"]
    data = bytes_bars(labels, [3, 1, 1], [2, 3, 0])
    (view,) = data["views"]
    assert [row["label"] for row in view["rows"]] == labels
    assert [[s["value"] for s in row["segments"]] for row in view["rows"]] == [[3, 2], [1, 3], [1, 0]]
    assert [[s["series"] for s in row["segments"]] for row in view["rows"]] == [[0, 1]] * 3
    assert data["orientation"] == "columns" and data["mode"] == "group" and data["legend"]
    assert data["series"][0]["colour"] != data["series"][1]["colour"]
