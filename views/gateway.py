"""Gateway page: authentication, rate limiting, routing and logging of this call, with their outcomes."""

from datetime import datetime

import pandas as pd
import streamlit as st

from charts.gateway import bucket_chart
from lifecycle.errors import LifecycleError
from lifecycle.server.calllog import CallRecord
from lifecycle.server.endpoints import ApiServer
from lifecycle.server.exchange import new_request_id
from lifecycle.server.gateway import gateway_steps
from lifecycle.server.keys import KEYS_ENV, check_api_key
from lifecycle.server.ratelimit import RateLimiter
from lifecycle.server.routes import default_server
from lifecycle.server.routing import route
from lifecycle.journey import Journey
from lifecycle.server.wire import render_http_response
from ui.cache import cached_journey
from ui.frame import lesson, stage_page

WRONG_KEY = "sk-wrong-0000000000000000"
DEMO_KEY = "demo"
LOG_ROWS = 50
STEP_ICONS = {"passed": ":material/check_circle:", "recorded": ":material/save:",
              "refused": ":material/block:", "skipped": ":material/remove_circle_outline:"}


def _server() -> ApiServer:
    """The process's API server: the same keys, rate limiter and SQLite call log as /v1."""
    try:
        secrets = {KEYS_ENV: st.secrets[KEYS_ENV]} if KEYS_ENV in st.secrets else None
    except FileNotFoundError:  # no secrets.toml: keys come from the environment or a development key
        secrets = None
    return default_server(secrets)


@st.cache_resource(max_entries=64, show_spinner=False)
def _app_call(call_id: str, log_path: str, _journey: Journey, _server: ApiServer) -> tuple:
    """The gateway's decisions for this app run, taken once per journey, and its call-log row.

    The pages run the model directly, but the run is a call like any other: it is checked with the
    server's first key, spends from that key's real buckets, and is logged once under its id.
    """
    key_name, secret = next(iter(_server.config.keys.items()))
    auth = check_api_key(secret, _server.config.keys)
    usage = _journey.response["usage"]
    rate = _server.limiter.decide(key_name, usage["prompt_tokens"] + _journey.input.max_tokens)
    routing = route(_journey.request.model, [_journey.model_name])
    steps = gateway_steps(auth, rate, routing)[:3]
    record = _server.log.get(call_id) or _record(call_id, key_name, rate, steps, _journey, _server)
    return tuple(gateway_steps(auth, rate, routing, record)), rate


def _record(call_id, key_name, rate, steps, journey: Journey, server: ApiServer) -> CallRecord:
    usage = journey.response["usage"]
    record = CallRecord(
        id=call_id, key_name=key_name, model=journey.model_name, status=rate.status,
        outcome="ok" if rate.allowed else "rate_limited",
        finish_reason=journey.response["choices"][0]["finish_reason"],
        prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"],
        ttft=round(journey.stream_metrics.ttft, 6), duration=round(journey.total_seconds, 6),
        journey={
            "source": "app pages (the model was run directly, not over HTTP)",
            "request": {"validated": journey.request.to_payload()},
            "gateway": [{"step": s.name, "outcome": s.outcome, "detail": s.detail, "status": s.status} for s in steps],
            "response": {"status": 200, "body": journey.response},
        },
    )
    try:
        return server.log.record(record)
    except LifecycleError:  # another session logged the same run a moment ago
        return server.log.get(call_id)


def _show_steps(steps) -> None:
    for column, step in zip(st.columns(len(steps), border=True), steps):
        with column:
            status = "" if step.status is None else f" · {step.status}"
            st.markdown(f"{STEP_ICONS.get(step.outcome, '')} **{step.name.capitalize()}**: {step.outcome}{status}")
            st.text(step.detail)


def _wrong_key_demo(server: ApiServer) -> None:
    st.subheader("Try a wrong key", anchor=False)
    key_name = next(iter(server.config.keys))
    choice = st.radio(
        "Key the client presents",
        ["configured", "wrong", "none"],
        format_func={"configured": f"the configured key '{key_name}'", "wrong": f"a wrong key ({WRONG_KEY})",
                     "none": "no Authorization header"}.get,
        horizontal=True,
        key="gateway_key_choice",
    )
    presented = {"configured": server.config.keys[key_name], "wrong": WRONG_KEY, "none": None}[choice]
    auth = check_api_key(presented, server.config.keys)
    st.caption("Decided by the server's real key check (constant-time, against every configured key); "
               "nothing is sent over HTTP and nothing is logged.")
    if auth.allowed:
        st.success(f"{auth.message} The call goes on to the rate limiter.", icon=":material/check_circle:")
        return
    headers = {"content-type": "application/json", "x-request-id": new_request_id()}
    st.code(render_http_response(auth.status, headers, auth.error()), language="http", wrap_lines=True)


def _burst(rpm: int, tpm: int, count: int, seconds: float, cost: int):
    """A burst of ``count`` equal calls spread over ``seconds`` through a fresh real RateLimiter,
    with explicit times: the bucket levels just before and just after each call, then the refill."""
    limiter = RateLimiter(rpm, tpm)
    samples, calls = [], []
    for index in range(count):
        now = index * seconds / count
        before = limiter.snapshot(DEMO_KEY, now)
        decision = limiter.decide(DEMO_KEY, cost, now)
        samples += [(now, before.requests, before.tokens), (now, decision.levels.requests, decision.levels.tokens)]
        calls.append((now, decision))
    end = seconds + max(2.0, seconds)
    for step in range(1, 41):
        levels = limiter.snapshot(DEMO_KEY, calls[-1][0] + (end - calls[-1][0]) * step / 40)
        samples.append((levels.at, levels.requests, levels.tokens))
    return samples, calls


def _limit_demo(journey: Journey) -> None:
    st.subheader("Exceed the rate limit (what-if)", anchor=False)
    cost = journey.response["usage"]["prompt_tokens"] + journey.input.max_tokens
    st.markdown(
        "Set limits and fire a burst of calls like this one. Each call costs **1 request** and "
        f"**{cost:,} tokens** (this prompt's {journey.response['usage']['prompt_tokens']:,} tokens plus "
        f"max_tokens {journey.input.max_tokens:,}, reserved up front). The buckets below are the gateway's "
        "real `RateLimiter` run on simulated clock times: a computation, not a live server."
    )
    left, right = st.columns(2)
    rpm = left.number_input("Requests per minute (limit)", 1, 10_000, 10, key="gateway_rpm")
    tpm = right.number_input("Tokens per minute (limit)", 1, 10_000_000, 12 * cost, key="gateway_tpm")
    count = left.number_input("Requests to send", 1, 200, 12, key="gateway_count")
    seconds = right.number_input("…within seconds", 0.01, 600.0, 1.0, 0.5, key="gateway_seconds")
    samples, calls = _burst(int(rpm), int(tpm), int(count), float(seconds), cost)
    admitted = sum(decision.allowed for _, decision in calls)
    st.markdown(f"**{admitted} of {len(calls)}** calls admitted, **{len(calls) - admitted}** refused with 429.")
    st.plotly_chart(
        bucket_chart(
            [t for t, _, _ in samples], [r for _, r, _ in samples], [k for _, _, k in samples],
            [t for t, _ in calls], [d.allowed for _, d in calls], int(rpm), int(tpm),
        ),
        key="bucket_chart",
        theme=None,
    )
    st.dataframe(
        pd.DataFrame(
            {
                "call": range(1, len(calls) + 1),
                "sent at (s)": [round(t, 3) for t, _ in calls],
                "status": [d.status for _, d in calls],
                "requests left": [d.headers["x-ratelimit-remaining-requests"] for _, d in calls],
                "tokens left": [d.headers["x-ratelimit-remaining-tokens"] for _, d in calls],
                "retry-after (s)": [d.headers.get("retry-after", "") for _, d in calls],
            }
        ),
        hide_index=True,
        key="burst_table",
    )
    refused = next((decision for _, decision in calls if not decision.allowed), None)
    if refused is not None:
        st.caption("The first refused call's answer, as the API sends it:")
        headers = {"content-type": "application/json", **refused.headers, "x-request-id": new_request_id()}
        st.code(render_http_response(429, headers, refused.error()), language="http", wrap_lines=True)


def _call_log(server: ApiServer, this_call: str) -> None:
    st.subheader("The call log", anchor=False)
    records = server.log.recent(LOG_ROWS)
    st.caption(f"The newest {len(records)} calls in the SQLite log the API writes ({server.log.path}), from "
               "any client and from these pages. Key names only: a key itself is never stored.")
    table = pd.DataFrame(
        {
            "id": [r.id for r in records],
            "time": [datetime.fromtimestamp(r.created).strftime("%Y-%m-%d %H:%M:%S") for r in records],
            "key name": [r.key_name for r in records],
            "status": [r.status for r in records],
            "outcome": [r.outcome for r in records],
            "finish_reason": [r.finish_reason for r in records],
            "prompt tokens": [r.prompt_tokens for r in records],
            "completion tokens": [r.completion_tokens for r in records],
            "total tokens": [r.total_tokens for r in records],
            "TTFT (ms)": [None if r.ttft is None else round(r.ttft * 1000, 1) for r in records],
            "duration (ms)": [None if r.duration is None else round(r.duration * 1000, 1) for r in records],
            "this run": [r.id == this_call for r in records],
        }
    )
    st.dataframe(table, hide_index=True, key="call_log")


with stage_page("gateway") as settings:
    journey = cached_journey(settings)
    server = _server()
    call_id = journey.response["id"]
    steps, rate = _app_call(call_id, str(server.log.path), journey, server)
    limits = rate.levels
    lesson(
        f"Before the model sees a single token, the gateway decides. This run presented the key named "
        f"**{limits.key_name}**, "
        f"which had **{int(limits.requests)} of {limits.requests_limit} requests** and "
        f"**{int(limits.tokens):,} of {limits.tokens_limit:,} tokens** left this minute after paying for "
        f"this call ({journey.response['usage']['prompt_tokens'] + journey.input.max_tokens:,} tokens: prompt "
        f"plus max_tokens). It was routed to the **{journey.model_name}** backend and logged as "
        f"**{call_id}**. A wrong key would have stopped it at step one with 401, an empty bucket with 429."
    )
    st.subheader("This call through the gateway", anchor=False)
    _show_steps(steps)
    if not rate.allowed:
        st.warning("The key's real bucket was empty: an API call would have got this 429. "
                   "The pages ran the model anyway so the other stages have something to show.")
    _wrong_key_demo(server)
    _limit_demo(journey)
    _call_log(server, call_id)
