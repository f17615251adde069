"""Detokenization page: ids -> bytes -> text for the answer and for a split emoji, and the response object."""

import json

import pytest

from lifecycle.stages.detokenization import detokenize
from lifecycle.stages.tokenization import encode_plain
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import markdowns

PROMPT = "Say hi."
MAX_TOKENS = 3
EMOJI = "I love 🦀 and 🍣"


@pytest.fixture(scope="module")
def page(loaded):
    from tests.pages.harness import run_page

    return run_page("detokenization", prompt=PROMPT, temperature=0, max_tokens=MAX_TOKENS)


def _tables(app):
    """Each steps table, once: it is drawn whole twice (for a wide screen, and in the narrow view's expander)."""
    return [frame.value for frame in app.dataframe if "Held back (hex)" in frame.value.columns][::2]


def test_answer_tokens_bytes_and_text_add_up_to_the_response(page, loaded):
    assert not page.exception and not page.error
    (table,) = _tables(page)
    response = next(json.loads(j.value) for j in page.json if "chat.completion" in str(j.value))
    content = response["choices"][0]["message"]["content"]
    assert len(table) == MAX_TOKENS == response["usage"]["completion_tokens"]
    assert response["choices"][0]["finish_reason"] == "length"
    emitted = [s.emitted for s in detokenize(list(table["Id"]), loaded)]
    assert "".join(emitted) == content
    assert list(table["Emitted"]) == [show_token(e) for e in emitted]
    assert loaded.tokenizer.decode(list(table["Id"])) == content  # the tokenizer's own decode agrees
    for ids_hex, token_id in zip(table["Bytes (hex)"], table["Id"]):
        assert bytes.fromhex(ids_hex) == loaded.tokenizer.decode([int(token_id)]).encode()
    assert any(code.value == content for code in page.code)  # the raw text
    assert any(m == content for m in markdowns(page))  # the rendered Markdown


def test_split_character_example_shows_held_back_bytes(page, loaded):
    button = next(b for b in page.button if b.label == "Show a split-character example")
    app = button.click().run()
    assert not app.exception and not app.error
    example = _tables(app)[1]
    ids = encode_plain(EMOJI)
    assert list(example["Id"]) == ids
    crab = "🦀".encode()
    row = list(example["Emitted"]).index("🦀")
    assert example["Held back (hex)"][row] == ""
    assert bytes.fromhex(example["Held back (hex)"][row - 1]) == crab[: len(crab) - len(bytes.fromhex(example["Bytes (hex)"][row]))]
    assert "\ufffd" in example["Decoded alone (naive)"][row - 1]
    assert "\ufffd" not in example["Token alone"][row - 1] and "<0x" in example["Token alone"][row - 1]
    steps = detokenize(ids, loaded)
    assert "".join(s.emitted for s in steps) == EMOJI
    assert list(example["Emitted"]) == [show_token(s.emitted) for s in steps]
    assert list(example["Token alone"]) == [show_token(s.bytes) for s in steps]


def test_lesson_counts_ids_bytes_characters_and_usage_of_this_answer(page, loaded):
    from lifecycle.stages.context_window import Conversation, render_prompt
    from lifecycle.stages.generation import generate
    from lifecycle.stages.sampling import SamplingSettings
    from lifecycle.stages.vocabulary import token_bytes

    prompt_ids = render_prompt(Conversation(new_message=PROMPT)).ids
    generation = generate(loaded, prompt_ids, SamplingSettings(temperature=0.0), MAX_TOKENS)
    vocabulary = token_bytes(loaded)
    content_bytes = sum(len(vocabulary.of(i)) for i in generation.token_ids if i not in vocabulary.special)
    lesson = next(m for m in markdowns(page) if "The model never produces text" in m)
    assert f"it produced **{len(generation.token_ids)} token ids**" in lesson
    assert f"(**{content_bytes} bytes** of content in all)" in lesson
    assert f"**{len(generation.text):,} characters**" in lesson and f"**{generation.finish_reason}**" in lesson
    total = len(prompt_ids) + generation.completion_tokens
    assert (f"usage of **{total} tokens** ({len(prompt_ids)} prompt + {generation.completion_tokens} completion)"
            in lesson)
