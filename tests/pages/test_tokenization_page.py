"""Tokenization page under AppTest: counts per tokenizer, chips, special tokens of the template,
the language table and the editable cost, all checked against lifecycle computed here."""

import json
import re

import pytest

from charts.tokenization import ENCODING_LABELS

from lifecycle.stages.context_window import render_messages
from lifecycle.stages.tokenization import ENCODINGS, tokenize
from lifecycle.stages.vocabulary import TOKEN_NOTATION, show_token
from tests.pages.harness import markdowns, run_page

PROMPT = "Hi there 👋🏽\n\tcafé <|im_end|> <b>x</b>"


@pytest.fixture(scope="module")
def page(loaded):
    app = run_page("tokenization", prompt=PROMPT, max_tokens=8)
    assert not app.exception
    return app


def chip_counts(app) -> list[int]:
    """Chips per chip block (the page's other st.html elements are style sheets)."""
    return [len(re.findall(r'class="token-chip"', html.proto.body)) for html in app.get("html")
            if "token-chips" in html.proto.body]


def test_each_tokenizers_count_and_chars_per_token(page):
    expected = {encoding: tokenize(PROMPT, encoding) for encoding in ENCODINGS}
    metrics = [m for m in page.metric]
    assert [m.value for m in metrics] == [f"{expected[e].count:,} tokens" for e in ENCODINGS]
    captions = [c.value for c in page.caption]
    for result in expected.values():
        assert f"{result.chars_per_token:.2f} characters per token" in captions
    chart = json.loads(page.get("plotly_chart")[0].proto.spec)
    assert chart["data"][0]["x"] == [expected[e].count for e in ENCODINGS]
    assert f"**{expected['model'].count:,} tokens**" in markdowns(page)[1]


def test_chips_escape_the_prompt_and_show_whitespace_and_partial_bytes(page):
    body = page.get("html")[0].proto.body
    assert chip_counts(page)[:3] == [tokenize(PROMPT, e).count for e in ENCODINGS]
    assert "<b>" not in body and "&lt;" in body
    assert "↵" in body and "⇥" in body and "␣" in body
    assert "dashed" in body  # the emoji's bytes are split across tokens
    assert "special token" not in body  # the typed <|im_end|> is plain text, not the control token


def test_token_table_writes_every_token_with_show_token(page):
    tokens = tokenize(PROMPT).tokens
    shown = list(page.dataframe[0].value["text"])
    assert shown == [show_token(t.bytes) for t in tokens]
    assert "␣there" in shown and "↵" in "".join(shown)
    split = [text for text, t in zip(shown, tokens) if t.partial]
    assert split and all(re.search(r"<0x[0-9A-F]{2}>", text) for text in split)
    assert not any("\ufffd" in text for text in shown)
    assert any(TOKEN_NOTATION in c.value for c in page.caption)


def test_template_tokens_mark_exactly_the_special_markers(page):
    rendered = render_messages([{"role": "user", "content": PROMPT}])
    body = page.get("html")[3].proto.body
    assert chip_counts(page)[3] == len(rendered.ids)
    assert body.count("· special token") == len(rendered.special_positions)
    assert f"{len(rendered.ids)} tokens; the dark chips are special tokens" in " ".join(c.value for c in page.caption)


def test_language_table_counts_are_the_tokenizers_counts(page):
    table = page.dataframe[1].value
    assert len(table) >= 8 and table["language"][0] == "English"
    english = {encoding: tokenize(table["sentence"][0], encoding).count for encoding in ENCODINGS}
    counts = {encoding: [] for encoding in ENCODINGS}
    for _, row in table.iterrows():
        for encoding in ENCODINGS:
            count = tokenize(row["sentence"], encoding).count
            assert row[ENCODING_LABELS[encoding]] == f"{count} ({count / english[encoding]:.2f}×)"
            counts[encoding].append(count)
    chart = json.loads(page.get("plotly_chart")[1].proto.spec)
    assert [trace["y"] for trace in chart["data"]] == [counts[e] for e in ENCODINGS]


def test_edited_price_changes_the_cost(page):
    page.number_input(key="price_o200k_base").set_value(10.0).run()
    assert not page.exception
    costs = page.dataframe[-1].value
    o200k = costs[costs["tokenizer"].str.startswith("o200k")].iloc[0]
    assert o200k["$ per 1M tokens"] == 10.0
    assert o200k["$ for this prompt"] == pytest.approx(tokenize(PROMPT, "o200k_base").count * 10.0 / 1e6)


def test_long_prompt_caps_the_chips_and_says_how_many_were_cut(loaded):
    prompt = "The quick brown fox jumps over the lazy dog. " * 120
    app = run_page("tokenization", prompt=prompt, max_tokens=8)
    assert not app.exception
    count = tokenize(prompt).count
    assert chip_counts(app) == [120, 120, 120, 300] and count > 300
    assert f"Showing the first 120 of {count:,} tokens; {count - 120:,} not drawn." in [c.value for c in app.caption]
