"""Guess the next token: a classroom game scored against the model's real next-token distribution.

A player types a word (or picks one of a few options) before the distribution is revealed. The guess
is read as the token the model would have to produce first: the typed text with and without a leading
space (mid-sentence words carry one in this vocabulary), whichever of the two ranks higher. The
player then sees that token's rank and probability, and earns points by rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lifecycle.errors import LifecycleError
from lifecycle.stages.sampling import NextTokenDistribution

# (best rank that still earns, points): rank 1 earns 10, ranks 2-5 earn 5, ...
POINTS_BY_RANK = ((1, 10), (5, 5), (20, 3), (100, 1))
OPTION_RANKS = (1, 2, 3, 6, 12, 25)  # the picked-from options' ranks, shuffled per round
MAX_GUESS_CHARS = 100


@dataclass(frozen=True)
class GuessResult:
    """A scored guess: the token it was read as, where that token ranks, its probability and the points."""

    guess: str
    token_id: int
    token_text: str
    rank: int
    probability: float
    points: int
    split: bool  # the guess needs more than one token; only its first token is scored


def token_rank(probs: np.ndarray, token_id: int) -> int:
    """1-based rank of ``token_id`` by probability, ties broken by lower id (as the top-k lists order them)."""
    p = probs[token_id]
    return 1 + int(np.count_nonzero(probs > p)) + int(np.count_nonzero(probs[:token_id] == p))


def points_for(rank: int) -> int:
    return next((points for best, points in POINTS_BY_RANK if rank <= best), 0)


def score_guess(distribution: NextTokenDistribution, guess: str, encode: Callable[[str], list[int]]) -> GuessResult:
    """Score ``guess`` (typed text) against ``distribution``; ``encode`` is the model tokenizer's encode."""
    if not isinstance(guess, str) or not guess.strip():
        raise LifecycleError("Type a guess first.", param="guess")
    if len(guess) > MAX_GUESS_CHARS:
        raise LifecycleError(f"A guess has at most {MAX_GUESS_CHARS} characters.", param="guess")
    readings = []
    for text in dict.fromkeys((guess, " " + guess.lstrip(), guess.strip())):
        ids = encode(text)
        if ids:
            readings.append((token_rank(distribution.probs, ids[0]), ids[0], len(ids) > 1))
    rank, token_id, split = min(readings)
    return GuessResult(
        guess=guess,
        token_id=int(token_id),
        token_text=distribution.token_text(int(token_id)),
        rank=rank,
        probability=float(distribution.probs[token_id]),
        points=points_for(rank),
        split=split,
    )


def score_token(distribution: NextTokenDistribution, token_id: int) -> GuessResult:
    """Score a picked option (already a token id)."""
    rank = token_rank(distribution.probs, token_id)
    text = distribution.token_text(int(token_id))
    return GuessResult(text, int(token_id), text, rank, float(distribution.probs[token_id]), points_for(rank), False)


def round_options(distribution: NextTokenDistribution, round_number: int, ranks: Sequence[int] = OPTION_RANKS) -> list[int]:
    """Token ids to pick from: the tokens at ``ranks``, shuffled the same way for everyone in a round."""
    order = np.argsort(-distribution.probs, kind="stable")
    ids = [int(order[r - 1]) for r in ranks if r <= order.size]
    np.random.default_rng(round_number).shuffle(ids)
    return ids
