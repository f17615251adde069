"""Stage 2, the gateway as ordered steps: auth -> rate limit -> routing -> logging, for a page or a journey."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lifecycle.server.wire import escape_control
from lifecycle.server.calllog import CallRecord
from lifecycle.server.keys import AuthDecision
from lifecycle.server.ratelimit import RateDecision
from lifecycle.server.routing import RoutingDecision


@dataclass(frozen=True)
class GatewayStep:
    """One decision on a call's way through the gateway, for the Gateway page and a call's journey."""

    name: str  # "auth", "rate limit", "routing", "logging"
    outcome: str  # "passed", "refused", "skipped", "recorded"
    detail: str
    status: int | None


def _rate_detail(rate: RateDecision) -> str:
    if not rate.allowed:
        return rate.message
    levels = rate.levels
    return (
        f"{math.floor(levels.requests)}/{levels.requests_limit} requests and "
        f"{math.floor(levels.tokens)}/{levels.tokens_limit} tokens left this minute."
    )


def gateway_steps(
    auth: AuthDecision,
    rate: RateDecision | None = None,
    routing: RoutingDecision | None = None,
    record: CallRecord | None = None,
) -> list[GatewayStep]:
    """The ordered steps auth -> rate limit -> routing -> logging; steps after a refusal are skipped."""
    steps = [GatewayStep("auth", "passed" if auth.allowed else "refused", auth.message, auth.status)]
    for name, decision in (("rate limit", rate), ("routing", routing)):
        refused = any(step.outcome == "refused" for step in steps)
        if refused or decision is None:
            reason = "Not reached: an earlier step refused the call." if refused else "Not checked."
            steps.append(GatewayStep(name, "skipped", reason, None))
            continue
        detail = _rate_detail(decision) if isinstance(decision, RateDecision) else decision.message
        steps.append(GatewayStep(name, "passed" if decision.allowed else "refused", detail, decision.status))
    if record is None:
        steps.append(GatewayStep("logging", "skipped", "Not recorded.", None))
    else:
        detail = f"Logged as {record.id} under key name {record.key_name!r} (the key itself is never stored)."
        steps.append(GatewayStep("logging", "recorded", escape_control(detail), record.status))
    return steps
