"""The Gateway page: this run's decisions, the wrong-key and rate-limit answers from the real
gateway, and the persisted call log (the API's SQLite file, written once per run)."""

from __future__ import annotations

import json
import re

import pytest

from lifecycle.server import routes
from lifecycle.context import render_messages
from lifecycle.server.calllog import CallLog
from lifecycle.server.ratelimit import RateLimiter

PROMPT = "Name a colour."
STEP = re.compile(r"\*\*(Auth|Rate limit|Routing|Logging)\*\*: (\w+)")
KEY = "sk-class-key-0123456789abcdef"


@pytest.fixture
def gateway_env(monkeypatch, tmp_path):
    """A fresh API server (its keys, limiter and call log) configured like a deployment would."""
    path = tmp_path / "calls.sqlite3"
    monkeypatch.setenv("LIFECYCLE_CALL_LOG", str(path))
    monkeypatch.setenv("LIFECYCLE_API_KEYS", f"class:{KEY}")
    monkeypatch.setattr(routes, "_default_server", None)
    return path


def _table(app, column: str):
    """The table shown with this column (display tables carry no key under AppTest)."""
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


def _prompt_tokens() -> int:
    return len(render_messages([{"role": "user", "content": PROMPT}]).ids)


def test_this_run_passes_each_step_and_is_logged_once(run_page, gateway_env):
    app = run_page("gateway", prompt=PROMPT, max_tokens=4)
    assert not app.exception and not app.error
    steps = [STEP.search(m.value).groups() for m in app.markdown if STEP.search(m.value)]
    assert steps == [("Auth", "passed"), ("Rate limit", "passed"), ("Routing", "passed"), ("Logging", "recorded")]
    assert "Key 'class' accepted." in [t.value for t in app.text]

    log = _table(app, "this run")
    mine = log[log["this run"]]
    assert len(mine) == 1
    row = mine.iloc[0]
    assert row["key name"] == "class" and row["status"] == 200 and row["outcome"] == "ok"
    assert row["prompt tokens"] == _prompt_tokens() and row["completion tokens"] == 4
    assert row["finish_reason"] == "length"

    again = run_page("gateway", prompt=PROMPT, max_tokens=4)  # a second session, same run
    assert not again.exception
    with CallLog(gateway_env) as reopened:  # what a restarted server would read
        ids = [record.id for record in reopened.recent(100)]
        assert ids.count(row["id"]) == 1
        stored = reopened.get(row["id"])
    assert stored.total_tokens == _prompt_tokens() + 4
    assert KEY.encode() not in gateway_env.read_bytes()


def test_a_wrong_key_gets_401_with_the_error_envelope(run_page, gateway_env):
    app = run_page("gateway", prompt=PROMPT, max_tokens=4)
    app.radio(key="gateway_key_choice").set_value("wrong").run()
    assert not app.exception
    answer = next(code.value for code in app.code if code.value.startswith("HTTP/1.1 401"))
    assert answer.startswith("HTTP/1.1 401 Unauthorized\n")
    assert "x-request-id: req_" in answer
    envelope = json.loads(answer.split("\n\n", 1)[1])
    assert envelope["error"]["code"] == "invalid_api_key" and envelope["error"]["message"] == "Incorrect API key provided."
    assert KEY not in answer

    app.radio(key="gateway_key_choice").set_value("none").run()
    answer = next(code.value for code in app.code if code.value.startswith("HTTP/1.1 401"))
    assert "You didn't provide an API key" in answer


def test_a_burst_over_the_limit_gets_429_with_the_limiter_headers(run_page, gateway_env):
    app = run_page("gateway", prompt=PROMPT, max_tokens=4)
    assert not app.exception
    cost = _prompt_tokens() + 4
    limiter = RateLimiter(10, 12 * cost)
    expected = [limiter.decide("demo", cost, now=i / 12) for i in range(12)]  # the page's defaults
    table = _table(app, "retry-after (s)")
    assert list(table["status"]) == [d.status for d in expected] == [200] * 10 + [429] * 2
    assert list(table["requests left"]) == [d.headers["x-ratelimit-remaining-requests"] for d in expected]
    answer = next(code.value for code in app.code if code.value.startswith("HTTP/1.1 429"))
    first_refused = expected[10]
    assert f"retry-after: {first_refused.headers['retry-after']}" in answer
    assert f"x-ratelimit-reset-requests: {first_refused.headers['x-ratelimit-reset-requests']}" in answer
    assert json.loads(answer.split("\n\n", 1)[1]) == first_refused.error()

    chart = json.loads(next(el for el in app.get("plotly_chart") if "bucket_chart" in el.proto.id).proto.spec)
    refused_marks = next(trace for trace in chart["data"] if trace["name"] == "refused (429)")
    assert refused_marks["x"] == pytest.approx([10 / 12, 11 / 12])

    app.number_input(key="gateway_count").set_value(5).run()
    assert list(_table(app, "retry-after (s)")["status"]) == [200] * 5
    assert not [code for code in app.code if code.value.startswith("HTTP/1.1 429")]
