"""Every number the Detokenization page states, for two prompts, against an independent recomputation.

The page runs under AppTest at temperature 0; this file recomputes what it states without
lifecycle.stages.detokenization, lifecycle.stages.vocabulary or lifecycle.stages.streaming: the answer's ids with transformers' own
greedy ``generate`` on the loaded model, each token's raw bytes from its byte-level token string through
GPT-2's byte-to-character table (written out here), where a character is split by the UTF-8 lengths of
the text's own characters, the text with the tokenizer's ``decode``, the prompt with its
``apply_chat_template``, and the usage by arithmetic. The Streaming page's wire must carry the same usage.
"""

from __future__ import annotations

import json

import pytest

from tests.pages.harness import component_data, markdowns, run_page
from tests.pages.recompute import BYTE_OF, template_ids, transformers_greedy
from tests.reference import reference_tokenizer

# The third answer is Japanese, cut off by max_tokens two bytes into its 16th character.
PROMPTS = ["What's the capital of India?", "Why is the sky blue?", "How do you say 'thank you' in Japanese?"]
MAX_TOKENS = 30
# Example texts for the split-character section: the page's own (emoji), CJK, and one with no split at all.
EXAMPLES = [None, "寿司 and ramen ok?", "plain words only"]






def _special_ids(loaded) -> set[int]:
    return set(reference_tokenizer(loaded).all_special_ids)


def _raw_bytes(loaded, ids: list[int]) -> list[bytes]:
    """Each token's bytes: a special token is its name, any other its byte-level string mapped back to bytes."""
    strings = reference_tokenizer(loaded).convert_ids_to_tokens(ids)
    special = _special_ids(loaded)
    return [s.encode("utf-8") if i in special else bytes(BYTE_OF[c] for c in s) for i, s in zip(ids, strings)]


def _incremental(pieces: list[bytes], special: list[bool]) -> list[tuple[str, bytes]]:
    """For each token, the text it completes and the bytes of a character still unfinished after it, from the
    UTF-8 lead bytes (0xxxxxxx one byte, 110xxxxx two, 1110xxxx three, 11110xxx four). Special tokens are
    not content."""
    steps, pending, missing = [], b"", 0
    for piece, is_special in zip(pieces, special):
        for byte in b"" if is_special else piece:
            pending += bytes([byte])
            if missing:
                missing -= 1
            else:
                missing = 1 if byte >> 5 == 0b110 else 2 if byte >> 4 == 0b1110 else 3 if byte >> 3 == 0b11110 else 0
                start = len(pending) - 1  # where the character this byte begins starts
        if missing:
            emitted, pending = pending[:start], pending[start:]
            start = 0
        else:
            emitted, pending = pending, b""
        steps.append((emitted.decode("utf-8"), pending))
    return steps


def _ends_inside_a_character(pieces: list[bytes], special: list[bool]) -> list[bool]:
    return [bool(held) for _, held in _incremental(pieces, special)]


def _content(loaded, ids: list[int]) -> tuple[str, bytes]:
    """The answer's content and the bytes of a character it stopped inside (never completed: not content). The
    tokenizer's own decode writes those bytes as one U+FFFD; the content has them dropped."""
    special_ids = _special_ids(loaded)
    steps = _incremental(_raw_bytes(loaded, ids), [i in special_ids for i in ids])
    text, dropped = "".join(e for e, _ in steps), (steps[-1][1] if steps else b"")
    assert reference_tokenizer(loaded).decode(ids, skip_special_tokens=True) == text + ("\ufffd" if dropped else "")
    return text, dropped


def _shown(text: str) -> str:
    """A token's text as the pages write it, for the plain texts here: ∅ when empty, ␣ a space, ↵ a newline."""
    assert all(c.isprintable() or c == "\n" for c in text), text  # nothing else to make visible here
    return text.replace(" ", "␣").replace("\n", "↵") if text else "∅"






def _tables(app):
    return [f.value for f in app.dataframe if "Bytes (hex)" in f.value.columns and "Held back (hex)" in f.value.columns]


def _figure(app, key: str) -> dict:
    """The columns as the page sent them to the browser (ui.live_bars)."""
    return component_data(app, key)


def _check_steps(loaded, table, figure: dict, ids: list[int]) -> None:
    """The token-by-token table and chart: ids, bytes, what each step emitted and held back."""
    pieces = _raw_bytes(loaded, ids)
    special_ids = _special_ids(loaded)
    special = [i in special_ids for i in ids]
    inside = _ends_inside_a_character(pieces, special)
    assert list(table["Step"]) == list(range(1, len(ids) + 1))
    assert list(table["Id"]) == ids
    assert list(table["Bytes (hex)"]) == [p.hex(" ") for p in pieces]
    steps = _incremental(pieces, special)
    # What the steps emit, joined, is the tokenizer's own decode of the content: nothing lost, nothing doubled.
    assert "".join(e for e, _ in steps) == _content(loaded, ids)[0]
    assert list(table["Emitted"]) == ["(special: not content)" if s else _shown(e) for (e, _), s in zip(steps, special)]
    assert list(table["Held back (hex)"]) == [held.hex(" ") for _, held in steps]
    assert [bool(h) for h in table["Held back (hex)"]] == inside
    assert list(table["Code points emitted"]) == [" ".join(f"U+{ord(c):04X}" for c in e if ord(c) > 127)
                                                  for e, _ in steps]
    assert [e == "(special: not content)" for e in table["Emitted"]] == special
    assert list(table["Decoded alone (naive)"]) == [p.decode("utf-8", errors="replace") for p in pieces]
    rows = figure["views"][0]["rows"]  # the first 60 tokens: the bytes each carried, and the bytes held after it
    shown = min(len(ids), 60)
    assert [int(row["segments"][0]["value"]) for row in rows] == [len(p) for p in pieces][:shown]
    assert [int(row["segments"][1]["value"]) for row in rows] == [len(held) for _, held in steps][:shown]
    for index, (row, piece) in enumerate(zip(rows, pieces), start=1):  # each column named by its step and token
        try:
            assert row["label"] == f"{index}: {_shown(piece.decode('utf-8'))}"
        except UnicodeDecodeError:  # part of a character: its stray bytes written out
            assert row["label"].startswith(f"{index}: ") and "<0x" in row["label"]


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky", "japanese"])
def page(request, loaded):
    prompt = request.param
    app = run_page("detokenization", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    assert not app.exception and not app.error
    prompt_ids = template_ids(loaded, prompt)
    return app, prompt, prompt_ids, transformers_greedy(loaded, prompt_ids, MAX_TOKENS)[0]


def test_the_lesson_counts_the_answers_ids_bytes_and_characters(page, loaded):
    app, _, prompt_ids, new = page
    pieces = _raw_bytes(loaded, new)
    special_ids = _special_ids(loaded)
    special = [i in special_ids for i in new]
    text, dropped = _content(loaded, new)
    lesson = next(m for m in markdowns(app) if m.startswith("The model never produces text"))
    assert f"it produced **{len(new):,} token ids**" in lesson
    content_bytes = sum(len(p) for p, s in zip(pieces, special) if not s) - len(dropped)
    assert f"(**{content_bytes:,} bytes** of content in all)" in lesson
    assert content_bytes == len(text.encode("utf-8"))
    waits = sum(_ends_inside_a_character(pieces, special))
    if not waits:
        assert "none of them split a character, so nothing had to be held back" in lesson
    elif not dropped:
        assert f"**{waits}** of them ended inside a character, so their bytes were **held back** until the next " \
               "token completed it." in lesson
    else:  # "until the next token completed it" is not true of the character the answer stopped inside
        assert "until the next token completed it" not in lesson
        assert (f"**{waits}** of them ended inside a character, so their bytes were **held back** until a later "
                f"token completed it; the answer stopped inside its last character, so those **{len(dropped)} "
                "bytes** never became text and were dropped.") in lesson
    if PROMPTS[2] in page[1]:
        assert dropped  # the Japanese answer does stop inside a character: that sentence was checked
    if any(special):
        n = sum(special)
        assert (f"{n} special token{'s' * (n != 1)} (end of turn) {'was' if n == 1 else 'were'} left out of the "
                "content.") in lesson
    else:
        assert "special token" not in lesson
    finish = "stop" if new[-1] in special_ids else "length"
    assert finish == "stop" or len(new) == MAX_TOKENS
    assert (f"**{len(text):,} characters**, `finish_reason` **{finish}**, and usage of "
            f"**{len(prompt_ids) + len(new):,} tokens** ({len(prompt_ids):,} prompt + {len(new):,} completion).") in lesson


def test_the_answer_token_by_token(page, loaded):
    app, _, _, new = page
    table = _tables(app)[0]
    _check_steps(loaded, table, _figure(app, "answer_chart"), new)


def test_the_raw_content_and_the_response_object(page, loaded):
    app, _, prompt_ids, new = page
    text = _content(loaded, new)[0]
    assert any(code.value == text for code in app.code)  # the raw content, as the client receives it
    response = json.loads(app.json[0].proto.body)
    finish = "stop" if new[-1] in _special_ids(loaded) else "length"
    assert response["choices"][0]["message"]["content"] == text
    assert response["choices"][0]["finish_reason"] == finish
    assert response["usage"] == {"prompt_tokens": len(prompt_ids), "completion_tokens": len(new),
                                 "total_tokens": len(prompt_ids) + len(new)} | {
        k: v for k, v in response["usage"].items() if k not in ("prompt_tokens", "completion_tokens", "total_tokens")}
    sentence = next(m for m in markdowns(app) if m.startswith("`finish_reason`"))
    assert sentence.startswith(f"`finish_reason`: **{finish}**; `usage.completion_tokens` = **{len(new)}** = the "
                               f"number of tokens generated ({len(new)}).")


def test_the_streaming_page_reports_the_same_usage(page, loaded):
    app, prompt, prompt_ids, new = page
    streaming = run_page("streaming", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS)
    assert not streaming.exception
    wire = next(code.value for code in streaming.code if code.value.startswith("data: {"))
    chunks = [json.loads(line.removeprefix("data: ")) for line in wire.splitlines()
              if line.startswith("data: {")]
    usage = next(c["usage"] for c in reversed(chunks) if c.get("usage"))  # include_usage is on by default
    assert not any(c.value.startswith("The stream itself carried no usage") for c in app.caption)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (len(prompt_ids), len(new))
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert content == _content(loaded, new)[0]
    assert "gives exactly this content and finish_reason." in next(
        m for m in markdowns(app) if m.startswith("`finish_reason`"))


@pytest.mark.parametrize("example", EXAMPLES, ids=["emoji", "cjk", "plain"])
def test_the_split_character_example_counts_its_splits(page, loaded, example):
    app = page[0]
    button = next((b for b in app.button if b.label == "Show a split-character example"), None)
    if button is not None:
        button.click().run()
    box = app.text_input(key="detokenization_text")
    if example is not None:
        box.set_value(example).run()
    text = box.value
    assert not app.exception
    with loaded.tokenizer_lock:
        ids = reference_tokenizer(loaded)(text, add_special_tokens=False)["input_ids"]
    pieces = _raw_bytes(loaded, ids)
    assert b"".join(pieces) == text.encode("utf-8")
    split = sum(_ends_inside_a_character(pieces, [False] * len(ids)))
    sentence = next(m for m in markdowns(app) if m.startswith("The model's tokenizer cuts this text"))
    if split:
        assert sentence.startswith(f"The model's tokenizer cuts this text into **{len(ids):,} tokens**; **{split:,}** "
                                   "of them end inside a character.")
    else:
        assert sentence.startswith(f"The model's tokenizer cuts this text into **{len(ids):,} tokens**, none of which "
                                   "splits a character.")
    if example != EXAMPLES[2]:
        assert split > 0  # the emoji and CJK texts do split characters: the first sentence was checked
    table = next(t for t in _tables(app) if list(t["Id"]) == ids)
    _check_steps(loaded, table, _figure(app, "example_chart"), ids)


def test_without_include_usage_the_stream_carries_no_usage(loaded):
    prompt = PROMPTS[0]
    app = run_page("detokenization", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS, include_usage=False)
    streaming = run_page("streaming", prompt=prompt, temperature=0, max_tokens=MAX_TOKENS, include_usage=False)
    assert not app.exception and not streaming.exception
    wire = next(code.value for code in streaming.code if code.value.startswith("data: {"))
    assert '"usage":{' not in wire.replace(" ", "")  # no usage chunk: every chunk's usage is null or absent
    caption = "The stream itself carried no usage (include_usage is off); a non-streamed response always has it."
    assert caption in [c.value for c in app.caption]
    usage = json.loads(app.json[0].proto.body)["usage"]  # the response object has it all the same
    prompt_tokens = len(template_ids(loaded, prompt))
    assert usage["prompt_tokens"] == prompt_tokens
    answer, _ = transformers_greedy(loaded, template_ids(loaded, prompt), MAX_TOKENS)
    assert usage["total_tokens"] == prompt_tokens + len(answer)
