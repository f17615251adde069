"""The Failures page's lesson: an LLM call fails like any HTTP request, and what the official SDK's
retries do about it by default."""

from __future__ import annotations


def failures_lesson(sdk_version: str, max_retries: int, first_low: float, first_high: float,
                    max_delay: float) -> str:
    """The page's lesson with the installed SDK's retry policy: its default retries, the first backoff's
    bounds (``first_low``..``first_high`` seconds) and the longest backoff."""
    return (
        f"An LLM call is an HTTP request to a remote service, and it fails like one. The official openai SDK "
        f"(version {sdk_version}) retries a failed attempt **{max_retries} times** by default, "
        f"sleeping {first_low:.3f}–{first_high:.3f} s before the first retry and twice as long before each next one "
        f"(up to {max_delay:g} s), or exactly what a 429's `retry-after` asks. A 400 or 401 it never retries. Pick "
        "a fault, send your sidebar's prompt through it, and watch every attempt the gateway receives."
    )
