"""Rate limits: token buckets per key (requests/min and tokens/min) and OpenAI's x-ratelimit headers."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from lifecycle.errors import LifecycleError
from lifecycle.api.errors import error_envelope

_EPSILON = 1e-9  # refills are float sums: 6 s at 10/min may give 0.9999999999 requests


@dataclass(frozen=True)
class BucketLevels:
    """How full a key's two buckets are at one moment (for charts); resets are seconds to full."""

    key_name: str
    at: float
    requests: float
    tokens: float
    requests_limit: int
    tokens_limit: int
    requests_reset: float
    tokens_reset: float


@dataclass(frozen=True)
class RateDecision:
    """What the limiter answers: 200; 429 with ``retry_after`` whole seconds (>= 1) when waiting
    refills enough; or 400 ``request_too_large`` (``retry_after`` 0) when the request costs more
    tokens than the whole per-minute budget, so that no wait can ever admit it. A 429 is what
    OpenAI's SDKs retry by default: it must only be sent when a retry can succeed."""

    allowed: bool
    status: int
    retry_after: int
    headers: dict[str, str]
    message: str
    levels: BucketLevels

    def error(self) -> dict | None:
        if self.allowed:
            return None
        if self.status == 400:
            return error_envelope(self.message, param="max_tokens", code="request_too_large")
        return error_envelope(self.message, type="requests", code="rate_limit_exceeded")


def _duration(seconds: float) -> str:
    """OpenAI's reset format: "20ms", "1.5s", "6m0s"."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s" if minutes else f"{rest:.3g}s"


@dataclass
class _Buckets:
    requests: float
    tokens: float
    updated: float


class RateLimiter:
    """Token buckets per key: capacity is the per-minute limit, refilled continuously at limit/60 per s.

    A request costs one request and ``tokens`` tokens and is admitted only when both buckets hold
    enough; a refused request costs nothing. One that costs more tokens than a full bucket holds is
    refused for good (400), not told to wait. Thread-safe; deterministic when ``now`` is given.
    At most ``max_keys`` buckets are kept (keys may be client addresses): the least recently used
    one is dropped first, so memory stays bounded whoever calls.
    """

    def __init__(self, requests_per_minute: int, tokens_per_minute: int, max_keys: int = 10_000):
        for name, limit in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise LifecycleError(f"{name} must be a positive integer, got {limit!r}.", param=name)
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.max_keys = max_keys
        self._buckets: dict[str, _Buckets] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def _refilled(self, key_name: str, now: float) -> _Buckets:
        bucket = self._buckets.pop(key_name, None)  # re-inserted last: dict order is recency of use
        if bucket is None:
            bucket = _Buckets(self.requests_per_minute, self.tokens_per_minute, now)
            while len(self._buckets) >= self.max_keys:
                del self._buckets[next(iter(self._buckets))]
        self._buckets[key_name] = bucket
        elapsed = max(0.0, now - bucket.updated)  # a clock that steps back refills nothing
        bucket.requests = min(self.requests_per_minute, bucket.requests + elapsed * self.requests_per_minute / 60)
        bucket.tokens = min(self.tokens_per_minute, bucket.tokens + elapsed * self.tokens_per_minute / 60)
        bucket.updated = max(bucket.updated, now)
        return bucket

    def _levels(self, key_name: str, bucket: _Buckets, now: float) -> BucketLevels:
        return BucketLevels(
            key_name=key_name,
            at=now,
            requests=bucket.requests,
            tokens=bucket.tokens,
            requests_limit=self.requests_per_minute,
            tokens_limit=self.tokens_per_minute,
            requests_reset=(self.requests_per_minute - bucket.requests) * 60 / self.requests_per_minute,
            tokens_reset=(self.tokens_per_minute - bucket.tokens) * 60 / self.tokens_per_minute,
        )

    def snapshot(self, key_name: str, now: float | None = None) -> BucketLevels:
        """The key's bucket levels at ``now`` without spending anything."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._levels(key_name, self._refilled(key_name, now), now)

    def decide(self, key_name: str, tokens: int, now: float | None = None) -> RateDecision:
        """Admit one request costing ``tokens`` (prompt plus max_tokens) for ``key_name``, or refuse it."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise LifecycleError(f"tokens must be a non-negative integer, got {tokens!r}.", param="tokens")
        now = time.monotonic() if now is None else now
        with self._lock:
            bucket = self._refilled(key_name, now)
            wait_requests = (1 - bucket.requests) * 60 / self.requests_per_minute
            wait_tokens = (tokens - bucket.tokens) * 60 / self.tokens_per_minute
            allowed = tokens <= self.tokens_per_minute and max(wait_requests, wait_tokens) <= _EPSILON
            if allowed:
                bucket.requests = max(0.0, bucket.requests - 1)
                bucket.tokens = max(0.0, bucket.tokens - tokens)
            levels = self._levels(key_name, bucket, now)
        return self._decision(allowed, max(wait_requests, wait_tokens), tokens, levels)

    def _decision(self, allowed: bool, wait: float, tokens: int, levels: BucketLevels) -> RateDecision:
        headers = {
            "x-ratelimit-limit-requests": str(levels.requests_limit),
            "x-ratelimit-limit-tokens": str(levels.tokens_limit),
            "x-ratelimit-remaining-requests": str(math.floor(levels.requests)),
            "x-ratelimit-remaining-tokens": str(math.floor(levels.tokens)),
            "x-ratelimit-reset-requests": _duration(levels.requests_reset),
            "x-ratelimit-reset-tokens": _duration(levels.tokens_reset),
        }
        if allowed:
            return RateDecision(True, 200, 0, headers, "Within the rate limits.", levels)
        if tokens > levels.tokens_limit:
            message = (
                f"Request too large for key '{levels.key_name}': {tokens} tokens requested (prompt plus max_tokens), "
                f"limit {levels.tokens_limit} tokens per minute, so no wait can admit it. Lower max_tokens or "
                "shorten the prompt."
            )
            return RateDecision(False, 400, 0, headers, message, levels)
        retry_after = max(1, math.ceil(wait))
        headers["retry-after"] = str(retry_after)
        headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        message = (
            f"Rate limit reached for key '{levels.key_name}': limits are {levels.requests_limit} requests "
            f"and {levels.tokens_limit} tokens per minute. Retry after {retry_after} s."
        )
        return RateDecision(False, 429, retry_after, headers, message, levels)
