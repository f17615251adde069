"""Detokenization chart: one bar pair per token, the token's bytes and the bytes held back after it."""

from charts.detokenization import bytes_per_token
from charts.theme import axis_title


def test_bars_are_the_token_and_held_byte_counts():
    labels = ["1: <0x20><0xF0><0x9F>", "2: <0xA6>", "3: <0x80>"]
    figure = bytes_per_token(labels, [3, 1, 1], [2, 3, 0])
    token, held = figure.data
    assert list(token.x) == labels and list(held.x) == labels
    assert list(token.y) == [3, 1, 1]
    assert list(held.y) == [2, 3, 0]
    assert figure.layout.barmode == "group"
    assert figure.layout.yaxis.title.text == axis_title("Size", "bytes")
    assert token.marker.color != held.marker.color
