"""Failures through the real openai SDK: each fault served over a loopback socket, what the SDK retried,
how long it waited (within its own stated bounds), where it gave up, and what a cut stream leaves."""

from __future__ import annotations

import time

import httpx
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.faults.client import ClientSettings, SdkRetryPolicy, call_through_faults
from lifecycle.faults.gateway import PLAN_HEADER, FaultyGateway
from lifecycle.faults.plan import MAX_FAILURES, Fault, FaultPlan
from lifecycle.api.demo import DemoGateway
from lifecycle.api.serving import model_status

MESSAGES = [{"role": "user", "content": "Name a colour."}]
SLACK = 0.35  # seconds a wait may exceed the SDK's sleep: thread scheduling and the next request's setup
READY_WITHIN = 120.0  # seconds for the engine to be built
EARLY = 0.02  # seconds a wait may look shorter: the gateway stamps its answer just before it is sent


@pytest.fixture(scope="module")
def gateway():
    server = FaultyGateway()
    yield server
    server.close()


@pytest.fixture(scope="module")
def demo(loaded):
    """The visitor's demo gateway, once the API says the model is ready (its engine built)."""
    gateway = DemoGateway(requests_per_minute=60)  # its routes start the API's model loading
    deadline = time.monotonic() + READY_WITHIN
    while model_status().state != "ready":
        assert time.monotonic() < deadline, model_status()
        time.sleep(0.1)
    return gateway


@pytest.fixture
def call(gateway, demo, loaded):
    def run(plan: FaultPlan, max_retries: int = 2, timeout: float = 60.0, max_tokens: int = 4):
        return call_through_faults(gateway, demo, plan, ClientSettings(max_retries, timeout), loaded.name, MESSAGES,
                                   max_tokens, 0.0)
    return run


def test_the_sdk_retries_a_500_with_exponential_backoff_and_jitter_then_succeeds(call):
    run = call(FaultPlan(Fault.SERVER_ERROR, failures=2), max_retries=2)
    assert run.succeeded and run.text and run.finish_reason in ("stop", "length"), (run.error_message, run.attempts)
    assert [a.status for a in run.attempts] == [500, 500, 200]
    assert [a.retry_count for a in run.attempts] == ["0", "1", "2"]  # the SDK's own header, per attempt
    policy = run.policy
    for retries_taken, wait in enumerate(run.waits):
        shortest, longest = policy.backoff_bounds(retries_taken)
        assert shortest - EARLY <= wait <= longest + SLACK, (retries_taken, wait)
    assert len({a.traceparent for a in run.attempts}) == 1 and run.traceparent == run.attempts[0].traceparent
    assert len({a.request_id for a in run.attempts}) == 3  # each answer its own x-request-id
    assert run.request_id == run.attempts[-1].request_id and run.usage["completion_tokens"] > 0


def test_the_sdk_gives_up_on_a_503_after_max_retries(call):
    run = call(FaultPlan(Fault.UNAVAILABLE, failures=5), max_retries=1)
    assert (run.error, run.error_status) == ("InternalServerError", 503)
    assert [a.status for a in run.attempts] == [503, 503]
    assert run.request_id == run.attempts[-1].request_id and not run.text


def test_retry_after_is_honoured_instead_of_backoff(call):
    run = call(FaultPlan(Fault.RATE_LIMIT, failures=1, retry_after=1.3), max_retries=1)
    assert run.succeeded and [a.status for a in run.attempts] == [429, 200]
    assert run.policy.honours(1.3)
    assert 1.3 - EARLY <= run.waits[0] <= 1.3 + SLACK
    # retry-after: 0 is not a usable delay for the SDK: it backs off as for any other retry
    run = call(FaultPlan(Fault.RATE_LIMIT, failures=1, retry_after=0), max_retries=1)
    shortest, longest = run.policy.backoff_bounds(0)
    assert run.succeeded and shortest - EARLY <= run.waits[0] <= longest + SLACK


@pytest.mark.parametrize("fault, error, status", [(Fault.WRONG_KEY, "AuthenticationError", 401),
                                                  (Fault.INVALID_PARAMETER, "BadRequestError", 400)])
def test_no_retry_on_401_or_400(call, fault, error, status):
    run = call(FaultPlan(fault), max_retries=3)
    assert (run.error, run.error_status) == (error, status)
    assert [a.status for a in run.attempts] == [status]  # one attempt though three retries were allowed
    assert run.seconds < run.policy.backoff_bounds(0)[0]  # it never slept


def test_a_reset_connection_is_retried_then_raised_as_a_connection_error(call):
    run = call(FaultPlan(Fault.RESET, failures=3), max_retries=2)
    assert run.error == "APIConnectionError" and run.error_status is None
    assert len(run.attempts) == 3 and all(a.status is None and a.faulted for a in run.attempts)
    for retries_taken, wait in enumerate(run.waits):
        shortest, longest = run.policy.backoff_bounds(retries_taken)
        assert shortest - EARLY <= wait <= longest + SLACK


def test_a_slow_first_byte_meets_the_clients_timeout(call):
    run = call(FaultPlan(Fault.SLOW_FIRST_BYTE, failures=2, delay=5.0), max_retries=0, timeout=0.4)
    assert run.error == "APITimeoutError" and len(run.attempts) == 1
    assert 0.4 <= run.seconds < 0.4 + SLACK
    attempt = run.attempts[0]
    assert attempt.status is None and 0.4 - EARLY <= attempt.answered - attempt.arrived < 0.4 + SLACK


def test_a_cut_stream_leaves_partial_text_without_finish_reason_or_usage(call):
    whole = call(FaultPlan(Fault.NONE), max_tokens=8)
    cut = call(FaultPlan(Fault.STREAM_CUT, failures=1, cut_after=2), max_retries=2, max_tokens=8)
    assert cut.streamed and cut.error == "APIConnectionError"
    assert cut.chunks == 2 == cut.attempts[0].tokens_sent and len(cut.attempts) == 1  # never retried mid-stream
    assert cut.text and whole.text.startswith(cut.text) and cut.text != whole.text
    assert cut.finish_reason is None and cut.usage is None
    assert whole.finish_reason is not None and whole.usage["prompt_tokens"] > 0


def test_faults_never_reach_another_plan_or_a_request_without_one(gateway, demo, call):
    failing = FaultPlan(Fault.SERVER_ERROR, failures=MAX_FAILURES)
    gateway.register(failing, demo)
    try:
        clean = call(FaultPlan(Fault.NONE))
        assert clean.succeeded and [a.status for a in clean.attempts] == [200]
        for headers in ({}, {PLAN_HEADER: "fp_guessed"}, {PLAN_HEADER: clean.plan.id}):  # forgotten after its run
            answer = httpx.post(f"{gateway.url}/v1/chat/completions", json={"messages": MESSAGES},
                                headers={"authorization": f"Bearer {demo.key}", **headers})
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_fault_plan"
        assert gateway.attempts(failing.id) == []  # none of those requests counted against the failing plan
    finally:
        gateway.forget(failing.id)


def test_a_configured_key_gets_nowhere_through_the_faulty_gateway(gateway, demo, loaded):
    plan = FaultPlan(Fault.NONE)
    gateway.register(plan, demo)
    try:
        answer = httpx.post(f"{gateway.url}/v1/chat/completions",
                            json={"model": loaded.name, "messages": MESSAGES, "max_tokens": 1},
                            headers={"authorization": "Bearer sk-configured-elsewhere", PLAN_HEADER: plan.id})
        assert answer.status_code == 401  # only the visitor's demo key is known behind it
        assert list(demo.server.config.keys.values()) == [demo.key]
    finally:
        gateway.forget(plan.id)


@pytest.mark.parametrize("settings, param", [
    ({"failures": -1}, "failures"), ({"failures": 10_000}, "failures"), ({"failures": 1.5}, "failures"),
    ({"retry_after": 3_600}, "retry_after"), ({"delay": -1}, "delay"), ({"cut_after": 1_000}, "cut_after"),
    ({"fault": "meteor"}, "fault"),
])
def test_bad_fault_settings_get_a_clear_message(settings, param):
    with pytest.raises(LifecycleError) as caught:
        FaultPlan(**settings)
    assert caught.value.param == param and param in caught.value.message


@pytest.mark.parametrize("settings, param", [
    ({"max_retries": -1}, "max_retries"), ({"max_retries": 100}, "max_retries"), ({"max_retries": 1.0}, "max_retries"),
    ({"timeout": 0}, "timeout"), ({"timeout": 86_400}, "timeout"),
])
def test_bad_client_settings_get_a_clear_message(settings, param):
    with pytest.raises(LifecycleError) as caught:
        ClientSettings(**settings)
    assert caught.value.param == param and param in caught.value.message


def test_the_stated_policy_is_the_installed_sdks():
    from openai import _constants

    policy = SdkRetryPolicy()
    assert (policy.initial_delay, policy.max_delay, policy.max_retry_after) == (
        _constants.INITIAL_RETRY_DELAY, _constants.MAX_RETRY_DELAY, _constants.MAX_RETRY_AFTER_DELAY)
    assert policy.backoff_bounds(0)[1] == _constants.INITIAL_RETRY_DELAY
    assert policy.backoff_bounds(50)[1] == _constants.MAX_RETRY_DELAY  # capped


def test_the_ledger_sets_the_reported_usage_against_the_estimate(call):
    from lifecycle.stages.context_window import render_messages
    from lifecycle.faults.ledger import ledger

    run = call(FaultPlan(Fault.NONE), max_tokens=6)
    estimated_prompt = len(render_messages(MESSAGES).ids)
    estimate, reported, difference = ledger(estimated_prompt, 6, run.usage, input_price=2.0, output_price=8.0)
    assert reported.input_tokens == run.usage["prompt_tokens"] == estimated_prompt  # the tokenizer's count held
    assert reported.output_tokens == run.usage["completion_tokens"] <= 6
    assert difference.output_tokens == reported.output_tokens - 6 <= 0
    assert reported.cost == pytest.approx((reported.input_tokens * 2.0 + reported.output_tokens * 8.0) / 1e6)
    assert difference.cost == pytest.approx(reported.cost - estimate.cost)
    assert len(ledger(estimated_prompt, 6, None, 1.0, 1.0)) == 1  # a cut stream: no usage to set against it


@pytest.mark.parametrize("sent, kept", [
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),  # an all-zero trace id is invalid
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", False),
    ("<script>", False),
])
def test_the_api_echoes_a_valid_traceparent_and_keeps_it_in_the_call_log(gateway, demo, loaded, sent, kept):
    plan = FaultPlan(Fault.NONE)
    with gateway.serving([(plan, demo)]):
        answer = httpx.post(f"{gateway.url}/v1/chat/completions",
                            json={"model": loaded.name, "messages": MESSAGES, "max_tokens": 1},
                            headers={"authorization": f"Bearer {demo.key}", PLAN_HEADER: plan.id, "traceparent": sent},
                            timeout=60)
    assert answer.status_code == 200
    record = demo.server.gateway.log.get(answer.headers["x-request-id"])
    assert answer.headers.get("traceparent") == (sent if kept else None)
    assert record.journey["request"].get("traceparent") == (sent if kept else None)
