"""The Next token page's lessons: where the next-token probability sits, counted from the distribution."""

from __future__ import annotations

from collections.abc import Sequence

from lifecycle.lessons.words import share_in_words


def probability_mass_sentence(top_probability: float, tokens_for_half: int) -> str:
    """Where half of the next-token probability sits: in the top token only when it holds half or more."""
    if tokens_for_half > 1:
        return f"Half of the probability sits in the top {tokens_for_half:,} tokens"
    words = share_in_words(top_probability)
    return f"{words[0].upper()}{words[1:]} of the probability ({top_probability:.1%}) sits in that one token"


def tokens_to_reach(probabilities: Sequence[float], share: float) -> tuple[int, float]:
    """The fewest most-likely tokens whose probabilities reach ``share``, and what they hold together."""
    held = 0.0
    for count, probability in enumerate(sorted(probabilities, reverse=True), start=1):
        held += probability
        if held >= share:
            return count, held
    return len(probabilities), held


def ninety_percent_sentence(tokens: int, held: float, vocabulary: int) -> str:
    """How few tokens hold 90% of the probability, with what they really hold and what the rest share."""
    rest = vocabulary - tokens
    if tokens == 1:
        return f"that token alone holds over 90%, and the other {rest:,} share the remaining {1 - held:.1%}"
    return (f"the top {tokens:,} together hold {held:.1%} (the fewest that reach 90%), and the other {rest:,} "
            f"share the remaining {1 - held:.1%}")
