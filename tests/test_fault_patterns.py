"""Application patterns on top of the SDK, run live through the faulty gateway: key rotation on 429,
fallback to another route, a circuit breaker, and a deadline for the whole call (tenacity)."""

from __future__ import annotations

import pytest

from lifecycle.faults.client import ClientSettings
from lifecycle.faults.gateway import FaultyGateway
from lifecycle.faults.patterns import (
    Call, CircuitBreaker, Route, circuit_breaker, deadline, fall_back, rotate_keys_on_429,
)
from lifecycle.faults.plan import MAX_FAILURES, Fault, FaultPlan
from tests.test_faults import MESSAGES, SLACK, demo  # noqa: F401  (the ready demo gateway fixture)
from lifecycle.api.demo import DemoGateway


@pytest.fixture(scope="module")
def gateway():
    server = FaultyGateway()
    yield server
    server.close()


@pytest.fixture
def call(gateway, loaded):
    return Call(gateway, loaded.name, MESSAGES, 4, 0.0)


def _route(name: str, demo_gateway: DemoGateway, fault: Fault, failures: int = MAX_FAILURES) -> Route:
    return Route(name, demo_gateway, FaultPlan(fault, failures=failures))


def test_a_breaker_opens_after_threshold_failures_fails_fast_then_probes_once():
    now = [0.0]
    breaker = CircuitBreaker(threshold=2, cooldown=10.0, clock=lambda: now[0])
    breaker.record(False)
    assert breaker.state == "closed" and breaker.allow()
    breaker.record(False)
    assert breaker.state == "open" and not breaker.allow()
    now[0] = 9.9
    assert not breaker.allow()
    now[0] = 10.0
    assert breaker.state == "half-open" and breaker.allow()
    breaker.record(False)  # the probe failed: open again, for a whole cooldown
    assert breaker.state == "open"
    now[0] = 20.0
    breaker.record(True)
    assert breaker.state == "closed" and breaker.failures == 0


def test_a_rate_limited_key_rotates_to_the_second_key(gateway, call, demo):
    second = DemoGateway(requests_per_minute=60)
    first_key, second_key = _route("key A", demo, Fault.RATE_LIMIT), _route("key B", second, Fault.NONE)
    with gateway.serving([(first_key.plan, demo), (second_key.plan, second)]):
        pattern = rotate_keys_on_429(call, [first_key, second_key], ClientSettings(0))
    assert [(s.route, s.run.error_status) for s in pattern.steps] == [("key A", 429), ("key B", None)]
    assert pattern.answer is pattern.steps[1].run and pattern.answer.text
    assert {s.run.traceparent for s in pattern.steps} == {pattern.traceparent}  # one user action


def test_fallback_moves_on_for_a_503_but_not_for_a_401(gateway, call, demo):
    primary, backup = _route("primary", demo, Fault.UNAVAILABLE), _route("fallback", demo, Fault.NONE)
    with gateway.serving([(primary.plan, demo), (backup.plan, demo)]):
        pattern = fall_back(call, [primary, backup], ClientSettings(1))
    assert [s.route for s in pattern.steps] == ["primary", "fallback"]
    assert len(pattern.steps[0].run.attempts) == 2 and pattern.answer is pattern.steps[1].run  # the SDK retried once
    wrong = Route("primary", demo, FaultPlan(Fault.WRONG_KEY))
    with gateway.serving([(wrong.plan, demo), (backup.plan, demo)]):
        pattern = fall_back(call, [wrong, backup], ClientSettings(1))
    assert [(s.route, s.run.error_status) for s in pattern.steps] == [("primary", 401)] and pattern.answer is None


def test_the_circuit_breaker_fails_fast_while_open_and_closes_after_a_good_probe(gateway, call, demo):
    route = _route("flaky", demo, Fault.SERVER_ERROR, failures=4)
    with gateway.serving([(route.plan, demo)]):
        pattern = circuit_breaker(call, route, ClientSettings(0), calls=10, threshold=3, cooldown=1.0, spacing=0.4)
        received = gateway.attempts(route.plan.id)
    sent = [s for s in pattern.steps if s.run is not None]
    assert [s.run.error_status for s in sent[:3]] == [500, 500, 500]
    assert pattern.steps[3].run is None and pattern.steps[3].note == "open: failed fast"
    assert len(received) == len(sent) < len(pattern.steps)  # a failed-fast call sends nothing
    assert any(s.note == "half-open: sent" for s in sent) and sent[-1].run.succeeded


def test_a_deadline_bounds_the_whole_call_across_tenacity_retries(gateway, call, demo):
    route = _route("down", demo, Fault.UNAVAILABLE)
    with gateway.serving([(route.plan, demo)]):
        pattern = deadline(call, route, ClientSettings(0, 10.0), seconds=2.0)
    assert len(pattern.steps) >= 2 and pattern.answer is None
    assert all(s.run.error_status == 503 and len(s.run.attempts) == 1 for s in pattern.steps)
    assert pattern.seconds <= 2.0 + SLACK
