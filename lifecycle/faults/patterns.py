"""What an application adds on top of the SDK's retries: rotating keys, falling back, breaking the circuit,
and a deadline for the whole call. Each pattern is a few lines of ordinary code around real SDK calls
through the faulty gateway, so the page can show the code it runs beside what it did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tenacity import retry, retry_if_result, stop_before_delay, wait_random_exponential

from lifecycle.faults.client import MIN_TIMEOUT, ClientRun, ClientSettings, new_traceparent, sdk_call
from lifecycle.faults.gateway import FaultyGateway
from lifecycle.faults.plan import FaultPlan
from lifecycle.api.demo import DemoGateway

RETRYABLE_STATUSES = (408, 409, 429)  # and every 5xx: what is worth sending again, here or elsewhere


@dataclass(frozen=True)
class Route:
    """Somewhere an application can send the call: a key or a provider, with the faults it meets today."""

    name: str
    demo: DemoGateway
    plan: FaultPlan


@dataclass(frozen=True)
class Step:
    """One call a pattern made (``run``), or refused to make (``run`` None), ``at`` seconds after it began."""

    route: str
    at: float
    run: ClientRun | None
    note: str


@dataclass
class PatternRun:
    """Everything one pattern did for one user action: its steps, tied together by one traceparent."""

    name: str
    traceparent: str = field(default_factory=new_traceparent)
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def answer(self) -> ClientRun | None:
        """The call that answered, if one did."""
        return next((s.run for s in self.steps if s.run is not None and s.run.succeeded), None)


@dataclass(frozen=True)
class Call:
    """What every pattern sends: one chat-completions request, through ``gateway``."""

    gateway: FaultyGateway
    model: str
    messages: list[dict]
    max_tokens: int
    temperature: float

    def send(self, pattern: PatternRun, route: Route, settings: ClientSettings, note: str = "") -> ClientRun:
        at = time.monotonic() - pattern.started
        run = sdk_call(self.gateway, route.demo, route.plan, settings, self.model, self.messages, self.max_tokens,
                       self.temperature, traceparent=pattern.traceparent)
        pattern.steps.append(Step(route.name, at, run, note or ("answered" if run.succeeded else run.error)))
        return run


def worth_retrying(run: ClientRun) -> bool:
    """A timeout, a broken connection, 408, 409, 429 or a 5xx; never a 400 or 401, which fail the same way again."""
    if run.succeeded:
        return False
    if run.error_status is None:
        return True
    return run.error_status in RETRYABLE_STATUSES or run.error_status >= 500


def rotate_keys_on_429(call: Call, keys: list[Route], settings: ClientSettings) -> PatternRun:
    """Use the next key only when this one is rate-limited."""
    pattern = PatternRun("rotate keys on 429")
    for key in keys:
        run = call.send(pattern, key, settings)
        if run.error_status != 429:
            break
    return _done(pattern)


def fall_back(call: Call, routes: list[Route], settings: ClientSettings) -> PatternRun:
    """The first route that answers; move on only for a failure worth retrying elsewhere."""
    pattern = PatternRun("fall back to another route")
    for route in routes:
        run = call.send(pattern, route, settings)
        if not worth_retrying(run):
            break
    return _done(pattern)


class CircuitBreaker:
    """After ``threshold`` failures in a row the circuit opens: calls fail at once, sending nothing, for
    ``cooldown`` seconds. Then it is half-open: one probe goes through; success closes it, failure opens it."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic):
        self.threshold, self.cooldown, self.clock = threshold, cooldown, clock
        self.failures = 0
        self.opened_at: float | None = None

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "open" if self.clock() - self.opened_at < self.cooldown else "half-open"

    def allow(self) -> bool:
        return self.state != "open"

    def record(self, succeeded: bool) -> None:
        if succeeded:
            self.failures, self.opened_at = 0, None
            return
        self.failures += 1
        if self.state == "half-open" or self.failures >= self.threshold:
            self.opened_at = self.clock()


def circuit_breaker(call: Call, route: Route, settings: ClientSettings, calls: int = 10, threshold: int = 3,
                    cooldown: float = 1.0, spacing: float = 0.4) -> PatternRun:
    """``calls`` user actions ``spacing`` seconds apart against one failing route, behind a breaker."""
    pattern = PatternRun("circuit breaker")
    breaker = CircuitBreaker(threshold, cooldown)
    for number in range(calls):
        state = breaker.state
        if breaker.allow():
            run = call.send(pattern, route, settings, note=f"{state}: sent")
            breaker.record(run.succeeded)
        else:
            pattern.steps.append(Step(route.name, time.monotonic() - pattern.started, None, "open: failed fast"))
        time.sleep(spacing)
    return _done(pattern)


def deadline(call: Call, route: Route, settings: ClientSettings, seconds: float = 3.0) -> PatternRun:
    """Retry with exponential backoff and jitter (tenacity) while the whole call's deadline allows;
    each attempt may take only what remains of it."""
    pattern = PatternRun("deadline for the whole call")

    @retry(stop=stop_before_delay(seconds), wait=wait_random_exponential(multiplier=0.25, max=2.0),
           retry=retry_if_result(worth_retrying), retry_error_callback=lambda state: state.outcome.result())
    def attempt() -> ClientRun:
        remaining = seconds - (time.monotonic() - pattern.started)
        timeout = max(MIN_TIMEOUT, min(settings.timeout, remaining))
        return call.send(pattern, route, ClientSettings(0, timeout))

    attempt()
    return _done(pattern)


def _done(pattern: PatternRun) -> PatternRun:
    pattern.seconds = time.monotonic() - pattern.started
    return pattern
