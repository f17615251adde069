"""The Home page's lessons: where the call's time went, and what the generation waited for in the engine."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from lifecycle.lessons.words import and_joined, milliseconds, ms


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


def home_lesson(call_seconds: float, tokenization: float, detokenization: float, prompt_tokens: int, steps: int,
                model_seconds: float, inspection: float) -> str:
    """The Home page's lesson: the call's time on this machine, the stages before and after it, the model's
    own part (prefill and decode), and the inspection pass that is not part of the call."""
    return (
        f"Your prompt's call took **{ms(call_seconds)}** on this machine's CPU, from the server starting "
        "on it to the last server-sent event (the Streaming page's clock). Building the request, "
        f"tokenizing ({ms(tokenization)}) and applying the chat template took milliseconds before that, "
        f"detokenizing ({ms(detokenization)}) after; the model's own work — the prefill of "
        f"{prompt_tokens:,} prompt tokens and {steps:,} decode steps — took "
        f"**{ms(model_seconds)}**. This app also runs one **inspection pass** ({ms(inspection)}) to "
        "capture attention for its pages; a normal API call skips it, so it starts only once the generation has "
        "finished and is not part of the call's times. Every page follows **the same prompt** through one stage; "
        "the sidebar sets it once and the URL carries it, so a copied link reopens the same page with the same prompt."
    )
