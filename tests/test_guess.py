"""Guess the next token: ranks and probabilities scored against the real model's distribution."""

import numpy as np
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.stages.forward_pass import token_text
from lifecycle.features.guess import POINTS_BY_RANK, points_for, round_options, score_guess, score_token, token_rank
from lifecycle.stages.sampling import next_token_distribution


@pytest.fixture(scope="module")
def distribution(loaded, logits):
    return next_token_distribution(logits, lambda i: token_text(loaded, i))


@pytest.fixture(scope="module")
def encode(loaded):
    return lambda text: loaded.tokenizer.encode(text, add_special_tokens=False)


def test_token_rank_is_the_position_in_the_sorted_distribution(distribution):
    order = np.argsort(-distribution.probs, kind="stable")
    for position in (0, 1, 7, 500, order.size - 1):
        assert token_rank(distribution.probs, int(order[position])) == position + 1
    assert [token_rank(distribution.probs, c.id) for c in distribution.top(10)] == [c.rank for c in distribution.top(10)]


def test_typed_guess_takes_the_better_ranked_reading(distribution, encode):
    best = distribution.top(1)[0]  # " little" after "Once upon a time, there was a"
    result = score_guess(distribution, best.text.strip(), encode)
    assert result.token_id == best.id and result.rank == 1 and result.points == POINTS_BY_RANK[0][1]
    assert result.probability == pytest.approx(best.probability)
    order = np.argsort(-distribution.probs, kind="stable")
    bare = encode("dragon")[0]
    spaced = encode(" dragon")[0]
    result = score_guess(distribution, "dragon", encode)
    assert result.rank == min(int(np.flatnonzero(order == bare)[0]), int(np.flatnonzero(order == spaced)[0])) + 1


def test_a_multi_token_guess_scores_its_first_token(distribution, encode):
    result = score_guess(distribution, "antidisestablishmentarianism", encode)
    assert result.split and result.token_id in (encode(" antidisestablishmentarianism")[0],
                                                encode("antidisestablishmentarianism")[0])


def test_picked_options_are_ranked_tokens_shuffled_the_same_per_round(distribution):
    options = round_options(distribution, 3)
    assert options == round_options(distribution, 3)
    assert sorted(score_token(distribution, i).rank for i in options) == [1, 2, 3, 6, 12, 25]


def test_points_by_rank():
    assert [points_for(r) for r in (1, 2, 5, 6, 20, 21, 100, 101)] == [10, 5, 5, 3, 3, 1, 1, 0]


@pytest.mark.parametrize("guess", ["", "   ", "x" * 101])
def test_empty_or_huge_guess_is_a_clear_error(distribution, encode, guess):
    with pytest.raises(LifecycleError):
        score_guess(distribution, guess, encode)
