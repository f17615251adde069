"""The Next token page's lesson: where half and 90% of the probability sit, and the whole lesson."""

import numpy as np
import pytest

from lifecycle.lessons.next_token import (next_token_lesson, ninety_percent_sentence, probability_mass_sentence,
                                          tokens_to_reach)


def test_probability_mass_names_the_top_tokens_real_share():
    assert probability_mass_sentence(0.609, 1) == "About three fifths of the probability (60.9%) sits in that one token"
    assert probability_mass_sentence(0.886, 1).startswith("About nine tenths of the probability (88.6%)")
    assert probability_mass_sentence(0.50, 1).startswith("About half of the probability (50.0%)")
    assert probability_mass_sentence(0.31, 4) == "Half of the probability sits in the top 4 tokens"


def test_tokens_to_reach_counts_the_fewest_most_likely_tokens():
    probabilities = [0.012, 0.886, 0.014, 0.05, 0.038]
    assert tokens_to_reach(probabilities, 0.5) == (1, pytest.approx(0.886))
    assert tokens_to_reach(probabilities, 0.9) == (2, pytest.approx(0.936))
    assert tokens_to_reach(probabilities, 0.95) == (3, pytest.approx(0.974))
    assert tokens_to_reach([0.25, 0.5, 0.25], 0.75) == (2, 0.75)  # reaching the share exactly counts
    assert tokens_to_reach([0.2, 0.3], 1.5) == (2, pytest.approx(0.5))  # a share never reached: every token


def test_tokens_to_reach_takes_the_models_whole_distribution(logits):
    """A page passes the real 49,152-way distribution as an array: the count is the first running total of
    the sorted probabilities to reach the share."""
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    count, held = tokens_to_reach(probabilities, 0.9)
    ordered = sorted(probabilities.tolist(), reverse=True)
    assert sum(ordered[:count - 1]) < 0.9 <= sum(ordered[:count]) == pytest.approx(held)


def test_the_ninety_percent_sentence_states_what_the_tokens_really_hold():
    assert ninety_percent_sentence(3, 0.912, 49_152) == (
        "the top 3 together hold 91.2% (the fewest that reach 90%), and the other 49,149 share the remaining 8.8%")
    assert ninety_percent_sentence(1, 0.97, 49_152) == (
        "that token alone holds over 90%, and the other 49,151 share the remaining 3.0%")


def test_the_next_token_lesson_counts_from_the_distribution():
    probabilities = [0.012, 0.886, 0.014, 0.05, 0.038]
    text = next_token_lesson(37, "'The'", 0.886, probabilities, 0.6931)
    assert "After reading all 37 prompt tokens, the model's last position ends in 5 scores" in text
    assert "The most likely next token is 'The' at **88.6%**." in text
    assert "About nine tenths of the probability (88.6%) sits in that one token; the top 2 together hold 93.6%" in text
    assert "the other 3 share the remaining 6.4%" in text
    assert "**0.69 bits**" in text and "about **1.6** equally likely tokens" in text  # 2 ** 0.6931
    flat = next_token_lesson(5, "'a'", 0.3, [0.3, 0.25, 0.25, 0.2], 1.985)
    assert "Half of the probability sits in the top 2 tokens; the top 4 together hold 100.0%" in flat
    assert "the other 0 share the remaining 0.0%" in flat and "about **4.0** equally" in flat
