"""Every number the Live calls page states about a call, for two prompts, against an independent recomputation.

Each prompt is sent once, streamed with usage at temperature 0, by the official openai SDK to the real API
in-process; the page then opens the call. This file recomputes without charts.live_calls, lifecycle.api or
lifecycle.stages.streaming: the prompt's tokens with the tokenizer's own ``apply_chat_template`` (and which of them are
special with its ``all_special_ids``), the answer with transformers' own greedy ``generate``, the window from
the model's config, TTFT, the mean gap and tokens per second by arithmetic on the frames' arrival times, the
SSE frames by parsing each ``data:`` line with ``json``, and the call log's counts by counting its table. The
Next token page must name the answer's first token as its top token.
"""

from __future__ import annotations

import json
import re

import pytest

from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import duration_ms, duration_rounding, markdowns, page_api, run_page, sdk_client, texts, wait_for_api
from tests.pages.recompute import LONG_PROMPT, finish_reason, template_ids, transformers_greedy
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?", LONG_PROMPT]
TOKENS_SHOWN = 64  # the prompt tokens the page decodes one by one
PART_CHARS = 200  # of each prompt part's text in the budget table; a cut one must end in "…"
KEY = "sk-truth-live-" + "5e4d3c2b1a0f" * 2
KEY_NAME = "truth-live"
MAX_TOKENS = 30
ROUNDING_MS = 0.1  # the frames table's times are rounded to 0.1 ms


@pytest.fixture(scope="module")
def server(loaded):
    wait_for_api()
    with page_api({KEY_NAME: KEY}) as made:
        yield made


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky", "long"])
def call(request, server, loaded) -> dict:
    """One streamed call of this prompt: what the SDK got, then the page opened on it after presenting the key."""
    raw = sdk_client(server, KEY).chat.completions.with_raw_response.create(
        model=loaded.name, messages=[{"role": "user", "content": request.param}], temperature=0,
        max_tokens=MAX_TOKENS, stream=True, stream_options={"include_usage": True})
    chunks = list(raw.parse())
    app = run_page("live-calls", call=raw.headers["x-request-id"], prompt=request.param)
    app.text_input(key="live_calls_key").set_value(KEY).run()
    assert not app.exception and not app.error
    return {"prompt": request.param, "id": raw.headers["x-request-id"], "app": app,
            "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
            "usage": chunks[-1].usage.model_dump(exclude_none=True)}


@pytest.fixture(scope="module")
def truth(call, loaded) -> tuple[list[int], list[int]]:
    ids = template_ids(loaded, call["prompt"])
    return ids, transformers_greedy(loaded, ids, MAX_TOKENS)[0]


def _table(app, column: str):
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


def _metrics(app) -> dict[str, str]:
    return {m.proto.label: m.proto.body for m in app.get("metric")}


def _text(app) -> str:
    return " | ".join([m for m in markdowns(app)] + [c.value for c in app.caption]).replace("\\", "")


def _content_times(app) -> list[float]:
    """Arrival (ms) of each frame whose JSON carries a text delta, parsed from the raw SSE the table shows."""
    frames = _table(app, "sent")
    times = []
    for at, sent in zip(frames["at (ms)"], frames["sent"]):
        payload = sent.removeprefix("data: ")
        if payload != "[DONE]":
            choices = json.loads(payload).get("choices") or [{}]
            if (choices[0].get("delta") or {}).get("content"):
                times.append(float(at))
    return times


def test_the_usage_and_the_answer_are_the_models_greedy_answer(call, truth, loaded):
    ids, new = truth
    finish = finish_reason(loaded, new)
    metrics = _metrics(call["app"])
    assert metrics["Prompt tokens"] == str(len(ids)) == str(call["usage"]["prompt_tokens"])
    assert metrics["Completion tokens"] == str(len(new))
    assert metrics["finish_reason"] == finish and metrics["Status"] == "200 ok"
    answer = reference_tokenizer(loaded).decode(new, skip_special_tokens=True)
    assert call["text"] == answer and answer in texts(call["app"])
    row = _table(call["app"], "TTFT (ms)").set_index("id").loc[call["id"]]
    assert (row["prompt tokens"], row["completion tokens"], row["finish_reason"]) == (len(ids), len(new), finish)


def test_the_tokens_and_the_budget_are_the_tokenizers_own(call, truth, loaded):
    ids, _ = truth
    app, window = call["app"], loaded.model.config.max_position_embeddings
    free = window - len(ids) - MAX_TOKENS
    assert (f"The chat template turned the messages into **{len(ids):,} tokens**; with {MAX_TOKENS:,} reserved "
            f"for the answer, {free:,} of the {window:,}-token window stayed free.") in _text(app)
    tokens = _table(app, "special")
    assert list(tokens["id"]) == ids[:len(tokens)] and len(tokens) == min(len(ids), TOKENS_SHOWN)
    cut = f"The first {TOKENS_SHOWN} of {len(ids):,} tokens."
    assert (cut in _text(app)) == (len(ids) > TOKENS_SHOWN)
    special = set(reference_tokenizer(loaded).all_special_ids)
    assert list(tokens["special"]) == [i in special for i in ids[:len(tokens)]]
    assert list(tokens["text"]) == [show_token(reference_tokenizer(loaded).decode([i])) for i in ids[:len(tokens)]]
    parts = _table(app, "part").set_index("part")
    assert parts["tokens"].sum() == window
    assert parts.loc["output reserve (max_tokens)", "tokens"] == MAX_TOKENS and parts.loc["free", "tokens"] == free
    prompt = call["prompt"]
    assert parts.loc["new message", "text"] == (prompt if len(prompt) <= PART_CHARS else f"{prompt[:PART_CHARS]}…")


def test_ttft_gaps_and_speed_are_the_frames_own(call, truth):
    app, (_, new) = call["app"], truth
    frames, content = _table(app, "sent"), _content_times(app)
    assert len(content) == len(new) - 1 or len(content) == len(new)  # the end-of-sequence token has no text
    assert "".join(json.loads(s.removeprefix("data: "))["choices"][0]["delta"].get("content") or ""
                   for s in frames["sent"] if s != "data: [DONE]" and json.loads(s.removeprefix("data: "))["choices"]
                   ) == call["text"]
    lesson = re.search(r"\*\*(\d+) frames\*\* left the server: the first content arrived after \*\*([\d,.]+ m?s)\*\* "
                       r"\(time to first token\), then the tokens came ([\d,.]+) ms apart on average", _text(app))
    assert int(lesson.group(1)) == len(frames)
    metrics = _metrics(app)
    assert duration_ms(metrics["TTFT"]) == pytest.approx(content[0], abs=duration_rounding(metrics["TTFT"]) + ROUNDING_MS)
    assert lesson.group(2) == metrics["TTFT"]
    gaps = [b - a for a, b in zip(content, content[1:])]
    assert float(lesson.group(3).replace(",", "")) == pytest.approx(sum(gaps) / len(gaps), abs=0.5 + ROUNDING_MS)
    span_ms = content[-1] - content[0]
    speed = (len(content) - 1) / (span_ms / 1000)
    # the metric is printed to 0.1 tokens/s, and the table's rounded times move the span by up to ROUNDING_MS
    assert float(metrics["Tokens/s"].replace(",", "")) == pytest.approx(speed, abs=0.05 + speed * ROUNDING_MS / span_ms)
    assert duration_ms(metrics["Total time"]) >= float(frames["at (ms)"].iloc[-1]) - duration_rounding(metrics["Total time"])


def test_the_usage_chunk_is_the_sdks(call):
    usage = json.loads(next(c.value for c in call["app"].code if '"total_tokens"' in c.value and "choices" not in c.value))
    assert usage == call["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_the_call_log_counts_what_it_lists(call):
    app = call["app"]
    table = _table(app, "TTFT (ms)")
    answered = int((table["outcome"] == "ok").sum())
    assert (f"The call log shows **{len(table)}** of your key's recent calls: **{answered}** answered, "
            f"**{len(table) - answered}** refused, cancelled or failed.") in _text(app)
    assert set(table["key name"]) == {KEY_NAME}


def test_the_next_token_page_names_the_answers_first_token(call, truth, loaded):
    _, new = truth
    next_token = run_page("next-token", prompt=call["prompt"], temperature=0)
    assert not next_token.exception and not next_token.error
    first = show_token(reference_tokenizer(loaded).decode([new[0]]))
    assert f"The most likely next token is '{first}'" in markdowns(next_token)[1].replace("\\", "")
