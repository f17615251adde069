"""The Next token page's lessons: where the next-token probability sits, counted from the distribution."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lifecycle.lessons.words import share_in_words


def probability_mass_sentence(top_probability: float, tokens_for_half: int) -> str:
    """Where half of the next-token probability sits: in the top token only when it holds half or more."""
    if tokens_for_half > 1:
        return f"Half of the probability sits in the top {tokens_for_half:,} tokens"
    words = share_in_words(top_probability)
    return f"{words[0].upper()}{words[1:]} of the probability ({top_probability:.1%}) sits in that one token"


def tokens_to_reach(probabilities: Sequence[float], share: float) -> tuple[int, float]:
    """The fewest most-likely tokens whose probabilities reach ``share``, and what they hold together.

    In numpy: a class's sessions each run it over the whole vocabulary, where a Python sort and loop cost
    ~20 ms of the page's script run."""
    return _reach(_running_totals(probabilities), share)


def _running_totals(probabilities: Sequence[float]) -> np.ndarray:
    """What the top 1, 2, 3, ... tokens hold together."""
    return np.cumsum(np.sort(np.asarray(probabilities, dtype=np.float64))[::-1])


def _reach(held: np.ndarray, share: float) -> tuple[int, float]:
    count = min(int(np.searchsorted(held, share)) + 1, held.size)  # the first running total >= share
    return count, float(held[count - 1])


def ninety_percent_sentence(tokens: int, held: float, vocabulary: int) -> str:
    """How few tokens hold 90% of the probability, with what they really hold and what the rest share."""
    rest = vocabulary - tokens
    if tokens == 1:
        return f"that token alone holds over 90%, and the other {rest:,} share the remaining {1 - held:.1%}"
    return (f"the top {tokens:,} together hold {held:.1%} (the fewest that reach 90%), and the other {rest:,} "
            f"share the remaining {1 - held:.1%}")


def next_token_lesson(prompt_tokens: int, best: str, best_probability: float, probabilities: Sequence[float],
                      entropy_bits: float) -> str:
    """The Next token page's lesson: the likeliest token (``best``, already quoted for Markdown), the scores at
    the last position, where half and 90% of the probability sit, and the entropy as a fair choice."""
    vocab = len(probabilities)
    totals = _running_totals(probabilities)  # sorted once for both shares
    half, _ = _reach(totals, 0.5)
    ninety, held = _reach(totals, 0.9)
    effective = 2 ** entropy_bits
    return (
        f"The most likely next token is {best} at **{best_probability:.1%}**. "
        f"After reading all {prompt_tokens:,} prompt tokens, the model's last position ends in "
        f"{vocab:,} scores (logits), one per vocabulary token; softmax turns them into probabilities "
        f"that add up to 1. "
        f"{probability_mass_sentence(best_probability, half)}; {ninety_percent_sentence(ninety, held, vocab)}. "
        f"The entropy is "
        f"**{entropy_bits:.2f} bits**: the model is as unsure as a fair choice among about "
        f"**{effective:,.1f}** equally likely tokens."
    )
