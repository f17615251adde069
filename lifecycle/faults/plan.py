"""A fault plan: which failure a visitor's gateway injects, on how many attempts, for how long.

Every setting is bounded, so a plan can neither hold a server thread for long nor outlive the
visitor's interest in it; a bad setting is refused with a message that names it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from enum import Enum

from lifecycle.errors import LifecycleError

MAX_FAILURES = 10  # attempts one plan may fail before the gateway answers normally
MAX_RETRY_AFTER = 20.0  # seconds a 429 may ask the client to wait
MAX_DELAY = 20.0  # seconds a slow first byte may hold one attempt
MAX_CUT_AFTER = 64  # tokens a cut stream may deliver before the connection drops
PLAN_LIFETIME = 600.0  # seconds a plan stays registered on the gateway


class Fault(str, Enum):
    """What goes wrong, as a client meets it."""

    NONE = "none"
    RATE_LIMIT = "rate_limit"  # 429 with retry-after
    SERVER_ERROR = "server_error"  # 500
    UNAVAILABLE = "unavailable"  # 503
    RESET = "reset"  # the connection is reset before any answer
    SLOW_FIRST_BYTE = "slow_first_byte"  # nothing for `delay` seconds, then the answer
    STREAM_CUT = "stream_cut"  # the stream drops after `cut_after` tokens
    WRONG_KEY = "wrong_key"  # the client presents a key the gateway does not know: 401
    INVALID_PARAMETER = "invalid_parameter"  # the client sends temperature outside [0, 2]: 400

    @property
    def client_side(self) -> bool:
        """True when the client's own request is wrong and the real gateway refuses it."""
        return self in (Fault.WRONG_KEY, Fault.INVALID_PARAMETER)

    @property
    def streams(self) -> bool:
        """True when the call must be streamed for the fault to show."""
        return self is Fault.STREAM_CUT


LABELS = {
    Fault.NONE: "no fault",
    Fault.RATE_LIMIT: "429 Too Many Requests with retry-after",
    Fault.SERVER_ERROR: "500 Internal Server Error",
    Fault.UNAVAILABLE: "503 Service Unavailable",
    Fault.RESET: "connection reset",
    Fault.SLOW_FIRST_BYTE: "slow first byte (timeout)",
    Fault.STREAM_CUT: "stream cut after N tokens",
    Fault.WRONG_KEY: "wrong API key (401)",
    Fault.INVALID_PARAMETER: "invalid parameter (400)",
}


def _bounded(value: float, low: float, high: float, param: str, unit: str) -> None:
    if not low <= value <= high:
        raise LifecycleError(f"{param} must be between {low:g} and {high:g} {unit}; got {value:g}.", param=param)


@dataclass(frozen=True)
class FaultPlan:
    """``fault`` on the first ``failures`` attempts, then normal answers.

    ``retry_after`` is the 429's header (seconds), ``delay`` how long a slow first byte takes,
    ``cut_after`` how many tokens a cut stream delivers. ``id`` is the secret a request must carry
    to meet this plan's faults, so no other visitor's request ever does.
    """

    fault: Fault = Fault.NONE
    failures: int = 1
    retry_after: float = 1.0
    delay: float = 3.0
    cut_after: int = 3
    id: str = field(default_factory=lambda: "fp_" + secrets.token_hex(16))

    def __post_init__(self) -> None:
        if not isinstance(self.fault, Fault):
            try:
                object.__setattr__(self, "fault", Fault(self.fault))
            except ValueError:
                known = ", ".join(f.value for f in Fault)
                raise LifecycleError(f"Unknown fault {self.fault!r}; known: {known}.", param="fault") from None
        if isinstance(self.failures, bool) or not isinstance(self.failures, int):
            raise LifecycleError("failures must be a whole number of attempts.", param="failures")
        _bounded(self.failures, 0, MAX_FAILURES, "failures", "attempts")
        _bounded(self.retry_after, 0, MAX_RETRY_AFTER, "retry_after", "seconds")
        _bounded(self.delay, 0, MAX_DELAY, "delay", "seconds")
        if isinstance(self.cut_after, bool) or not isinstance(self.cut_after, int):
            raise LifecycleError("cut_after must be a whole number of tokens.", param="cut_after")
        _bounded(self.cut_after, 0, MAX_CUT_AFTER, "cut_after", "tokens")

    def faults_attempt(self, number: int) -> bool:
        """True when attempt ``number`` (1 for the first) meets the fault."""
        return self.fault is not Fault.NONE and not self.fault.client_side and number <= self.failures
