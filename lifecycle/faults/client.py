"""The official openai SDK living through a fault: what it retried, how long it waited, where it gave up.

``call_through_faults`` registers a fault plan on the loopback faulty gateway and makes one call
with the real SDK, at the visitor's ``max_retries`` and ``timeout``. The SDK's own retry loop runs
untouched; the gateway's record of the attempts it received is the timeline. ``SdkRetryPolicy``
reads the installed SDK's retry constants, so the page states the policy it actually runs.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

import httpx2
import openai
from openai import _constants as sdk_constants

from lifecycle.errors import LifecycleError
from lifecycle.faults.gateway import PLAN_HEADER, Attempt, FaultyGateway
from lifecycle.faults.plan import Fault, FaultPlan
from lifecycle.api.demo import DemoGateway

MAX_RETRIES = 6  # the most retries a visitor may ask for
MIN_TIMEOUT, MAX_TIMEOUT = 0.1, 60.0  # seconds
WRONG_KEY = "sk-wrong-0000000000000000"
INVALID_TEMPERATURE = 2.5  # outside the API's [0, 2]
SETTLE = 3.0  # seconds to wait for the gateway to finish recording attempts the client gave up on
# The SDK's _calculate_retry_timeout multiplies its backoff by ``1 - 0.25 * random()``.
SDK_JITTER = 0.25


@dataclass(frozen=True)
class SdkRetryPolicy:
    """The installed SDK's retry policy, read from the package (openai/_constants.py)."""

    version: str = openai.__version__
    default_max_retries: int = sdk_constants.DEFAULT_MAX_RETRIES
    initial_delay: float = sdk_constants.INITIAL_RETRY_DELAY
    max_delay: float = sdk_constants.MAX_RETRY_DELAY
    max_retry_after: float = sdk_constants.MAX_RETRY_AFTER_DELAY
    jitter: float = SDK_JITTER

    def backoff_bounds(self, retries_taken: int) -> tuple[float, float]:
        """(shortest, longest) sleep before retry ``retries_taken + 1`` without a usable retry-after."""
        longest = min(self.initial_delay * 2.0 ** retries_taken, self.max_delay)
        return longest * (1 - self.jitter), longest

    def honours(self, retry_after: float) -> bool:
        """True when the SDK sleeps exactly ``retry_after`` seconds instead of backing off."""
        return 0 < retry_after <= self.max_retry_after


@dataclass(frozen=True)
class ClientSettings:
    """What the visitor sets on the client: retries after the first attempt, and the per-attempt timeout."""

    max_retries: int = sdk_constants.DEFAULT_MAX_RETRIES
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise LifecycleError("max_retries must be a whole number.", param="max_retries")
        if not 0 <= self.max_retries <= MAX_RETRIES:
            raise LifecycleError(f"max_retries must be between 0 and {MAX_RETRIES}; got {self.max_retries}.",
                                 param="max_retries")
        if not MIN_TIMEOUT <= self.timeout <= MAX_TIMEOUT:
            raise LifecycleError(f"timeout must be between {MIN_TIMEOUT:g} and {MAX_TIMEOUT:g} seconds; "
                                 f"got {self.timeout:g}.", param="timeout")


@dataclass(frozen=True)
class ClientRun:
    """One SDK call through a fault plan: the gateway's attempts and what the client was left holding.

    Times are seconds from the moment the client was asked to make the call.
    """

    plan: FaultPlan
    settings: ClientSettings
    attempts: list[Attempt]
    started: float  # time.monotonic() when the call began
    seconds: float  # until the SDK returned or raised
    traceparent: str
    streamed: bool
    text: str = ""
    finish_reason: str | None = None
    usage: dict | None = None
    error: str | None = None  # the SDK's exception class, when it gave up
    error_message: str | None = None
    error_status: int | None = None
    request_id: str | None = None  # what the SDK reports as the call's x-request-id
    chunks: int = 0  # content chunks the client received (streamed calls)
    max_tokens: int = 0  # what the request asked for: the output a limiter or a budget reserves
    policy: SdkRetryPolicy = field(default_factory=SdkRetryPolicy)

    @property
    def succeeded(self) -> bool:
        return self.error is None

    def arrived(self, attempt: Attempt) -> float:
        return attempt.arrived - self.started

    def answered(self, attempt: Attempt) -> float | None:
        return None if attempt.answered is None else attempt.answered - self.started

    def given_up(self, attempt: Attempt) -> float:
        """When the client was done with ``attempt``: its answer, or its timeout if that came first."""
        limit = attempt.arrived + self.settings.timeout
        return min(limit, attempt.answered) if attempt.answered is not None else limit

    @property
    def waits(self) -> list[float]:
        """Seconds the client slept between each attempt's end and the next attempt's arrival."""
        return [later.arrived - self.given_up(earlier) for earlier, later in zip(self.attempts, self.attempts[1:])]

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)


def new_traceparent() -> str:
    """A W3C trace-context header for one user action: version, trace id, parent span id, sampled."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def call_through_faults(gateway: FaultyGateway, demo: DemoGateway, plan: FaultPlan, settings: ClientSettings,
                        model: str, messages: list[dict], max_tokens: int, temperature: float) -> ClientRun:
    """Make one chat-completions call with the real openai SDK through ``plan``'s faults (registered
    for this call only)."""
    with gateway.serving([(plan, demo)]):
        return sdk_call(gateway, demo, plan, settings, model, messages, max_tokens, temperature)


def sdk_call(gateway: FaultyGateway, demo: DemoGateway, plan: FaultPlan, settings: ClientSettings, model: str,
             messages: list[dict], max_tokens: int, temperature: float, traceparent: str | None = None) -> ClientRun:
    """One SDK call through ``plan``, already registered on ``gateway`` (so a plan can span several
    calls, as an application's own retries do); its attempts are those that arrived during this call."""
    traceparent = traceparent or new_traceparent()
    client = openai.OpenAI(
        base_url=f"{gateway.url}/v1", api_key=WRONG_KEY if plan.fault is Fault.WRONG_KEY else demo.key,
        max_retries=settings.max_retries, timeout=settings.timeout,
        default_headers={PLAN_HEADER: plan.id, "traceparent": traceparent},
    )
    if plan.fault is Fault.INVALID_PARAMETER:
        temperature = INVALID_TEMPERATURE
    request = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    outcome: dict = {"max_tokens": max_tokens}
    started = time.monotonic()
    try:
        if plan.fault.streams:
            _stream(client, request, outcome)
        else:
            reply = client.chat.completions.create(**request)
            outcome.update(text=reply.choices[0].message.content or "", finish_reason=reply.choices[0].finish_reason,
                           usage=reply.usage.model_dump() if reply.usage else None,
                           request_id=getattr(reply, "_request_id", None))
    except openai.APIStatusError as error:
        outcome.update(error=type(error).__name__, error_message=error.message, error_status=error.status_code,
                       request_id=error.request_id)
    except (openai.OpenAIError, httpx2.TransportError) as error:  # the SDK does not wrap a mid-stream break
        outcome.update(error=type(error).__name__, error_message=str(error) or type(error).__name__)
    finally:
        seconds = time.monotonic() - started
        client.close()
    attempts = [a for a in gateway.attempts(plan.id, settle=SETTLE) if a.arrived >= started]
    return ClientRun(plan, settings, attempts, started, seconds, traceparent, plan.fault.streams, **outcome)


def _stream(client: openai.OpenAI, request: dict, outcome: dict) -> None:
    """Read a streamed answer chunk by chunk into ``outcome``, so a break leaves what had arrived."""
    outcome.update(text="", chunks=0)
    stream = client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
    outcome["request_id"] = getattr(stream, "response", None) and stream.response.headers.get("x-request-id")
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                outcome["text"] += choice.delta.content
                outcome["chunks"] += 1
            if choice.finish_reason:
                outcome["finish_reason"] = choice.finish_reason
        if chunk.usage is not None:
            outcome["usage"] = chunk.usage.model_dump()

