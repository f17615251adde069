"""The gateway in front of the engine: who is calling, whether their budget holds the call, and the
record of every call.

Three decisions, each written to the call's journey as a step the Gateway and Live calls pages show:
the API key (a caller without a valid one is rate-limited by address and leaves only a count behind),
the rate limit on requests and tokens per minute, and the call-log row written once the call ends.
The endpoints (lifecycle.api.endpoints) call these in order; nothing here knows HTTP beyond a header's
text and the client's address.
"""

from __future__ import annotations

import logging
from collections import Counter

from lifecycle.api.calllog import CallLog
from lifecycle.api.config import ApiConfig
from lifecycle.api.errors import ApiError
from lifecycle.api.exchange import Exchange
from lifecycle.api.keys import bearer_token, check_api_key
from lifecycle.api.ratelimit import RateLimiter

_log = logging.getLogger(__name__)


class Gateway:
    """A server's keys, rate-limit buckets and call log, and the decisions made with them."""

    def __init__(self, config: ApiConfig):
        self.keys = config.keys
        self.limiter = RateLimiter(config.requests_per_minute, config.tokens_per_minute)
        # Requests without a valid key: one small bucket per client address, nothing else kept.
        self.strangers = RateLimiter(config.unauthenticated_per_minute, 1)
        self.refused: Counter[str] = Counter()  # unauthenticated refusals by outcome: the only trace they leave
        self.log = CallLog(config.call_log, redact=config.keys.values(), max_rows=config.log_max_rows,
                           max_age_seconds=config.log_max_days * 86_400)

    def authenticate(self, authorization: str | None, address: str, exchange: Exchange) -> str:
        """The key check on an ``Authorization`` header's text; a refused caller is rate-limited by
        ``address`` (429 once its bucket is empty, else 401)."""
        decision = check_api_key(bearer_token(authorization), self.keys)
        if not decision.allowed:
            limited = self.strangers.decide(address, 0)
            if not limited.allowed:
                raise ApiError(429, "Too many requests without a valid API key from this address; retry "
                               f"after {limited.retry_after} s.", type="requests", code="rate_limit_exceeded",
                               headers={"retry-after": str(limited.retry_after)}, outcome="rate_limited")
            raise ApiError(401, decision.message, code="invalid_api_key", outcome="unauthorized")
        exchange.key_name = decision.key_name
        exchange.step("auth", "passed", decision.message, decision.status)
        return decision.key_name

    def rate_limit(self, exchange: Exchange, tokens: int) -> dict[str, str]:
        """Admit the call's cost or refuse it: 429 when waiting refills enough, 400 when no wait can."""
        decision = self.limiter.decide(exchange.key_name, tokens)
        exchange.step("rate limit", "passed" if decision.allowed else "refused", decision.message, decision.status)
        if not decision.allowed:
            error = decision.error()["error"]
            raise ApiError(decision.status, error["message"], type=error["type"], param=error["param"],
                           code=error["code"], headers=decision.headers,
                           outcome="rate_limited" if decision.status == 429 else "invalid_request")
        return dict(decision.headers)

    def charge(self, exchange: Exchange, tokens: int) -> dict[str, str]:
        """Charge a call refused for another reason to the key's budget if it holds the cost; never refuse it."""
        decision = self.limiter.decide(exchange.key_name, tokens)
        exchange.step("rate limit", "charged" if decision.allowed else "not charged",
                      decision.message if decision.allowed else f"Not charged: {decision.message}")
        return {name: value for name, value in decision.headers.items() if not name.startswith("retry-after")}

    def save(self, exchange: Exchange) -> None:
        """Write the call's row; the log must never turn an answer into a crash."""
        try:
            self.log.record(exchange.record())
        except Exception as error:
            _log.error("call log write failed for %s: %s", exchange.id, type(error).__name__)

    def refuse(self, exchange: Exchange, error: ApiError) -> None:
        """Keep a refused call: its row when a valid key was presented, else only a count by outcome, so a
        stranger leaves nothing of what they sent."""
        if exchange.key_name is None:
            self.refused[error.outcome] += 1
        else:
            self.save(exchange)
