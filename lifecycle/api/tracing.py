"""W3C trace context: a client's ``traceparent`` is accepted when well formed, echoed on the answer and
kept with the call in the log, so every attempt of one user action can be tied together afterwards.

A malformed header is ignored, as the W3C recommendation says (the call is answered, never refused).
"""

from __future__ import annotations

import re

TRACEPARENT = "traceparent"
_FORMAT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def accepted_traceparent(value: str | None) -> str | None:
    """``value`` if it is a version-00 traceparent (trace and parent ids not all zeros), else None."""
    match = _FORMAT.fullmatch((value or "").strip())
    if match is None:
        return None
    version, trace_id, parent_id, _flags = match.groups()
    if version != "00" or set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        return None
    return match.group(0)
