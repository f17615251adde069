"""Gateway page: authentication, rate limiting, routing and logging, decided by the real gateway.

"Send it through the gateway" makes a real HTTP request (in-process) to a gateway of this
visitor's own: the real API code with a demo key, its own rate-limit buckets and its own in-memory
log, so no configured key's budget is spent and the server's call log gets no row. A visitor who
presents their API key also sees the gateway's decisions on their own real API calls.

The request's form is the picture; the rate-limit what-if (its inputs, chart and table) and the visitor's own calls
come in the run after it is drawn (ui.when_idle), so a new tab does not wait for their code.
"""

from datetime import datetime

import pandas as pd
import streamlit as st

from charts.gateway import bucket_chart
from charts.live_calls import gateway_rows
from lifecycle.journey import Journey, journey_request
from lifecycle.api.wire import render_http_response
from lifecycle.api.access import call_reader
from lifecycle.api.demo import DEMO_KEY_NAME, DemoAnswer, DemoGateway
from lifecycle.api.exchange import new_request_id
from lifecycle.api.ratelimit import RateLimiter
from lifecycle.api.routes import default_server
from lifecycle.lessons.gateway import gateway_lesson
from lifecycle.lessons.words import counted
from ui.cache import cached_journey
from ui.deployment import local_only
from ui.frame import lesson, stage_page
from ui.tables import fitted_table
from ui.text import literal, ms
from ui.when_idle import details_ready

WRONG_KEY = "sk-wrong-0000000000000000"
DEMO_KEY = "demo"
LOG_ROWS = 50
BURST_ROWS_SHOWN = 25  # rows of the burst table in view without scrolling
DEMO_STATE = "gateway_demo"  # session state: this visitor's own demo gateway
ANSWER_STATE = "gateway_demo_answer"
VISITOR_KEY_STATE = "live_calls_key"  # the key a visitor presented on the Live calls page (session only)
DETAILS = "gateway_details"  # ui.when_idle: the rate-limit what-if and the visitor's own calls follow the form
STEP_ICONS = {"passed": ":material/check_circle:", "admitted": ":material/check_circle:", "recorded": ":material/save:",
              "refused": ":material/block:", "cancelled": ":material/remove_circle_outline:",
              "charged": ":material/check_circle:", "not charged": ":material/remove_circle_outline:"}


def _demo() -> DemoGateway:
    if DEMO_STATE not in st.session_state:
        st.session_state[DEMO_STATE] = DemoGateway()
    return st.session_state[DEMO_STATE]


def _show_steps(steps: list[dict]) -> None:
    for column, step in zip(st.columns(len(steps), border=True), steps):
        with column:
            status = "" if step.get("status") is None else f" · {step['status']}"
            st.markdown(f"{STEP_ICONS.get(step.get('outcome'), '')} **{literal(str(step.get('step')).capitalize())}**: "
                        f"{literal(step.get('outcome'))}{status}")
            st.text(str(step.get("detail")))


def _demo_call(journey: Journey, settings) -> None:
    st.subheader("Send this request through the gateway", anchor=False)
    demo = _demo()
    limits = demo.server.config
    st.markdown(
        f"A real HTTP request, your sidebar's request as its body, to a gateway of your own: the server's "
        f"real code with a demo key named **{DEMO_KEY_NAME}**, its own buckets (**{limits.requests_per_minute} "
        f"requests** and **{limits.tokens_per_minute:,} tokens** per minute) and its own log. Send it a few "
        "times to meet the rate limit; no real key's budget is spent."
    )
    with st.form("gateway_demo_form"):
        left, right = st.columns(2)
        choice = left.radio(
            "Key the client presents", ["demo", "wrong", "none"], horizontal=True, key="gateway_key_choice",
            format_func={"demo": "the demo key", "wrong": "a wrong key", "none": "no Authorization header"}.get,
        )
        model = right.text_input("model", journey.model_name, key="gateway_model", max_chars=200)
        sent = st.form_submit_button("Send it through the gateway", icon=":material/send:", key="gateway_send")
    if sent:
        presented = {"demo": demo.key, "wrong": WRONG_KEY, "none": None}[choice]
        payload = {**journey_request(settings.journey_input()).to_payload(), "model": model, "stream": False}
        payload.pop("stream_options", None)
        with st.spinner("The gateway is deciding…", show_time=True):
            st.session_state[ANSWER_STATE] = demo.send(payload, presented)
    answer: DemoAnswer | None = st.session_state.get(ANSWER_STATE)
    if answer is None:
        st.caption("Nothing sent yet.")
        return
    if answer.steps:
        _show_steps([*answer.steps, {"step": "logging", "outcome": "recorded", "status": None,
                                     "detail": f"Logged under the key name '{DEMO_KEY_NAME}', never the key."}])
    else:
        st.info(f"HTTP {answer.status} at the first step: without a valid key the gateway stops at auth and keeps "
                "only a counter (and, per client address, a bucket of its own). Nothing was logged.",
                icon=":material/block:")
    st.code(render_http_response(answer.status, answer.headers, answer.body), language="http", wrap_lines=True)


def _own_calls() -> None:
    st.subheader("Your own API calls", anchor=False)
    server = default_server()
    reader = call_reader(st.session_state.get(VISITOR_KEY_STATE) or None, server.config, local_only())
    if not reader.sees_any:
        st.caption("Present your API key on the Live calls page (it stays in this browser session) to see the "
                   "gateway's decisions on the calls you send to this server's /v1.")
        return
    records = server.gateway.log.recent(LOG_ROWS, key_name=reader.only_key)
    if not records:
        st.caption(f"No call yet ({literal(reader.reason)}). Send one to /v1; it appears here.")
        return
    latest = records[0]
    st.caption(f"The newest of {counted(len(records), 'call')} you may see: {latest.id}, answered "
               f"HTTP {latest.status} in {ms(latest.duration)}. Key names only: a key itself is never stored.")
    steps = pd.DataFrame(gateway_rows((latest.journey or {}).get("gateway") or []),
                         columns=["step", "outcome", "status", "at (ms)", "detail"])
    fitted_table(steps, ["step", "outcome", "status", "detail"], key="own_steps", full_from=600, hide_index=True,
                 narrow_widths={"step": 75, "outcome": 75, "status": 50, "detail": 130})
    table = pd.DataFrame(
        {
            "id": [r.id for r in records],
            "time": [datetime.fromtimestamp(r.created).strftime("%Y-%m-%d %H:%M:%S") for r in records],
            "key name": [r.key_name for r in records],
            "status": [r.status for r in records],
            "outcome": [r.outcome for r in records],
            "prompt tokens": [r.prompt_tokens for r in records],
            "completion tokens": [r.completion_tokens for r in records],
            "duration (ms)": [None if r.duration is None else round(r.duration * 1000, 1) for r in records],
        }
    )
    fitted_table(table, {"status": "status", "outcome": "outcome", "prompt tokens": "prompt",
                         "completion tokens": "completion", "duration (ms)": "ms"},
                 key="call_log", full_from=950, hide_index=True,
                 narrow_widths={"status": 55, "outcome": 75, "prompt": 65, "completion": 85, "ms": 60})


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
    never = sum(decision.status == 400 for _, decision in calls)
    st.markdown(f"**{admitted} of {len(calls)}** calls admitted, **{len(calls) - admitted - never}** refused with 429"
                + (f", **{never}** with 400 (one call costs more tokens than the whole minute's limit: no wait helps)."
                   if never else "."))
    st.plotly_chart(
        bucket_chart(
            [t for t, _, _ in samples], [r for _, r, _ in samples], [k for _, _, k in samples],
            [t for t, _ in calls], [d.allowed for _, d in calls], int(rpm), int(tpm),
        ),
        key="bucket_chart",
        theme=None,
    )
    fitted_table(
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
        {"call": "call", "status": "status", "requests left": "req. left", "tokens left": "tokens left",
         "retry-after (s)": "retry (s)"},
        key="burst_table", full_from=450, hide_index=True,
        height=35 * (min(len(calls), BURST_ROWS_SHOWN) + 1) + 3,  # the refused calls come last: show them too
        narrow_widths={"call": 45, "status": 55, "req. left": 70, "tokens left": 80, "retry (s)": 70},
    )
    refused = next((decision for _, decision in calls if not decision.allowed), None)
    if refused is not None:
        st.caption("The first refused call's answer, as the API sends it:")
        headers = {"content-type": "application/json", **refused.headers, "x-request-id": new_request_id()}
        st.code(render_http_response(refused.status, headers, refused.error()), language="http", wrap_lines=True)


def render() -> None:
    with stage_page("gateway") as settings:
        journey = cached_journey(settings)
        usage = journey.response["usage"]
        lesson(gateway_lesson(usage["prompt_tokens"], journey.input.max_tokens, journey.model_name))
        _demo_call(journey, settings)
        if not details_ready(DETAILS):
            return
        _limit_demo(journey)
        _own_calls()
