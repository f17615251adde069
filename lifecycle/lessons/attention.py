"""The Attention page's lesson: how much attention lands on the first token, and where the last token looks hardest."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionFocus:
    """Where the last token looks hardest, leaving out the first token and the token itself."""

    layer: int
    head: int
    key: int  # index into the maps' tokens
    weight: float
    sink_share: float  # the mean weight on the maps' first token, over every layer, head and query


def attention_lesson(focus: AttentionFocus, tokens: int, first: str, last: str, strongest: str) -> str:
    """The page's two sentences with this run's numbers; ``first``, ``last`` and ``strongest`` are tokens
    already quoted for Markdown."""
    return (
        f"Each of the **{tokens:,} tokens** gathers information from itself and the tokens before it: each row of "
        f"a map below is one token's attention and sums to 1. Here {focus.sink_share:.0%} of all attention lands "
        f"on the first token {first}; leaving that and itself aside, the last token {last} attends most to "
        f"{strongest} (**{focus.weight:.0%}**, layer {focus.layer}, head {focus.head}, shown first)."
    )
