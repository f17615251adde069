"""The Generation page's lesson: the answer's steps, the one prefill and the mean step, and why it stopped."""

from __future__ import annotations

from lifecycle.lessons.words import milliseconds


def generation_sentence(tokens: int, prompt_tokens: int, prefill: float, decode: float, finish_reason: str,
                        max_tokens: int) -> str:
    """The Generation page's lesson: how many steps, the one prefill and the mean step, and why it stopped."""
    why = {
        "stop": "the model chose its end-of-turn token (finish_reason **stop**)",
        "length": f"it reached max_tokens = {max_tokens} (finish_reason **length**)",
    }.get(finish_reason, f"finish_reason **{finish_reason}**")
    unit = "token" if tokens == 1 else "tokens"
    return (f"The model wrote this answer **one token per step: {tokens} {unit}**, after one pass over the "
            f"**{prompt_tokens:,} prompt tokens** (the prefill, {milliseconds(prefill)}); each step took "
            f"**{milliseconds(decode / tokens)}** on average. It stopped because {why}.")
