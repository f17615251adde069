"""Stage 2, the gateway: what stands between a client and the model.

Every call passes the API-key check (constant-time, against every configured key), a token-bucket
rate limiter per key (requests/min and tokens/min), a routing decision (which backend serves the
model), and lands in a persistent SQLite call log. Decisions carry a key's *name*, never its
secret, and the log redacts any configured secret that reaches it.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Mapping

from lifecycle.errors import LifecycleError
from lifecycle.server.wire import escape_control

KEYS_ENV = "LIFECYCLE_API_KEYS"
CALL_LOG_ENV = "LIFECYCLE_CALL_LOG"
LOCAL_BACKEND = "local"
_KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_EPSILON = 1e-9  # refills are float sums: 6 s at 10/min may give 0.9999999999 requests
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")
REDACTED = "<redacted>"


def error_envelope(message: str, *, type: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None) -> dict:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


_STATUS_BY_CODE = {"invalid_api_key": 401, "model_not_found": 404, "rate_limit_exceeded": 429}


def error_response(error: LifecycleError) -> tuple[int, dict]:
    """HTTP status and envelope for a library error (400 unless its code says otherwise)."""
    status = _STATUS_BY_CODE.get(error.code or "", 400)
    return status, error_envelope(error.message, param=error.param, code=error.code)


# --- API keys ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuthDecision:
    """The key check's answer. ``key_name`` is the matching key's name; the secret is never kept."""

    allowed: bool
    status: int
    key_name: str | None
    message: str

    def error(self) -> dict | None:
        return None if self.allowed else error_envelope(self.message, code="invalid_api_key")


def parse_api_keys(env_value: str | None) -> dict[str, str]:
    """Keys from ``LIFECYCLE_API_KEYS``: comma-separated ``secret`` or ``name:secret`` entries.

    Unnamed entries are called key1, key2, ... by position. Error messages never quote a secret.
    """
    keys: dict[str, str] = {}
    entries = [entry.strip() for entry in (env_value or "").split(",")]
    for position, entry in enumerate((e for e in entries if e), start=1):
        name, colon, secret = entry.partition(":")
        if not colon:
            name, secret = f"key{position}", entry
        name, secret = name.strip(), secret.strip()
        if not _KEY_NAME.fullmatch(name) or not secret:
            raise LifecycleError(
                f"{KEYS_ENV} entry {position} must be 'secret' or 'name:secret' "
                "(name: letters, digits, '_', '.', '-').",
                param=KEYS_ENV,
                code="invalid_api_keys",
            )
        if name in keys:
            raise LifecycleError(f"{KEYS_ENV} names the key {name!r} twice.", param=KEYS_ENV, code="invalid_api_keys")
        keys[name] = secret
    return keys


def new_api_key() -> str:
    """A fresh random key, e.g. the local development key printed when none is configured."""
    return "sk-lifecycle-" + secrets.token_urlsafe(24)


def bearer_token(authorization: str | None) -> str | None:
    """The key in an ``Authorization: Bearer <key>`` header value, or None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def check_api_key(presented: str | None, keys: Mapping[str, str]) -> AuthDecision:
    """Compare ``presented`` with every configured secret in constant time (no early exit)."""
    if not presented:
        return AuthDecision(
            False, 401, None,
            "You didn't provide an API key. Send it in an Authorization header: 'Authorization: Bearer YOUR_KEY'.",
        )
    offered = presented.encode("utf-8")
    matched = None
    for name, secret in keys.items():
        if hmac.compare_digest(offered, secret.encode("utf-8")) and matched is None:
            matched = name
    if matched is None:
        return AuthDecision(False, 401, None, "Incorrect API key provided.")
    return AuthDecision(True, 200, matched, f"Key '{matched}' accepted.")


# --- rate limits ------------------------------------------------------------------------------


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
    """What the limiter answers: 200, or 429 with ``retry_after`` whole seconds (>= 1)."""

    allowed: bool
    status: int
    retry_after: int
    headers: dict[str, str]
    message: str
    levels: BucketLevels

    def error(self) -> dict | None:
        return None if self.allowed else error_envelope(self.message, type="requests", code="rate_limit_exceeded")


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
    enough; a refused request costs nothing. Thread-safe; deterministic when ``now`` is given.
    """

    def __init__(self, requests_per_minute: int, tokens_per_minute: int):
        for name, limit in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise LifecycleError(f"{name} must be a positive integer, got {limit!r}.", param=name)
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self._buckets: dict[str, _Buckets] = {}
        self._lock = threading.Lock()

    def _refilled(self, key_name: str, now: float) -> _Buckets:
        bucket = self._buckets.setdefault(key_name, _Buckets(self.requests_per_minute, self.tokens_per_minute, now))
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
            allowed = max(wait_requests, wait_tokens) <= _EPSILON
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
        retry_after = max(1, math.ceil(wait))
        headers["retry-after"] = str(retry_after)
        headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        if tokens > levels.tokens_limit:
            message = (
                f"Request too large for key '{levels.key_name}': {tokens} tokens requested, "
                f"limit {levels.tokens_limit} tokens per minute. Lower max_tokens or shorten the prompt."
            )
        else:
            message = (
                f"Rate limit reached for key '{levels.key_name}': limits are {levels.requests_limit} requests "
                f"and {levels.tokens_limit} tokens per minute. Retry after {retry_after} s."
            )
        return RateDecision(False, 429, retry_after, headers, message, levels)


# --- routing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutingDecision:
    """Which backend serves ``model``; 404 ``model_not_found`` when none does."""

    model: str
    allowed: bool
    status: int
    backend: str | None
    message: str

    def error(self) -> dict | None:
        return None if self.allowed else error_envelope(self.message, param="model", code="model_not_found")


def route(model: str, known_models: Mapping[str, str] | Iterable[str]) -> RoutingDecision:
    """Route to the backend of a known model (a mapping model -> backend, or names served locally)."""
    if isinstance(known_models, str):
        known_models = [known_models]
    backends = dict(known_models) if isinstance(known_models, Mapping) else dict.fromkeys(known_models, LOCAL_BACKEND)
    if isinstance(model, str) and model in backends:
        return RoutingDecision(model, True, 200, backends[model], f"Model '{model}' is served by {backends[model]}.")
    shown = escape_control(str(model))[:100]
    return RoutingDecision(
        shown, False, 404, None, f"The model '{shown}' does not exist or you do not have access to it."
    )


# --- call log ---------------------------------------------------------------------------------


@dataclass
class CallRecord:
    """One call as the log keeps it. ``outcome``: "running", "ok", "error", "cancelled",
    "rate_limited", "unauthorized", "invalid_request". ``journey`` is any JSON-able data."""

    id: str
    created: float = field(default_factory=time.time)
    key_name: str | None = None
    model: str | None = None
    status: int | None = None
    outcome: str = "running"
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    ttft: float | None = None
    duration: float | None = None
    error: str | None = None
    journey: object = None


_COLUMNS = tuple(f.name for f in fields(CallRecord))
_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id TEXT PRIMARY KEY, created REAL NOT NULL, key_name TEXT, model TEXT, status INTEGER,
    outcome TEXT NOT NULL, finish_reason TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    total_tokens INTEGER, ttft REAL, duration REAL, error TEXT, journey TEXT
);
CREATE INDEX IF NOT EXISTS calls_created ON calls (created);
"""


def default_call_log_path() -> Path:
    """``LIFECYCLE_CALL_LOG``, or ~/.local/share/llm-request-lifecycle/calls.sqlite3."""
    configured = os.environ.get(CALL_LOG_ENV, "").strip()
    return Path(configured) if configured else Path.home() / ".local/share/llm-request-lifecycle/calls.sqlite3"


def redact_secrets(text: str, secrets_: Iterable[str] = ()) -> str:
    """``text`` with every configured secret and any ``Bearer <token>`` replaced by <redacted>."""
    for secret in secrets_:
        if secret:
            text = text.replace(secret, REDACTED).replace(json.dumps(secret)[1:-1], REDACTED)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def log_line(record: CallRecord) -> str:
    """One line for a text log; CR, LF and control characters in any field are escaped."""
    parts = [
        record.id, f"key={record.key_name}", f"model={record.model}", f"status={record.status}",
        f"outcome={record.outcome}", f"finish={record.finish_reason}",
        f"tokens={record.prompt_tokens}+{record.completion_tokens}={record.total_tokens}",
        f"ttft={record.ttft}", f"duration={record.duration}",
    ]
    if record.error:
        parts.append(f"error={record.error}")
    return " ".join(escape_control(str(part)) for part in parts)


class CallLog:
    """Every call in a SQLite file (WAL): one shared connection behind a lock, survives restarts.

    ``redact`` lists secrets (the configured API keys) that must never reach the file: they are
    replaced in ``error`` and ``journey`` before writing.
    """

    def __init__(self, path: str | os.PathLike | None = None, redact: Iterable[str] = ()):
        self.path = Path(path) if path is not None else default_call_log_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._redact = tuple(s for s in redact if s)
        self._lock = threading.RLock()
        # Autocommit: every write is its own committed transaction, so a crash loses nothing written.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout = 10000")  # other processes (a second server) may hold the lock
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> CallLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _row(self, record: CallRecord) -> dict:
        row = asdict(record)
        if row["total_tokens"] is None and None not in (record.prompt_tokens, record.completion_tokens):
            row["total_tokens"] = record.prompt_tokens + record.completion_tokens
        if row["error"] is not None:
            row["error"] = redact_secrets(str(row["error"]), self._redact)
        journey = json.dumps(record.journey, ensure_ascii=False, default=str)
        row["journey"] = redact_secrets(journey, self._redact)
        return row

    def record(self, record: CallRecord) -> CallRecord:
        """Insert a new call; its id must be new."""
        row = self._row(record)
        marks = ", ".join(f":{name}" for name in _COLUMNS)
        try:
            with self._lock:
                self._db.execute(f"INSERT INTO calls ({', '.join(_COLUMNS)}) VALUES ({marks})", row)
        except sqlite3.IntegrityError as error:
            raise LifecycleError(f"Call {record.id!r} is already in the log.", param="id") from error
        return self.get(record.id)

    def update(self, call_id: str, **changes: object) -> CallRecord:
        """Change some fields of a logged call (e.g. its outcome and usage when it finishes)."""
        unknown = (set(changes) - set(_COLUMNS)) | ({"id"} & set(changes))
        if unknown:
            raise LifecycleError(f"Cannot update {', '.join(sorted(unknown))} of a call.", param="changes")
        assignments = ", ".join(f"{name} = :{name}" for name in _COLUMNS if name != "id")
        with self._lock:  # read-modify-write as one step, so concurrent updates never lose a field
            current = self.get(call_id)
            if current is None:
                raise LifecycleError(f"No call {call_id!r} in the log.", param="call_id")
            for name, value in changes.items():
                setattr(current, name, value)
            if {"prompt_tokens", "completion_tokens"} & set(changes) and "total_tokens" not in changes:
                current.total_tokens = None
            self._db.execute(f"UPDATE calls SET {assignments} WHERE id = :id", self._row(current))
            return self.get(call_id)

    def _records(self, sql: str, args: tuple) -> list[CallRecord]:
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM calls {sql}", args).fetchall()
        records = []
        for row in rows:
            values = dict(zip(_COLUMNS, row))
            values["journey"] = json.loads(values["journey"]) if values["journey"] else None
            records.append(CallRecord(**values))
        return records

    def get(self, call_id: str) -> CallRecord | None:
        found = self._records("WHERE id = ?", (call_id,))
        return found[0] if found else None

    def recent(self, limit: int = 50) -> list[CallRecord]:
        """The newest ``limit`` calls, newest first."""
        limit = max(1, min(int(limit), 10_000))
        return self._records("ORDER BY created DESC, rowid DESC LIMIT ?", (limit,))


# --- the gateway as steps ---------------------------------------------------------------------


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
