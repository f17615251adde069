"""The call log: every call in a persistent SQLite file, with any configured secret redacted."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable

from lifecycle.errors import LifecycleError

CALL_LOG_ENV = "LIFECYCLE_CALL_LOG"
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")
REDACTED = "<redacted>"


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


class CallLog:
    """Every call in a SQLite file (WAL): one shared connection behind a lock, survives restarts.

    ``redact`` lists secrets (the configured API keys) that must never reach the file: they are
    replaced in ``error`` and ``journey`` before writing. Retention: each write drops calls older
    than ``max_age_seconds`` and all but the newest ``max_rows``, so the file stays bounded.
    """

    def __init__(self, path: str | os.PathLike | None = None, redact: Iterable[str] = (),
                 max_rows: int | None = None, max_age_seconds: float | None = None):
        self.path = Path(path) if path is not None else default_call_log_path()
        self.max_rows, self.max_age_seconds = max_rows, max_age_seconds
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
                self._prune()
        except sqlite3.IntegrityError as error:
            raise LifecycleError(f"Call {record.id!r} is already in the log.", param="id") from error
        return self.get(record.id)

    def _prune(self) -> None:
        if self.max_age_seconds is not None:
            self._db.execute("DELETE FROM calls WHERE created < ?", (time.time() - self.max_age_seconds,))
        if self.max_rows is not None:
            self._db.execute(
                "DELETE FROM calls WHERE rowid IN "
                "(SELECT rowid FROM calls ORDER BY created DESC, rowid DESC LIMIT -1 OFFSET ?)",
                (self.max_rows,),
            )

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

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

    def recent(self, limit: int = 50, key_name: str | None = None) -> list[CallRecord]:
        """The newest ``limit`` calls, newest first; only those of ``key_name`` when it is given."""
        limit = max(1, min(int(limit), 10_000))
        if key_name is None:
            return self._records("ORDER BY created DESC, rowid DESC LIMIT ?", (limit,))
        return self._records("WHERE key_name = ? ORDER BY created DESC, rowid DESC LIMIT ?", (key_name, limit))
