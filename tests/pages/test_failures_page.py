"""The Failures page: the real SDK through a fault on the visitor's own gateway, its attempts on a timeline,
the numbers in the sentence from this run, and nothing the remote sent rendered as Markdown."""

from __future__ import annotations

import re
import time

import pytest

from lifecycle.faults.plan import Fault
from lifecycle.api.demo import DemoGateway
from lifecycle.api.serving import model_status
from tests.pages.harness import markdowns, plotly_figure, texts

PROMPT = "Name a colour."
READY_TRIES = 240


@pytest.fixture(scope="module", autouse=True)
def api_ready(loaded):
    """A demo gateway's routes start the API's model loading once per process (app.py does it at start):
    wait until the API is ready, as it is in the running app, so no call here meets a 503 of its own."""
    DemoGateway()
    for _ in range(READY_TRIES):
        if model_status().state == "ready":
            return
        time.sleep(0.5)
    pytest.fail(f"the API never got ready: {model_status()}")


def _call(app, fault: Fault, failures: int = 2, retries: int = 2, **fields):
    app.selectbox(key="failures_fault").set_value(fault)
    app.number_input(key="failures_count").set_value(failures)
    app.number_input(key="failures_retries").set_value(retries)
    for key, value in fields.items():
        app.number_input(key=f"failures_{key}").set_value(value)
    return app.button(key="failures_send").click().run()


def _summary(app) -> str:
    return next(m for m in markdowns(app) if m.startswith("The SDK made"))


def _attempts(app):
    return next(frame.value for frame in app.dataframe if "x-stainless-retry-count" in frame.value.columns)


def test_nothing_is_sent_until_asked_then_a_500_twice_is_retried_and_answered(run_page):
    app = run_page("failures", prompt=PROMPT, max_tokens=4, temperature=0)
    assert not app.exception and not app.error
    assert any(c.value == "Nothing sent yet." for c in app.caption)
    app = _call(app, Fault.SERVER_ERROR)
    assert not app.exception and not app.error
    table = _attempts(app)
    assert list(table["status"]) == [500, 500, 200] and list(table["x-stainless-retry-count"]) == ["0", "1", "2"]
    summary = _summary(app)
    assert summary.startswith("The SDK made **3 attempts**") and "finish_reason" in summary
    sleeps = [float(s) for s in re.findall(r"([\d.]+) s", summary.split("sleeping", 1)[1].split("between")[0])]
    arrived = list(table["arrived (s)"])
    assert len(sleeps) == 2 and all(0 < s <= b - a + 0.01 for s, a, b in zip(sleeps, arrived, arrived[1:]))  # 2 decimals
    ledger = next(frame.value for frame in app.dataframe if "output tokens" in frame.value.columns)
    assert list(ledger["output tokens"])[0] == 4 and list(ledger["input tokens"])[1] == list(ledger["input tokens"])[0]
    figure = plotly_figure(app, "failures_timeline")
    assert {trace.name for trace in figure.data if trace.type == "bar"} == {"attempt: retried", "attempt: answered",
                                                                          "client sleeps"}
    retried = next(trace for trace in figure.data if trace.name == "arrived: retried")
    assert list(retried.x) == pytest.approx(arrived[:2], abs=0.001)


def test_a_wrong_key_is_not_retried_and_a_cut_stream_shows_its_partial_text(run_page):
    app = run_page("failures", prompt=PROMPT, max_tokens=8, temperature=0)
    app = _call(app, Fault.WRONG_KEY, failures=1, retries=3)
    assert not app.exception
    assert list(_attempts(app)["status"]) == [401]
    assert "Error code: 401 - Incorrect API key provided." in texts(app)  # the remote's message as plain text
    app = _call(app, Fault.STREAM_CUT, failures=1, retries=2, cut=2)
    assert not app.exception
    held = next(m for m in markdowns(app) if "** streamed token" in m)
    assert held.startswith("**2** streamed tokens") and "finish_reason **None**" in held and "usage **none**" in held
    assert any(t and t != "∅" for t in texts(app))
    app = app.button(key="failures_resend").click().run()  # recovery: the whole request again
    assert not app.exception
    paid = next(m for m in markdowns(app) if m.startswith("The second call paid for"))
    prompt, cached = (int(n.replace(",", "")) for n in re.findall(r"\*\*([\d,]+)", paid)[:2])
    assert prompt > 0 and 0 < cached <= prompt  # the first call's prompt is still in the prefix cache


def test_a_pattern_runs_live_and_shows_the_code_it_ran(run_page):
    app = run_page("failures", prompt=PROMPT, max_tokens=4, temperature=0)
    app.selectbox(key="failures_pattern").set_value("rotate")
    app = app.button(key="failures_pattern_send").click().run()
    assert not app.exception and not app.error
    steps = next(frame.value for frame in app.dataframe if "what happened" in frame.value.columns
                 and "x-request-id" in frame.value.columns)
    assert list(steps["route"]) == ["key A", "key B"] and list(steps["status"]) == [429, 200]
    summary = next(m for m in markdowns(app) if m.startswith("**2 calls**"))
    assert "answered by **key B**" in summary
    assert any("def rotate_keys_on_429" in code.value for code in app.code)


@pytest.mark.parametrize("fault", list(Fault), ids=[f.value for f in Fault])
def test_every_fault_runs_clean_and_states_this_runs_attempts(run_page, fault):
    app = run_page("failures", prompt=PROMPT, max_tokens=4, temperature=0)
    # a short timeout only where the fault is a slow first byte: elsewhere a busy CPU must not cause a retry
    app.number_input(key="failures_timeout").set_value(1.0 if fault is Fault.SLOW_FIRST_BYTE else 30.0)
    app = _call(app, fault, failures=1, retries=1, delay=1.5, retry_after=0.5, cut=1)
    assert not app.exception and not app.error
    table = _attempts(app)
    assert _summary(app).startswith(f"The SDK made **{len(table)} attempt{'s' * (len(table) != 1)}**")
    expected = 1 if fault in (Fault.NONE, Fault.STREAM_CUT, Fault.WRONG_KEY, Fault.INVALID_PARAMETER) else 2
    assert len(table) == expected and list(table["attempt"]) == list(range(1, expected + 1))


@pytest.mark.parametrize("pattern, answered_by", [("fallback", "fallback"), ("breaker", "flaky"), ("deadline", None)])
def test_every_pattern_runs_clean(run_page, pattern, answered_by):
    app = run_page("failures", prompt=PROMPT, max_tokens=4, temperature=0)
    app.selectbox(key="failures_pattern").set_value(pattern)
    app = app.button(key="failures_pattern_send").click().run()
    assert not app.exception and not app.error
    summary = next(m for m in markdowns(app) if re.match(r"\*\*\d+ calls?\*\*", m))
    assert (f"answered by **{answered_by}**" in summary) if answered_by else summary.endswith("no answer.")
