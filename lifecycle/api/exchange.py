"""One API call while it is handled: its call-log record filled in as it goes, its decisions and timings."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, fields, replace

from lifecycle.api.calllog import CallRecord


def new_request_id() -> str:
    return "req_" + secrets.token_hex(16)


@dataclass
class Exchange(CallRecord):
    """One call while it is handled: its log record, filled in as the call goes, and its start."""

    journey: dict = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def step(self, name: str, outcome: str, detail: str, status: int | None = None) -> None:
        """One gateway/serving decision, in order, with the time it was taken."""
        self.journey.setdefault("gateway", []).append(
            {"step": name, "outcome": outcome, "detail": detail, "status": status, "at": round(self.elapsed(), 6)}
        )

    def record(self) -> CallRecord:
        """The row for the call log, as the call stands now."""
        counted = None not in (self.prompt_tokens, self.completion_tokens)
        return replace(
            CallRecord(**{f.name: getattr(self, f.name) for f in fields(CallRecord)}),
            total_tokens=self.prompt_tokens + self.completion_tokens if counted else None,
            duration=round(self.elapsed(), 6),
        )
