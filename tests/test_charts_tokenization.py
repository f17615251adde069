"""Tokenization page builders: chips escape text and show whitespace, ids, bytes, special and
partial tokens; the charts carry exactly the counts given."""

import re

from charts.tokenization import (
    ENCODING_LABELS,
    language_token_chart,
    token_chips_html,
    tokenizer_count_chart,
)
from lifecycle.stages.tokenization import Token


def token(text: str, token_id: int, raw: bytes | None = None, special: bool = False) -> Token:
    data = raw if raw is not None else text.encode("utf-8")
    return Token(id=token_id, bytes=data, text=text, start=0, end=1, special=special)


def chips(html: str) -> list[str]:
    return re.findall(r'<span class="token-chip".*?</span>', html)


def test_chip_text_and_title_are_escaped():
    hostile = token('<img src=x onerror="alert(1)">', 27)
    html = token_chips_html([hostile], limit=10)
    assert "<img" not in html
    assert "&lt;img" in html and "&quot;alert(1)&quot;" in html
    title = re.search(r'title="([^"]*)"', html).group(1)
    assert "id 27" in title and "3C 69 6D 67" in title  # bytes of "<img" in hex


def test_chips_show_ids_whitespace_and_alternate_colours():
    tokens = [token("Hello", 19556), token(" world", 905), token("\n", 198)]
    found = chips(token_chips_html(tokens, limit=10))
    assert len(found) == 3
    assert "␣world" in found[1] and ">905<" in found[1] and "↵" in found[2]
    backgrounds = [re.search(r"background:(#\w+)", chip).group(1) for chip in found]
    assert backgrounds[0] != backgrounds[1] and backgrounds[0] == backgrounds[2]


def test_special_and_partial_tokens_are_marked():
    special = token("<|im_start|>", 1, special=True)
    partial = token("<0xF0><0x9F>", 9, raw=b"\xf0\x9f")
    found = chips(token_chips_html([special, partial], limit=10))
    assert "special token" in found[0] and "font-weight:700" in found[0]
    assert "&lt;0xF0&gt;&lt;0x9F&gt;" in found[1] and "dashed" in found[1] and "part of a UTF-8 character" in found[1]
    assert "special" not in found[1]


def test_chips_are_capped_at_the_limit():
    tokens = [token(str(n), n) for n in range(50)]
    assert len(chips(token_chips_html(tokens, limit=7))) == 7


def test_language_chart_has_one_trace_per_tokenizer_with_the_counts():
    counts = {"model": [14, 55], "o200k_base": [14, 12], "cl100k_base": [14, 46]}
    figure = language_token_chart(["English", "Hindi"], counts)
    assert [trace.name for trace in figure.data] == [ENCODING_LABELS[e] for e in counts]
    for trace, values in zip(figure.data, counts.values()):
        assert list(trace.x) == ["English", "Hindi"] and list(trace.y) == values
    assert figure.layout.barmode == "group"
    assert "tokens" in figure.layout.yaxis.title.text and figure.layout.xaxis.title.text
    assert len({trace.marker.color for trace in figure.data}) == 3


def test_tokenizer_count_chart_bars_equal_the_counts():
    figure = tokenizer_count_chart({"model": 12, "o200k_base": 9, "cl100k_base": 10})
    assert list(figure.data[0].x) == [12, 9, 10]
    # Long names on two lines (a phone-wide chart keeps room for its bars): "SmolLM2<br>(model)"
    assert [label.replace("<br>", " ") for label in figure.data[0].y] == [
        ENCODING_LABELS[e] for e in ("model", "o200k_base", "cl100k_base")]
    assert "tokens" in figure.layout.xaxis.title.text


def test_partial_token_with_a_space_before_its_bytes():
    found = chips(token_chips_html([token(" <0xE4><0xBD>", 5, raw=b" \xe4\xbd")], limit=1))
    assert "␣&lt;0xE4&gt;&lt;0xBD&gt;" in found[0]


def test_an_invisible_token_gets_a_visible_chip():
    found = chips(token_chips_html([token("\u200d", 2524), token("", 7)], limit=10))
    assert ">&lt;U+200D&gt;<br>" in found[0] and ">∅<br>" in found[1]
