"""Failures page: the official openai SDK living through a fault on a gateway of the visitor's own.

The visitor picks a fault (a 429 with retry-after, a 500 or 503, a reset connection, a slow first
byte, a stream cut after N tokens, a wrong key, an invalid parameter), how many attempts meet it, and
the client's max_retries and timeout. One real SDK call goes over a loopback socket to the faulty
gateway, which injects the fault and forwards the other attempts to this visitor's own demo gateway;
the timeline is the gateway's record of the attempts it received.
"""

import inspect
from collections.abc import Callable

import pandas as pd
import streamlit as st

from charts.failures import attempts_timeline
from lifecycle.stages.context_window import render_messages
from lifecycle.faults.client import (
    INVALID_TEMPERATURE, MAX_RETRIES, MAX_TIMEOUT, MIN_TIMEOUT, ClientRun, ClientSettings, SdkRetryPolicy,
    call_through_faults,
)
from lifecycle.faults.gateway import PLAN_HEADER, shared_fault_gateway
from lifecycle.faults.ledger import ledger
from lifecycle.faults.patterns import (
    Call, CircuitBreaker, PatternRun, Route, circuit_breaker, deadline, fall_back, rotate_keys_on_429, worth_retrying,
)
from lifecycle.faults.plan import LABELS, MAX_CUT_AFTER, MAX_DELAY, MAX_FAILURES, MAX_RETRY_AFTER, Fault, FaultPlan
from lifecycle.journey import journey_request
from lifecycle.api.demo import DemoGateway
from lifecycle.lessons.failures import failures_lesson
from lifecycle.lessons.words import counted
from ui.frame import lesson, loaded_model, show_text, stage_page
from ui.tables import fitted_table
from ui.text import literal, ms

DEMO_STATE = "failures_demo"  # session state: this visitor's own demo gateway behind the faults
RUN_STATE = "failures_run"
RESEND_STATE = "failures_resend_run"  # (the cut run's traceparent, the call that sent it all again)
DEMO_REQUESTS_PER_MINUTE = 30
MAX_ANSWER_TOKENS = 24  # the lesson is in the attempts: each one that reaches the model stays short


def _demo() -> DemoGateway:
    if DEMO_STATE not in st.session_state:
        st.session_state[DEMO_STATE] = DemoGateway(requests_per_minute=DEMO_REQUESTS_PER_MINUTE)
    return st.session_state[DEMO_STATE]


def _form() -> tuple[FaultPlan, ClientSettings] | None:
    with st.form("failures_form"):
        left, right = st.columns(2)
        fault = left.selectbox("Fault the gateway injects", list(Fault), index=list(Fault).index(Fault.SERVER_ERROR),
                               format_func=LABELS.get, key="failures_fault")
        failures = right.number_input("…on the first N attempts", 0, MAX_FAILURES, 2, key="failures_count",
                                      help="Later attempts are answered normally by your demo gateway.")
        max_retries = left.number_input("Client max_retries", 0, MAX_RETRIES, SdkRetryPolicy().default_max_retries,
                                        key="failures_retries")
        timeout = right.number_input("Client timeout (s, per attempt)", MIN_TIMEOUT, MAX_TIMEOUT, 10.0, 0.5,
                                     key="failures_timeout")
        retry_after = left.number_input("retry-after of a 429 (s)", 0.0, MAX_RETRY_AFTER, 1.0, 0.5,
                                        key="failures_retry_after")
        delay = right.number_input("Slow first byte: delay (s)", 0.0, MAX_DELAY, 3.0, 0.5, key="failures_delay")
        cut_after = left.number_input("Stream cut after N tokens", 0, MAX_CUT_AFTER, 3, key="failures_cut")
        sent = st.form_submit_button("Call it with the openai SDK", icon=":material/play_arrow:", key="failures_send")
    if not sent:
        return None
    plan = FaultPlan(fault, int(failures), float(retry_after), float(delay), int(cut_after))
    return plan, ClientSettings(int(max_retries), float(timeout))


def _outcomes(run: ClientRun) -> list[str]:
    last = len(run.attempts) - 1
    return ["retried" if i < last else ("answered" if run.succeeded else "gave up") for i in range(len(run.attempts))]


def _summary(run: ClientRun) -> str:
    statuses = ", ".join("reset" if a.status is None and "reset" in a.answer else
                         "no answer" if a.status is None else str(a.status) for a in run.attempts)
    waits = ", ".join(f"{w:.2f} s" for w in run.waits)
    sentence = (f"The SDK made **{counted(len(run.attempts), 'attempt')}** in **{ms(run.seconds)}** ({statuses})"
                + (f", sleeping {waits} between them." if waits else "."))
    if run.succeeded:
        return sentence + f" Then it returned the answer (finish_reason {literal(run.finish_reason)})."
    return sentence + f" Then it gave up and raised **{literal(run.error)}**."


def _bounds(run: ClientRun) -> str:
    """What the SDK's policy allowed for each sleep of this run."""
    parts = []
    for retries_taken, (attempt, wait) in enumerate(zip(run.attempts, run.waits)):
        if run.plan.fault is Fault.RATE_LIMIT and attempt.status == 429 and run.policy.honours(run.plan.retry_after):
            parts.append(f"sleep {retries_taken + 1}: {wait:.2f} s for retry-after {run.plan.retry_after:g} s")
        else:
            low, high = run.policy.backoff_bounds(retries_taken)
            parts.append(f"sleep {retries_taken + 1}: {wait:.2f} s, backoff allows {low:.2f}–{high:.2f} s")
    return "; ".join(parts)


def _attempt_table(run: ClientRun) -> None:
    table = pd.DataFrame({
        "attempt": [a.number for a in run.attempts],
        "arrived (s)": [round(run.arrived(a), 3) for a in run.attempts],
        "client done (s)": [round(run.given_up(a) - run.started, 3) for a in run.attempts],
        "status": [a.status for a in run.attempts],
        "the gateway's answer": [a.answer for a in run.attempts],
        "x-stainless-retry-count": [a.retry_count for a in run.attempts],
        "x-request-id": [a.request_id for a in run.attempts],
        "traceparent": [a.traceparent for a in run.attempts],
    })
    fitted_table(table, {"attempt": "#", "arrived (s)": "arrived", "status": "status",
                         "the gateway's answer": "answer"},
                 key="failures_attempts", full_from=1300, hide_index=True,
                 narrow_widths={"#": 35, "arrived": 65, "status": 55, "answer": 160})


def _recovery(run: ClientRun, resend: Callable[[], ClientRun]) -> None:
    """Recover a cut stream the only way there is: send the whole request again, and show what it cost."""
    if st.button("Send the whole request again", icon=":material/replay:", key="failures_resend"):
        with st.spinner("Sending it again…", show_time=True):
            st.session_state[RESEND_STATE] = (run.traceparent, resend())
    done = st.session_state.get(RESEND_STATE)
    if done is None or done[0] != run.traceparent:
        return
    again = done[1]
    if not again.succeeded or again.usage is None:
        st.markdown(f"The second call failed too: **{literal(again.error)}**.")
        return
    usage = again.usage
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    st.markdown(
        f"The second call paid for **{usage['prompt_tokens']:,} prompt tokens** again, **{cached:,}** of them served "
        f"from the server's prefix cache (`cached_tokens`), and answered {counted(usage['completion_tokens'], 'token')} "
        f"in {ms(again.seconds)}, finish_reason **{literal(again.finish_reason)}**:")
    show_text(again.text)


def _holding(run: ClientRun, prompt_tokens: int, resend: Callable[[], ClientRun]) -> None:
    st.subheader("What the client holds", anchor=False)
    if run.error is not None:
        st.markdown(f"An exception, **{literal(run.error)}**"
                    + (f" (HTTP {run.error_status})" if run.error_status else "") + ", with the message:")
        show_text(run.error_message or "")
    if run.streamed:
        tokens = "token" if run.chunks == 1 else "tokens"
        st.markdown(f"**{run.chunks:,}** streamed {tokens} of text, finish_reason **{literal(run.finish_reason)}**, "
                    f"usage **{'none' if run.usage is None else literal(run.usage.get('total_tokens'))}**:")
        show_text(run.text or "∅")
        if run.error is not None:
            st.markdown(
                "The SDK does not retry a stream that broke after its first byte: the application must send the "
                "whole request again, and pay for the prompt again"
                + f" (**{prompt_tokens:,}** prompt tokens by the model's tokenizer, less whatever the server's prefix "
                "cache still holds of them)."
            )
            _recovery(run, resend)
    elif run.succeeded:
        show_text(run.text)
        usage = run.usage or {}
        st.caption(f"usage: {literal(usage.get('prompt_tokens'))} prompt + {literal(usage.get('completion_tokens'))} "
                   f"completion tokens; x-request-id {literal(run.request_id)}")


def _show(run: ClientRun, prompt_tokens: int, max_tokens: int, resend: Callable[[], ClientRun]) -> None:
    st.markdown(_summary(run))
    figure = attempts_timeline(
        [f"{a.number} · {a.status if a.status is not None else '—'}" for a in run.attempts],
        [run.arrived(a) for a in run.attempts], [run.given_up(a) - run.started for a in run.attempts],
        _outcomes(run), run.waits)
    st.plotly_chart(figure, key="failures_timeline", theme=None)
    if run.waits:
        st.caption(_bounds(run) + ".")
    _attempt_table(run)
    traceparents = {a.traceparent for a in run.attempts}
    st.caption(f"Every attempt carried the same W3C traceparent ({literal(run.traceparent)}): one user action, "
               f"{counted(len(run.attempts), 'attempt')}, tied together." if traceparents == {run.traceparent} else
               "The attempts carried different traceparents.")
    _holding(run, prompt_tokens, resend)
    _ledger(run, prompt_tokens, max_tokens)


def _ledger(run: ClientRun, prompt_tokens: int, max_tokens: int) -> None:
    with st.expander("Cost ledger: the estimate before the call, the usage reported, the difference",
                     icon=":material/receipt_long:"):
        left, right = st.columns(2)
        input_price = left.number_input("Price per 1M input tokens", 0.0, 1000.0, 1.0, 0.1, key="failures_in_price")
        output_price = right.number_input("Price per 1M output tokens", 0.0, 1000.0, 4.0, 0.1,
                                          key="failures_out_price")
        st.caption("Example prices, not any vendor's: set your own.")
        lines = ledger(prompt_tokens, max_tokens, run.usage, float(input_price), float(output_price))
        st.dataframe(pd.DataFrame({
            "line": [line.label for line in lines],
            "input tokens": [line.input_tokens for line in lines],
            "output tokens": [line.output_tokens for line in lines],
            "cost": [f"{line.cost:.6f}" for line in lines],
        }), hide_index=True, key="failures_ledger")
        if run.usage is None:
            st.markdown("No usage came back, so there is nothing to reconcile: the server may still bill what it "
                        "generated. Keep each attempt's x-request-id: it is what a support ticket or an invoice "
                        "dispute starts from.")


def _policy_details(policy: SdkRetryPolicy) -> None:
    with st.expander("The SDK's retry policy, as installed", icon=":material/policy:"):
        first_low, first_high = policy.backoff_bounds(0)
        st.markdown(
            f"openai **{policy.version}** (`openai/_base_client.py`): by default **{policy.default_max_retries}** "
            "retries after the first attempt. It retries a connection error, a timeout, 408, 409, 429 and any 5xx; "
            "never another 4xx such as 400, 401, 403 or 404 (a wrong key or a bad parameter fails the same way "
            f"again). Before retry *n* it sleeps {policy.initial_delay:g} s × 2ⁿ⁻¹, at most {policy.max_delay:g} s, "
            f"minus a random jitter of up to {policy.jitter:.0%} (so the first sleep is "
            f"{first_low:.3f}–{first_high:.3f} s); a `retry-after` (or `retry-after-ms`) above 0 and up to "
            f"{policy.max_retry_after:g} s is slept exactly instead, and a longer one means no retry at all. "
            "The timeout is per attempt, not for the whole call."
        )
        st.code(
            "from openai import OpenAI\n\n"
            "client = OpenAI(base_url=..., api_key=..., max_retries=2, timeout=10.0,\n"
            "                default_headers={\"traceparent\": \"00-<trace id>-<span id>-01\"})\n"
            "client.chat.completions.create(model=..., messages=..., max_tokens=...)",
            language="python",
        )
    with st.expander("How the faults reach only you", icon=":material/lock:"):
        gateway = shared_fault_gateway()
        st.markdown(
            f"The faulty gateway is a real HTTP server on {literal(gateway.url)} inside this app. Each call registers "
            f"a fault plan with a random id, sent in the `{PLAN_HEADER}` header; a request without a registered id "
            "gets a 404 and reaches no gateway. Attempts that do not meet the fault are forwarded to a demo gateway "
            f"of your own (its own key, {DEMO_REQUESTS_PER_MINUTE} requests a minute, an in-memory log), never to "
            "a configured key or the server's call log. A wrong key is a key your gateway does not know; an invalid "
            f"parameter is temperature {INVALID_TEMPERATURE:g}, outside [0, 2]."
        )


PATTERNS = {
    "rotate": "Rotate to a second key on 429",
    "fallback": "Fall back to another route",
    "breaker": "Circuit breaker",
    "deadline": "Deadline for the whole call (tenacity)",
}
PATTERN_STATE = "failures_pattern_run"
SECOND_DEMO_STATE = "failures_demo_second"  # a second key of your own, with its own buckets
ROTATE_RETRY_AFTER = 20.0


def _second_demo() -> DemoGateway:
    if SECOND_DEMO_STATE not in st.session_state:
        st.session_state[SECOND_DEMO_STATE] = DemoGateway(requests_per_minute=DEMO_REQUESTS_PER_MINUTE)
    return st.session_state[SECOND_DEMO_STATE]


def _pattern_setup(name: str):
    """(what it runs against, the function, the code shown, a function running it) for pattern ``name``."""
    first, second = _demo(), _second_demo()
    if name == "rotate":
        routes = [Route("key A", first, FaultPlan(Fault.RATE_LIMIT, MAX_FAILURES, ROTATE_RETRY_AFTER)),
                  Route("key B", second, FaultPlan(Fault.NONE))]
        return (f"key A is rate-limited (429, retry-after {ROTATE_RETRY_AFTER:g} s); key B, a second key of yours "
                "with its own buckets, is not. The SDK's own retries are off (max_retries=0): the application "
                "decides.", routes, [inspect.getsource(rotate_keys_on_429)],
                lambda call: rotate_keys_on_429(call, routes, ClientSettings(0)))
    if name == "fallback":
        routes = [Route("primary", first, FaultPlan(Fault.UNAVAILABLE, MAX_FAILURES)),
                  Route("fallback", second, FaultPlan(Fault.NONE))]
        return ("The primary route answers 503 on every attempt; the fallback route (another provider or model, "
                "here your second demo gateway) is healthy. The SDK retries once on each route (max_retries=1).",
                routes, [inspect.getsource(worth_retrying), inspect.getsource(fall_back)],
                lambda call: fall_back(call, routes, ClientSettings(1)))
    if name == "breaker":
        routes = [Route("flaky", first, FaultPlan(Fault.SERVER_ERROR, 4))]
        return ("Ten user actions 0.4 s apart against a route whose first 4 attempts answer 500; a breaker opens "
                "after 3 failures in a row, for 1 s.", routes,
                [inspect.getsource(CircuitBreaker), inspect.getsource(circuit_breaker)],
                lambda call: circuit_breaker(call, routes[0], ClientSettings(0)))
    routes = [Route("down", first, FaultPlan(Fault.UNAVAILABLE, MAX_FAILURES))]
    return ("A route that answers 503 to everything, and 3 s for the whole call: tenacity retries with "
            "exponential backoff and jitter until the next sleep would pass the deadline.", routes,
            [inspect.getsource(deadline)], lambda call: deadline(call, routes[0], ClientSettings(0, 10.0), 3.0))


def _pattern_section(model_name: str, payload: dict, max_tokens: int) -> None:
    st.subheader("What an application adds on top", anchor=False)
    name = st.selectbox("Pattern", list(PATTERNS), format_func=PATTERNS.get, key="failures_pattern")
    setup, routes, sources, run_it = _pattern_setup(name)
    st.markdown(setup)
    if st.button("Run it live", icon=":material/play_arrow:", key="failures_pattern_send"):
        call = Call(shared_fault_gateway(), model_name, payload["messages"], max_tokens,
                    float(payload.get("temperature", 1.0)))
        with st.spinner("The pattern is running…", show_time=True):
            with shared_fault_gateway().serving([(r.plan, r.demo) for r in routes]):
                st.session_state[PATTERN_STATE] = (name, run_it(call))
    done = st.session_state.get(PATTERN_STATE)
    if done is not None and done[0] == name:
        _show_pattern(done[1])
    with st.expander("The code that ran", icon=":material/code:"):
        for source in sources:
            st.code(source, language="python")


def _show_pattern(pattern: PatternRun) -> None:
    sent = [s for s in pattern.steps if s.run is not None]
    answer = pattern.answer
    st.markdown(
        f"**{counted(len(pattern.steps), 'call')}** in **{ms(pattern.seconds)}**, {len(sent)} sent, "
        f"{len(pattern.steps) - len(sent)} failed fast without sending, "
        f"{counted(sum(len(s.run.attempts) for s in sent), 'attempt')} on the wire; "
        + (f"answered by **{literal(next(s.route for s in pattern.steps if s.run is answer))}**."
           if answer is not None else "no answer.")
    )
    fitted_table(pd.DataFrame({
        "call": range(1, len(pattern.steps) + 1),
        "route": [s.route for s in pattern.steps],
        "at (s)": [round(s.at, 3) for s in pattern.steps],
        "attempts": [None if s.run is None else len(s.run.attempts) for s in pattern.steps],
        "status": [None if s.run is None else (s.run.error_status or (200 if s.run.succeeded else None))
                   for s in pattern.steps],
        "what happened": [s.note for s in pattern.steps],
        "x-request-id": [None if s.run is None else s.run.request_id for s in pattern.steps],
    }), {"call": "#", "route": "route", "status": "status", "what happened": "what happened"},
        key="failures_pattern_steps", full_from=1000, hide_index=True,
        narrow_widths={"#": 35, "route": 75, "status": 55, "what happened": 170})
    st.caption(f"All of it under one traceparent, {literal(pattern.traceparent)}.")


def render() -> None:
    with stage_page("failures") as settings:
        model = loaded_model()
        policy = SdkRetryPolicy()
        low, high = policy.backoff_bounds(0)
        lesson(failures_lesson(policy.version, policy.default_max_retries, low, high, policy.max_delay))
        payload = journey_request(settings.journey_input(), model=model.name).to_payload()
        prompt_tokens = len(render_messages(payload["messages"]).ids)
        max_tokens = min(int(payload.get("max_tokens") or MAX_ANSWER_TOKENS), MAX_ANSWER_TOKENS)
        chosen = _form()
        if chosen is not None:
            plan, client = chosen
            if max_tokens < int(payload.get("max_tokens") or 0):
                st.caption(f"max_tokens is capped at {MAX_ANSWER_TOKENS} here: the lesson is in the attempts.")
            with st.spinner("The SDK is calling through the faults…", show_time=True):
                st.session_state[RUN_STATE] = call_through_faults(
                    shared_fault_gateway(), _demo(), plan, client, model.name, payload["messages"], max_tokens,
                    float(payload.get("temperature", 1.0)))
        run: ClientRun | None = st.session_state.get(RUN_STATE)
        if run is None:
            st.caption("Nothing sent yet.")
        else:
            def resend() -> ClientRun:
                return call_through_faults(shared_fault_gateway(), _demo(), FaultPlan(Fault.NONE), run.settings, model.name,
                                           payload["messages"], run.max_tokens, float(payload.get("temperature", 1.0)))

            _show(run, prompt_tokens, run.max_tokens, resend)
        _policy_details(policy)
        _pattern_section(model.name, payload, max_tokens)
