"""The Home page's lessons: where the call's time went, and what the generation waited for in the engine."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from lifecycle.lessons.words import and_joined, milliseconds


def engine_wait_sentence(waited: float, ahead: Sequence[str], jobs_ahead: int) -> str:
    """What the generation waited for in the engine: what was there when it arrived, never a guess."""
    if waited < 0.001:
        return ("The engine started on this prompt at once: nothing was ahead of it. With a whole class at the same "
                "moment, prompts wait for a place in the engine's batch (see Live calls).")
    held = [f"{count} {label} request{'s' if count > 1 else ''}" for label, count in Counter(ahead).most_common()]
    if jobs_ahead:
        held.append(f"{jobs_ahead} exclusive job{'s' if jobs_ahead > 1 else ''} (an inspection pass or a measurement "
                    "another page runs)")
    if not held:
        return (f"This prompt waited **{milliseconds(waited)}** for the engine's thread to take it up; nothing else "
                "was in the engine when it arrived.")
    return (f"This prompt **waited {milliseconds(waited)} for the engine** before the model started on it: "
            f"when it arrived the engine already held {and_joined(held)} (see Live calls).")
