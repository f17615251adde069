"""The Structured output page's lesson: what the grammar mask did over one structured answer."""

from __future__ import annotations

from collections.abc import Sequence


def mask_sentence(allowed: Sequence[int], overruled: int, vocabulary: int) -> str:
    """What the grammar mask did over one structured answer: how far it narrowed the steps, how many it
    forced, how often it overruled the model; and that nothing was narrowed when no step was (tool_choice
    "none": no grammar runs, so "the grammar mask let through 49,152 of 49,152" would invent one)."""
    if not allowed or min(allowed) >= vocabulary:
        return f"No step was narrowed: the model could take any of the {vocabulary:,} tokens at every step."
    low, high = min(allowed), max(allowed)
    forced = sum(1 for n in allowed if n == 1)
    span = (f"exactly **{low:,}**" if low == high else f"between **{low:,}** and **{high:,}**")
    return (f"At every step the grammar mask let through {span} of the {vocabulary:,} tokens; **{forced}** step{'s' * (forced != 1)} had exactly one allowed "
            f"token, and at **{overruled}** step{'s' * (overruled != 1)} the model's own favourite was masked out.")


def structured_lesson(tool_tokens: int, schema_tokens: int, allowed: Sequence[int], overruled: int, vocabulary: int,
                      finish_reason: str) -> str:
    """The page's lesson: what the tools or the schema cost in prompt tokens, the answer's steps (``allowed``
    holds each step's count of tokens the mask let through), what the mask did (``mask_sentence``) and why
    it stopped."""
    cost = (f"The tool definitions cost **{tool_tokens:,} prompt tokens** on every call that carries them. "
            if tool_tokens else
            f"The schema costs no prompt tokens here: the grammar alone enforces it (written into the prompt it "
            f"would cost **{schema_tokens:,}**). ")
    steps = len(allowed)
    return (
        cost + f"The answer took **{steps} token{'s' * (steps != 1)}**. "
        + mask_sentence(allowed, overruled, vocabulary)
        + f" finish_reason: **{finish_reason}**."
    )
