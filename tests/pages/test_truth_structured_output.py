"""Every number the Structured output page states, for two prompts and both modes, against a recomputation.

The page runs under AppTest at temperature 0, once asking for a tool call and once for JSON matching a
schema. This file recomputes what it states without lifecycle.features.structured, lifecycle.features.tools or
lifecycle.stages.context_window: the prompt with the tokenizer's own ``apply_chat_template`` (the tool definitions'
cost as the tokens they add to it), the generated ids from the mask chart's token labels through GPT-2's
byte table and the tokenizer's vocabulary, the model's own favourite at every step with one transformers
forward pass over the prompt and the answer, the text with ``tokenizer.decode``, the call or object with
``json`` and the schema check with jsonschema itself. How many tokens the grammar allowed at a step is the
grammar's own number (the chart); the lesson must say what the chart shows, and at a step where the mask
overruled the model fewer than the whole vocabulary can have been allowed.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

from tests.pages.harness import component_data, markdowns, run_page
from tests.pages.recompute import CHARACTER_OF
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
MAX_TOKENS = 120  # the page's own cap on the structured answer
SHOWN_FRAGMENTS = 60  # the page's stream table lists this many deltas
OVERRULED = "the mask overruled the model"  # the legend's name for a step where the mask removed the favourite






def _template(loaded, messages: list[dict], tokenize: bool):
    out = reference_tokenizer(loaded).apply_chat_template(messages, add_generation_prompt=True, tokenize=tokenize)
    return list(out["input_ids"] if hasattr(out, "keys") else out) if tokenize else out


def _generated_ids(loaded, figure: dict) -> list[int]:
    """The answer's ids from the mask chart's labels ("12. ␣Delhi", plain text): each label's text is one token's."""
    ids = []
    tokenizer = reference_tokenizer(loaded)
    for row in figure["views"][0]["rows"]:
        text = row["label"].split(". ", 1)[1].replace("␣", " ").replace("↵", "\n")
        token = text if text in tokenizer.all_special_tokens else "".join(
            CHARACTER_OF[b] for b in text.encode("utf-8"))
        token_id = tokenizer.convert_tokens_to_ids(token)
        assert token_id != tokenizer.unk_token_id and tokenizer.convert_ids_to_tokens(token_id) == token
        ids.append(token_id)
    return ids


def _favourites(loaded, prompt_ids: list[int], answer: list[int]) -> list[int]:
    """The model's own most likely token before each answer token: one pass over prompt and answer."""
    with loaded.lock, torch.inference_mode():
        logits = loaded.model(input_ids=torch.tensor([prompt_ids + answer])).logits[0].double()
    return logits[len(prompt_ids) - 1: len(prompt_ids) + len(answer) - 1].argmax(-1).tolist()


def _figure(app) -> dict:
    """The mask's columns as the page sent them to the browser (ui.live_bars)."""
    return component_data(app, "structured_mask")


def _read_prompt(app) -> str:
    """The prompt the page says the model read (st.text strips the closing newline after "assistant")."""
    return next(t.value for t in app.text if t.value.startswith("<|im_start|>"))


def _messages(app, prompt: str, mode: str) -> list[dict]:
    """The messages the template renders into what the model read: in tool mode, the system turn the page shows
    (checked against the template's own default and the tools in the request below)."""
    plain = [{"role": "user", "content": prompt}]
    if mode == "schema":
        return plain
    system = re.fullmatch(r"<\|im_start\|>system\n(.*?)<\|im_end\|>\n.*", _read_prompt(app), re.S).group(1)
    return [{"role": "system", "content": system}, *plain]


def _lesson(app) -> str:
    return next(m for m in markdowns(app) if "The answer took" in m)


def _run(prompt: str, mode: str):
    app = run_page("structured-output", prompt=prompt, temperature=0)
    assert not app.exception and not app.error
    if mode == "schema":
        app.segmented_control(key="structured_mode").set_value("JSON matching a schema").run()
    elif mode in ("auto", "none"):
        app.selectbox(key="structured_choice").set_value(mode).run()
    assert not app.exception and not app.error
    return app


# "tool": tool_choice "required" (the page's default); "auto" and "none" may answer in free text; "schema": JSON.
MODES = ("tool", "auto", "none", "schema")


@pytest.fixture(scope="module", params=[(p, mode) for p in PROMPTS for mode in MODES],
                ids=[f"{name}-{mode}" for name in ("india", "sky") for mode in MODES])
def page(request, loaded):
    prompt, mode = request.param
    app = _run(prompt, mode)
    figure = _figure(app)
    answer = _generated_ids(loaded, figure)
    prompt_ids = _template(loaded, _messages(app, prompt, mode), tokenize=True)
    return dict(app=app, prompt=prompt, mode=mode, figure=figure, answer=answer, prompt_ids=prompt_ids,
                favourites=_favourites(loaded, prompt_ids, answer))


def test_the_prompt_is_the_templates_and_the_tools_cost_what_they_add(page, loaded):
    app, prompt = page["app"], page["prompt"]
    plain = [{"role": "user", "content": prompt}]
    without = _template(loaded, plain, tokenize=True)
    read = _read_prompt(app)
    lesson = _lesson(app)
    if page["mode"] == "schema":
        assert read == _template(loaded, plain, tokenize=False).strip()  # the schema is not written into the prompt
        schema = json.loads(app.text_area(key="structured_schema").value)
        would = len(reference_tokenizer(loaded)(json.dumps(schema), add_special_tokens=False)["input_ids"])
        assert lesson.startswith("The schema costs no prompt tokens here: the grammar alone enforces it (written "
                                 f"into the prompt it would cost **{would:,}**).")
        return
    # The system turn the model read: the template's own default system prompt, then every tool's definition.
    with_tools = _messages(app, prompt, "tool")
    system = with_tools[0]["content"]
    default = re.match(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", _template(loaded, plain, False), re.S).group(1)
    assert system.startswith(default)
    for tool in json.loads(app.text_area(key="structured_tools").value):
        assert json.dumps(tool["function"], sort_keys=True) in system
    assert read == _template(loaded, with_tools, tokenize=False).strip()
    cost = len(_template(loaded, with_tools, tokenize=True)) - len(without)
    assert lesson.startswith(f"The tool definitions cost **{cost:,} prompt tokens** on every call that carries them.")


def test_the_lesson_counts_the_steps_and_the_overruled_favourites(page, loaded):
    app, answer, favourites, figure = page["app"], page["answer"], page["favourites"], page["figure"]
    lesson = _lesson(app)
    rows = figure["views"][0]["rows"]
    allowed = [int(row["segments"][0]["value"]) for row in rows]
    overruled = [f != a for f, a in zip(favourites, answer)]  # greedy: an allowed favourite is the token taken
    names = [figure["series"][row["segments"][0]["series"]]["name"] for row in rows]
    assert [name == OVERRULED for name in names] == overruled
    vocabulary = len(reference_tokenizer(loaded))
    assert all(n < vocabulary for n, o in zip(allowed, overruled) if o)  # the mask removed the favourite there
    assert f"The answer took **{len(answer)} token{'s' * (len(answer) != 1)}**." in lesson
    if min(allowed) == vocabulary:  # no step narrowed: tool_choice "none" runs no grammar
        assert page["mode"] == "none" and not any(overruled)
        assert "grammar mask let through" not in lesson
        assert f"No step was narrowed: the model could take any of the {vocabulary:,} tokens at every step." in lesson
        return
    plural = {n: "s" * (n != 1) for n in (allowed.count(1), sum(overruled))}
    assert (f"let through between **{min(allowed):,}** and **{max(allowed):,}** of the {vocabulary:,} tokens; "
            f"**{allowed.count(1)}** step{plural[allowed.count(1)]} had exactly one allowed token, and at "
            f"**{sum(overruled)}** step{plural[sum(overruled)]} the model's own favourite was masked out.") in lesson
    assert f"the whole vocabulary ({vocabulary:,} tokens)" in next(c.value for c in app.caption if "dashed line" in c.value)


def test_the_final_object_is_the_answers_text_and_validates(page, loaded):
    app, answer = page["app"], page["answer"]
    ended = len(answer) < MAX_TOKENS  # the grammar closed the answer (or the model ended it) before the cap
    text = reference_tokenizer(loaded).decode(answer, skip_special_tokens=True)
    lesson = _lesson(app)
    shown = [json.loads(j.proto.body) for j in app.json]
    if page["mode"] == "schema":
        schema = json.loads(app.text_area(key="structured_schema").value)
        value = json.loads(text)
        jsonschema.validate(value, schema)
        assert shown == [value]
        assert lesson.endswith(f"finish_reason: **{'stop' if ended else 'length'}**.")
    elif not text.startswith("<tool_call>"):  # free text ("auto" or "none"): nothing to validate
        assert page["mode"] in ("auto", "none") and shown == []
        assert lesson.endswith(f"finish_reason: **{'stop' if ended else 'length'}**.")
        assert any(w.value == "Not a validated object: the answer is free text: there is nothing to validate"
                   for w in app.warning)
        assert not app.success
        return
    else:
        call = json.loads(re.fullmatch(r"<tool_call>\n(.*)\n</tool_call>", text, re.S).group(1))
        tool = next(t["function"] for t in json.loads(app.text_area(key="structured_tools").value)
                    if t["function"]["name"] == call["name"])
        jsonschema.validate(call["arguments"], tool["parameters"])
        message, value = shown
        assert message["finish_reason"] == "tool_calls" and lesson.endswith("finish_reason: **tool_calls**.")
        (wire,) = message["message"]["tool_calls"]
        assert wire["function"]["name"] == call["name"]
        assert json.loads(wire["function"]["arguments"]) == call["arguments"] == value
    assert any("validates against its schema" in s.value for s in app.success)


def test_the_streamed_fragments_add_up_to_the_call(page, loaded):
    app = page["app"]
    frame = next(f.value for f in app.dataframe if "chunk delta" in f.value.columns)
    deltas = [json.loads(d) for d in frame["chunk delta"]]
    text = reference_tokenizer(loaded).decode(page["answer"], skip_special_tokens=True)
    if not text.startswith("<tool_call>"):  # plain content deltas (JSON or free text): together, the answer's text
        # One delta per token that released text; the table lists the first SHOWN_FRAGMENTS of them.
        decoded = [reference_tokenizer(loaded).decode(page["answer"][:n], skip_special_tokens=True)
                   for n in range(len(page["answer"]) + 1)]
        released = [after[len(before):] for before, after in zip(decoded, decoded[1:]) if after != before]
        assert "".join(released) == text
        assert [d["content"] for d in deltas] == released[:SHOWN_FRAGMENTS]
        cut = [c.value for c in app.caption if c.value.startswith("First ")]
        assert cut == ([f"First {SHOWN_FRAGMENTS} of {len(released)} deltas."] if len(released) > SHOWN_FRAGMENTS
                       else [])
        return
    wire = json.loads(app.json[0].proto.body)["message"]["tool_calls"][0]
    first = deltas[0]["tool_calls"][0]
    # The stream's first delta and the final message describe the same call: the same id and name.
    assert (first["id"], first["function"]["name"], first["function"]["arguments"]) == (
        wire["id"], wire["function"]["name"], "")
    fragments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert fragments == wire["function"]["arguments"] == list(frame["arguments so far"])[-1]
