"""Every number the Gateway page states, for two prompts, against an independent recomputation.

A call's cost is recomputed from the tokenizer's own ``apply_chat_template`` and the request's
max_tokens; the rate-limit what-if against a token bucket written here from its documented rule
(capacity = the per-minute limit, refilled continuously at limit/60 per second, a call admitted only
when both buckets hold enough, a refused call costing nothing, one costing more tokens than the whole
minute refused for good with 400), not with the gateway's own ``RateLimiter``.
"""

from __future__ import annotations

import math
import re

import pytest

from tests.pages.harness import markdowns, run_page
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
MAX_TOKENS = 30


def _cost(loaded, prompt: str) -> int:
    ids = reference_tokenizer(loaded).apply_chat_template([{"role": "user", "content": prompt}],
                                                          add_generation_prompt=True, tokenize=True,
                                                          return_dict=True)["input_ids"]
    return len(ids) + MAX_TOKENS


def _bucket(rpm: int, tpm: int, count: int, seconds: float, cost: int) -> list[tuple[int, int, int, str]]:
    """(status, requests left, tokens left, retry-after) of each call of an evenly spread burst."""
    requests, tokens, last, rows = float(rpm), float(tpm), 0.0, []
    for index in range(count):
        now = index * seconds / count
        requests = min(rpm, requests + (now - last) * rpm / 60)
        tokens = min(tpm, tokens + (now - last) * tpm / 60)
        last = now
        wait = max((1 - requests) * 60 / rpm, (cost - tokens) * 60 / tpm)
        if cost > tpm:
            rows.append((400, math.floor(requests), math.floor(tokens), ""))
        elif wait <= 1e-6:
            requests, tokens = requests - 1, tokens - cost
            rows.append((200, math.floor(requests), math.floor(tokens), ""))
        else:
            rows.append((429, math.floor(requests), math.floor(tokens), str(max(1, math.ceil(wait)))))
    return rows


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def gateway(request, loaded):
    app = run_page("gateway", prompt=request.param, temperature=0, max_tokens=MAX_TOKENS)
    assert not app.exception and not app.error
    return app, _cost(loaded, request.param)


def _burst_table(app):
    return next(frame.value for frame in app.dataframe if "retry-after (s)" in frame.value.columns)


def _burst_sentence(app) -> str:
    return next(m for m in markdowns(app) if "calls admitted" in m)


def _check_burst(app, rpm: int, tpm: int, count: int, seconds: float, cost: int) -> None:
    expected = _bucket(rpm, tpm, count, seconds, cost)
    table = _burst_table(app)
    shown = [(int(s), int(r), int(t), str(a)) for s, r, t, a in
             zip(table["status"], table["requests left"], table["tokens left"], table["retry-after (s)"])]
    assert shown == expected
    assert list(table["sent at (s)"]) == pytest.approx([i * seconds / count for i in range(count)], abs=5e-4)
    admitted = sum(status == 200 for status, *_ in expected)
    never = sum(status == 400 for status, *_ in expected)
    sentence = _burst_sentence(app)
    assert f"**{admitted} of {count}** calls admitted, **{count - admitted - never}** refused with 429" in sentence
    assert (f"**{never}** with 400" in sentence) == (never > 0)


def test_the_cost_of_a_call_is_its_templated_prompt_plus_max_tokens(gateway, loaded):
    app, cost = gateway
    lesson = next(m for m in markdowns(app) if "Before the model sees a single token" in m)
    said = re.search(r"\*\*1 request\*\* and \*\*([\d,]+) tokens\*\* for this call \(its ([\d,]+) prompt tokens plus "
                     r"max_tokens (\d+)", lesson)
    assert said, lesson
    assert int(said.group(1).replace(",", "")) == cost
    assert int(said.group(2).replace(",", "")) + int(said.group(3)) == cost and int(said.group(3)) == MAX_TOKENS
    what_if = next(m for m in markdowns(app) if "fire a burst of calls like this one" in m)
    assert f"**{cost:,} tokens**" in what_if


def test_the_default_burst_is_a_token_buckets_arithmetic(gateway):
    app, cost = gateway
    _check_burst(app, 10, 12 * cost, 12, 1.0, cost)


@pytest.mark.parametrize("rpm, tpm_calls, count, seconds", [(60, 3, 8, 30.0), (100, 0.5, 3, 1.0)],
                         ids=["tokens-bind-then-refill", "one-call-over-the-minute"])
def test_other_limits_follow_the_same_arithmetic(gateway, rpm, tpm_calls, count, seconds):
    app, cost = gateway
    tpm = max(1, int(tpm_calls * cost))
    app.number_input(key="gateway_rpm").set_value(rpm)
    app.number_input(key="gateway_tpm").set_value(tpm)
    app.number_input(key="gateway_count").set_value(count)
    app.number_input(key="gateway_seconds").set_value(seconds)
    app.run()
    assert not app.exception and not app.error
    _check_burst(app, rpm, tpm, count, seconds, cost)
