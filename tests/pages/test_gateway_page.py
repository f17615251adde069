"""The Gateway page: a real request through the visitor's own demo gateway (its key, buckets and log),
the wrong-key, unknown-model and rate-limit answers, and nothing spent or written on the real server."""

from __future__ import annotations

import json
import re

import pytest

from lifecycle.api import routes
from lifecycle.stages.context_window import render_messages
from lifecycle.api.calllog import CallLog
from lifecycle.api.ratelimit import RateLimiter
from tests.pages.harness import markdowns

PROMPT = "Name a colour."
STEP = re.compile(r"\*\*(Auth|Rate limit|Routing|Queue|Logging)\*\*: (\w+)")
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


def _send(app, choice: str = "demo", model: str | None = None):
    app.radio(key="gateway_key_choice").set_value(choice)
    if model is not None:
        app.text_input(key="gateway_model").set_value(model)
    return app.button(key="gateway_send").click().run()


def _steps(app) -> list[tuple[str, str]]:
    return [STEP.search(m).groups() for m in markdowns(app) if STEP.search(m)]


def _answer(app) -> str:
    return next(code.value for code in app.code if code.value.startswith("HTTP/1.1 "))


def test_a_real_request_passes_each_step_without_touching_real_keys_or_the_log(run_page, gateway_env):
    app = run_page("gateway", prompt=PROMPT, max_tokens=4)
    assert not app.exception and not app.error
    assert _steps(app) == []  # nothing is decided before the visitor sends
    app = _send(app)
    assert not app.exception and not app.error
    assert _steps(app) == [("Auth", "passed"), ("Routing", "passed"), ("Rate limit", "passed"), ("Queue", "admitted"),
                           ("Logging", "recorded")]
    answer = _answer(app)
    assert answer.startswith("HTTP/1.1 200 OK\n") and "x-ratelimit-remaining-requests: 4" in answer
    body = json.loads(answer.split("\n\n", 1)[1])
    assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]) == (_prompt_tokens(), 4)
    server = routes.default_server()
    assert server.gateway.limiter.snapshot("class").requests == server.config.requests_per_minute  # untouched
    assert not gateway_env.exists() or CallLog(gateway_env).recent(10) == []


def test_a_wrong_key_and_an_unknown_model_get_the_real_refusals(run_page, gateway_env):
    app = _send(run_page("gateway", prompt=PROMPT, max_tokens=4), "wrong")
    answer = _answer(app)
    assert answer.startswith("HTTP/1.1 401 Unauthorized\n") and "x-request-id: req_" in answer
    envelope = json.loads(answer.split("\n\n", 1)[1])
    assert envelope["error"]["code"] == "invalid_api_key" and envelope["error"]["message"] == "Incorrect API key provided."
    assert any("Nothing was logged" in i.value for i in app.info) and KEY not in answer

    app = _send(app, "none")
    assert "You didn't provide an API key" in _answer(app)

    app = _send(app, "demo", model="gpt-[x](https://evil.example)")
    assert _steps(app) == [("Auth", "passed"), ("Routing", "refused"), ("Logging", "recorded")]
    assert _answer(app).startswith("HTTP/1.1 404 Not Found\n")


def test_the_demo_buckets_run_out_after_five_calls(run_page, gateway_env):
    app = run_page("gateway", prompt=PROMPT, max_tokens=1)
    for _ in range(5):
        app = _send(app)
        assert _answer(app).startswith("HTTP/1.1 200")
    app = _send(app)
    answer = _answer(app)
    assert answer.startswith("HTTP/1.1 429") and "retry-after: " in answer
    assert ("Rate limit", "refused") in _steps(app)


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


def test_a_call_costing_more_than_the_minutes_tokens_is_400_not_429(run_page, gateway_env):
    app = run_page("gateway", prompt=PROMPT, max_tokens=4)
    cost = _prompt_tokens() + 4
    app.number_input(key="gateway_tpm").set_value(cost - 1).run()
    assert not app.exception
    assert list(_table(app, "retry-after (s)")["status"]) == [400] * 12
    answer = next(code.value for code in app.code if code.value.startswith("HTTP/1.1 400"))
    assert "retry-after" not in answer
    assert json.loads(answer.split("\n\n", 1)[1])["error"]["code"] == "request_too_large"
    assert any("**12** with 400" in m for m in markdowns(app))


def test_lesson_reserves_this_prompts_tokens_plus_max_tokens(run_page, gateway_env, loaded):
    app = run_page("gateway", prompt=PROMPT, max_tokens=4)
    lesson = next(m for m in markdowns(app) if "Before the model sees a single token" in m)
    prompt_tokens = _prompt_tokens()
    assert (f"**1 request** and **{prompt_tokens + 4:,} tokens** for this call (its {prompt_tokens:,} prompt tokens "
            "plus max_tokens 4, reserved up front") in lesson
    assert f"which backend serves **{loaded.name}**" in lesson
