"""The Guess page's lesson: the game's rounds and how a guess's rank among the vocabulary scores."""

from __future__ import annotations

from collections.abc import Sequence


def points_rule(points_by_rank: Sequence[tuple[int, int]]) -> str:
    """The scoring as a sentence part, from (worst rank, points) pairs, best first: "rank 1: 10; ranks 2–5: 5;
    ...; lower: 0"."""
    parts, previous = [], 0
    for best, points in points_by_rank:
        ranks = f"rank {best}" if best == previous + 1 else f"ranks {previous + 1}–{best}"
        parts.append(f"{ranks}: {points}")
        previous = best
    return "; ".join(parts) + "; lower: 0"


def guess_lesson(rounds: int, vocabulary: int, points_by_rank: Sequence[tuple[int, int]]) -> str:
    """The page's lesson: how a round is played and scored, over ``rounds`` rounds and the model's vocabulary."""
    return (
        f"A game for a class, {rounds} rounds. Each round shows a prompt; before anything is revealed, every "
        "player guesses the **first token of the model's answer**, on their own device. Then the model's real "
        f"next-token distribution (the same one the Next token page shows) says how your guess ranked among all "
        f"{vocabulary:,} tokens. Points by rank: {points_rule(points_by_rank)}."
    )
