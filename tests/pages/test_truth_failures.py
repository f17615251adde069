"""Every number the Failures page states, for two prompts and four faults, against an independent recomputation.

The page runs under AppTest at temperature 0 and really calls through its faulty gateway. This file
recomputes without lifecycle.faults: the retry policy the lessons state with the installed openai client's
own ``_calculate_retry_timeout`` and ``_should_retry`` (its random jitter fixed at both ends), each sleep
against those bounds and against the gaps between the attempts the gateway recorded, the answer and its
usage with the tokenizer's own ``apply_chat_template`` and transformers' own greedy ``generate`` at the
page's max_tokens, and the cost ledger by arithmetic on the page's own prices.
"""

from __future__ import annotations

import re

import openai
import pytest

from lifecycle.faults.plan import Fault
from tests.pages.harness import markdowns, run_page, texts, wait_for_api
from tests.pages.recompute import (
    finish_reason, sdk_default_retries, sdk_retries, sdk_sleep, template_ids, transformers_greedy,
)
from tests.reference import reference_tokenizer

PROMPTS = ["What's the capital of India?", "Why is the sky blue?"]
SIDEBAR_MAX_TOKENS = 30
CAP = 24  # the page's own cap on an answer's tokens, which its caption states
ROUNDED = 0.005  # a sleep printed to 2 decimals
# A sleep is measured by the gateway, from an attempt's answer to the next arrival: the SDK's own sleep plus its
# handling of the answer and the next request's trip, a few ms on a quiet machine, more on a loaded one.
HANDLING = 0.15
CUT_AFTER = 3


@pytest.fixture(scope="module", autouse=True)
def api_ready(loaded):
    """The API the demo gateway forwards to is loaded, as it is in the running app."""
    wait_for_api()


@pytest.fixture(scope="module", params=PROMPTS, ids=["india", "sky"])
def prompt(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def answer(prompt, loaded) -> tuple[list[int], list[int]]:
    ids = template_ids(loaded, prompt)
    return ids, transformers_greedy(loaded, ids, CAP)[0]


def _send(prompt: str, fault: Fault, failures: int, **fields: float):
    app = run_page("failures", prompt=prompt, temperature=0, max_tokens=SIDEBAR_MAX_TOKENS)
    app.selectbox(key="failures_fault").set_value(fault)
    app.number_input(key="failures_count").set_value(failures)
    for key, value in fields.items():
        app.number_input(key=f"failures_{key}").set_value(value)
    app = app.button(key="failures_send").click().run()
    assert not app.exception and not app.error
    return app


def _attempt_table(app):
    return next(frame.value for frame in app.dataframe if "x-stainless-retry-count" in frame.value.columns)


def _text(app) -> str:
    return " | ".join([m for m in markdowns(app)] + [c.value for c in app.caption]).replace("\\", "")


def _sleeps(summary: str) -> list[float]:
    between = re.search(r"sleeping (.*?) between them", summary)
    return [float(s) for s in re.findall(r"([\d.]+) s", between.group(1))] if between else []


def test_the_policy_the_lessons_state_is_the_installed_sdks(prompt):
    app = run_page("failures", prompt=prompt, temperature=0, max_tokens=SIDEBAR_MAX_TOKENS)
    assert not app.exception and not app.error
    text = _text(app)
    first = f"{sdk_sleep(0, 1.0):.3f}–{sdk_sleep(0, 0.0):.3f} s"
    assert f"(version {openai.__version__}) retries a failed attempt **{sdk_default_retries()} times** by default" in text
    assert f"sleeping {first} before the first retry and twice as long before each next one (up to " \
           f"{sdk_sleep(60, 0.0):g} s)" in text
    assert all(sdk_sleep(n + 1, 0.0) == min(2 * sdk_sleep(n, 0.0), sdk_sleep(60, 0.0)) for n in range(8))
    assert "A 400 or 401 it never retries." in text and not sdk_retries(400) and not sdk_retries(401)
    policy = re.search(r"It retries a connection error, a timeout, (.*?); never another 4xx such as (.*?) \(", text)
    assert policy.group(1) == "408, 409, 429 and any 5xx"
    assert all(sdk_retries(s) for s in (408, 409, 429, *range(500, 600)))
    assert not any(sdk_retries(int(s)) for s in re.findall(r"\d{3}", policy.group(2)))
    initial, longest = re.search(r"Before retry \*n\* it sleeps ([\d.]+) s × 2ⁿ⁻¹, at most ([\d.]+) s", text).groups()
    assert float(initial) == sdk_sleep(0, 0.0) and float(longest) == sdk_sleep(60, 0.0)
    jitter = float(re.search(r"minus a random jitter of up to (\d+)%", text).group(1)) / 100
    assert all(sdk_sleep(n, 1.0) == pytest.approx(sdk_sleep(n, 0.0) * (1 - jitter)) for n in range(6))
    assert f"(so the first sleep is {first})" in text
    honoured = float(re.search(r"above 0 and up to ([\d.]+) s is slept exactly instead", text).group(1))
    assert sdk_sleep(0, 0.5, honoured) == honoured and sdk_sleep(3, 0.5, 0.5) == 0.5
    assert sdk_retries(429, honoured) and not sdk_retries(429, honoured + 1)  # "a longer one means no retry at all"


def test_a_500_twice_is_retried_in_the_sdks_backoff_and_answered_greedily(prompt, answer, loaded):
    app = _send(prompt, Fault.SERVER_ERROR, 2)
    ids, new = answer
    table, text = _attempt_table(app), _text(app)
    assert list(table["status"]) == [500, 500, 200]
    assert [int(n) for n in table["x-stainless-retry-count"]] == list(range(3))
    summary = next(m for m in markdowns(app) if m.startswith("The SDK made"))
    assert summary.startswith(f"The SDK made **{len(table)} attempts**") and "(500, 500, 200)" in summary
    sleeps, arrived = _sleeps(summary), list(table["arrived (s)"])
    assert len(sleeps) == 2
    for retries_taken, (sleep, before, after) in enumerate(zip(sleeps, arrived, arrived[1:])):
        low, high = sdk_sleep(retries_taken, 1.0), sdk_sleep(retries_taken, 0.0)
        assert low - ROUNDED <= sleep <= high + HANDLING
        assert sleep <= after - before + 0.01  # the gateway saw the next attempt only after the sleep
        assert f"sleep {retries_taken + 1}: {sleep:.2f} s, backoff allows {low:.2f}–{high:.2f} s" in text
    assert f"Then it returned the answer (finish_reason {finish_reason(loaded, new)})." in summary
    assert f"max_tokens is capped at {CAP} here" in text  # the sidebar asked for more
    assert reference_tokenizer(loaded).decode(new, skip_special_tokens=True) in texts(app)
    assert f"usage: {len(ids)} prompt + {len(new)} completion tokens" in text
    assert len(set(table["traceparent"])) == 1
    assert f"Every attempt carried the same W3C traceparent ({table['traceparent'][0]}): one user action, " \
           f"{len(table)} attempts, tied together." in text


def test_the_ledger_is_the_estimate_the_usage_and_their_difference(prompt, answer):
    app = _send(prompt, Fault.NONE, 0)
    ids, new = answer
    ledger = next(frame.value for frame in app.dataframe if "output tokens" in frame.value.columns)
    prices = app.number_input(key="failures_in_price").value, app.number_input(key="failures_out_price").value
    rows = [(len(ids), CAP), (len(ids), len(new)), (0, len(new) - CAP)]
    assert list(zip(ledger["input tokens"], ledger["output tokens"])) == rows
    assert list(ledger["cost"]) == [f"{(i * prices[0] + o * prices[1]) / 1e6:.6f}" for i, o in rows]


def test_a_429_waits_exactly_its_retry_after(prompt):
    app = _send(prompt, Fault.RATE_LIMIT, 1, retry_after=1.0)
    table = _attempt_table(app)
    assert list(table["status"]) == [429, 200]
    summary = next(m for m in markdowns(app) if m.startswith("The SDK made"))
    (sleep,) = _sleeps(summary)
    assert sdk_sleep(0, 0.5, 1.0) - ROUNDED <= sleep <= sdk_sleep(0, 0.5, 1.0) + HANDLING
    assert f"sleep 1: {sleep:.2f} s for retry-after 1 s" in _text(app)


def test_a_wrong_key_is_raised_at_once(prompt):
    app = _send(prompt, Fault.WRONG_KEY, 1)
    assert list(_attempt_table(app)["status"]) == [401] and not sdk_retries(401)
    summary = next(m for m in markdowns(app) if m.startswith("The SDK made"))
    assert summary.startswith("The SDK made **1 attempt**") and "sleeping" not in summary
    assert "Then it gave up and raised **AuthenticationError**." in summary


def test_a_cut_stream_is_paid_for_again(prompt, answer, loaded):
    app = _send(prompt, Fault.STREAM_CUT, 1, cut=CUT_AFTER)
    ids, new = answer
    assert list(_attempt_table(app)["status"]) == [200]  # broken after its first byte: not retried
    held = next(m for m in markdowns(app) if "** streamed token" in m)
    assert held.startswith(f"**{CUT_AFTER}** streamed tokens of text") and "usage **none**" in held
    assert reference_tokenizer(loaded).decode(new[:CUT_AFTER]) in texts(app)
    assert f"and pay for the prompt again (**{len(ids):,}** prompt tokens by the model's tokenizer" in _text(app)
    app = app.button(key="failures_resend").click().run()
    assert not app.exception and not app.error
    again = next(m for m in markdowns(app) if m.startswith("The second call"))
    paid = re.search(r"paid for \*\*([\d,]+) prompt tokens\*\* again, \*\*([\d,]+)\*\* of them served", again)
    assert int(paid.group(1).replace(",", "")) == len(ids)
    assert 0 <= int(paid.group(2).replace(",", "")) <= len(ids)
    assert f"answered {len(new):,} token{'s' * (len(new) != 1)} in" in again
    assert f"finish_reason **{finish_reason(loaded, new)}**" in again
    assert reference_tokenizer(loaded).decode(new, skip_special_tokens=True) in texts(app)
