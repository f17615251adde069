"""Sampling on the real model's next-token logits, checked against brute-force reference computations."""

import math

import numpy as np
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.stages.sampling import (
    STAGES,
    SamplingSettings,
    apply_sampling,
    choose_token,
    choose_tokens,
    entropy_bits,
    next_token_distribution,
)


def softmax(x, temperature=1.0):
    z = np.asarray(x, dtype=np.float64) / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def kept_ids(sampled) -> set[int]:
    return set(np.flatnonzero(sampled.removed_by == -1).tolist())


@pytest.mark.parametrize("temperature,top_p", [(1.0, 0.5), (1.0, 0.9), (0.7, 0.9), (1.5, 0.95), (2.0, 0.99)])
def test_top_p_keeps_the_smallest_set_reaching_p(logits, temperature, top_p):
    sampled = apply_sampling(logits, SamplingSettings(temperature=temperature, top_p=top_p))
    probs = softmax(logits, temperature)
    order = np.argsort(-probs, kind="stable")
    cumulative = np.cumsum(probs[order])
    n = int(np.argmax(cumulative >= top_p)) + 1
    assert kept_ids(sampled) == set(order[:n].tolist())
    assert probs[order[:n]].sum() >= top_p > probs[order[: n - 1]].sum()
    assert set(np.flatnonzero(sampled.removed_by == STAGES.index("top_p"))) == set(order[n:].tolist())


def test_top_p_handles_subnormal_probabilities_at_low_temperature():
    # At T=0.01 these gaps give probabilities around 1e-308: below float64's normal range.
    logits = np.array([0.0, -7.07, -7.09, -7.1, -8.0, -20.0], dtype=np.float32)
    sampled = apply_sampling(logits, SamplingSettings(temperature=0.01, top_p=1 - 1e-12))
    probs = softmax(logits, 0.01)
    assert ((probs > 0) & (probs < np.finfo(np.float64).tiny)).any()
    assert kept_ids(sampled) == {0}
    assert sampled.final_probs.sum() == 1.0


@pytest.mark.parametrize("k", [1, 5, 40, 1000])
def test_top_k_keeps_exactly_the_k_highest(logits, k):
    sampled = apply_sampling(logits, SamplingSettings(top_k=k))
    assert sampled.kept == k
    assert kept_ids(sampled) == set(np.argsort(-logits, kind="stable")[:k].tolist())


def test_min_p_drops_tokens_below_the_fraction_of_the_top_probability(logits):
    sampled = apply_sampling(logits, SamplingSettings(temperature=1.2, min_p=0.05))
    probs = softmax(logits, 1.2)
    expected = set(np.flatnonzero(probs >= 0.05 * probs.max()).tolist())
    assert kept_ids(sampled) == expected
    assert 1 < len(expected) < 1000


def test_repetition_penalty_lowers_repeated_tokens_positive_and_negative(logits):
    top = int(np.argmax(logits))
    negative = int(np.flatnonzero(logits < 0)[0])
    untouched = int(np.argsort(-logits)[1])
    sampled = apply_sampling(logits, SamplingSettings(repetition_penalty=1.5), previous_ids=[top, negative, top])
    assert sampled.final_probs[top] < sampled.base_probs[top]
    assert sampled.final_probs[negative] < sampled.base_probs[negative]
    assert sampled.final_probs[untouched] > sampled.base_probs[untouched]
    # CTRL rule: positive logits divided by the penalty, negative ones multiplied.
    expected_ratio = math.exp((logits[top] / 1.5 - logits[negative] * 1.5))
    assert sampled.final_probs[top] / sampled.final_probs[negative] == pytest.approx(expected_ratio, rel=1e-4)
    assert (sampled.removed_by == -1).all()


def test_penalty_acts_before_top_k(logits):
    top, second = np.argsort(-logits)[:2]
    sampled = apply_sampling(logits, SamplingSettings(top_k=1, repetition_penalty=2.0), previous_ids=[int(top)])
    assert logits[top] / 2.0 < logits[second], "test needs the penalty to reorder the top two tokens"
    assert kept_ids(sampled) == {int(second)}
    assert sampled.removed_by[top] == STAGES.index("top_k")


def test_top_p_acts_on_the_top_k_renormalized_distribution(logits):
    sampled = apply_sampling(logits, SamplingSettings(temperature=1.0, top_k=10, top_p=0.8))
    order = np.argsort(-logits, kind="stable")[:10]
    renormalized = softmax(logits[order])
    n = int(np.argmax(np.cumsum(renormalized) >= 0.8)) + 1
    assert kept_ids(sampled) == set(order[:n].tolist())
    full_nucleus = int(np.argmax(np.cumsum(softmax(logits)[np.argsort(-logits)]) >= 0.8)) + 1
    assert n != full_nucleus, "this prompt must make the order observable"


def test_first_stage_that_removes_a_token_is_recorded(logits):
    sampled = apply_sampling(logits, SamplingSettings(top_k=50, top_p=0.5, min_p=0.5))
    stages = set(sampled.removed_by.tolist())
    assert STAGES.index("top_k") in stages
    # Tokens outside the top 50 are also below min_p, but top_k removed them first.
    outside_top_k = np.argsort(-logits)[50:]
    assert (sampled.removed_by[outside_top_k] == STAGES.index("top_k")).all()
    assert sampled.removed_count("top_k") == logits.size - 50


def test_temperature_towards_zero_converges_to_argmax(logits):
    top = int(np.argmax(logits))
    peaks = [apply_sampling(logits, SamplingSettings(temperature=t)).final_probs[top] for t in (1.5, 1.0, 0.5, 0.1, 0.01)]
    assert all(a < b for a, b in zip(peaks, peaks[1:]))
    assert peaks[-1] > 0.999
    greedy = apply_sampling(logits, SamplingSettings(temperature=0, top_p=0.5, top_k=3))
    assert greedy.greedy and greedy.kept == 1 and greedy.entropy_bits == 0.0
    assert greedy.final_probs[top] == 1.0 and greedy.final_probs.sum() == 1.0
    assert (np.delete(greedy.removed_by, top) == STAGES.index("temperature")).all()
    assert choose_token(greedy, np.random.default_rng(0)) == top


SETTINGS_GRID = [
    SamplingSettings(),
    SamplingSettings(temperature=0.3),
    SamplingSettings(temperature=0.01),
    SamplingSettings(temperature=0.7, top_p=0.9, top_k=50, min_p=0.05, repetition_penalty=1.3),
    SamplingSettings(temperature=2.0, top_p=0.99),
    SamplingSettings(temperature=1.0, top_p=1e-9),
    SamplingSettings(temperature=0.0, repetition_penalty=1.8),
]


@pytest.mark.parametrize("settings", SETTINGS_GRID)
def test_final_distribution_is_normalized_and_consistent_with_removed_by(logits, settings):
    sampled = apply_sampling(logits, settings, previous_ids=[int(np.argmax(logits))])
    assert sampled.final_probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.array_equal(sampled.final_probs == 0, sampled.removed_by != -1)
    assert sampled.kept == int((sampled.removed_by == -1).sum()) >= 1
    assert sampled.base_probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.allclose(sampled.base_probs, softmax(logits))
    assert 0.0 <= sampled.entropy_bits <= math.log2(sampled.kept) + 1e-9
    # apply_sampling takes the entropy from the log-weights it has; it is the final distribution's entropy.
    assert sampled.entropy_bits == pytest.approx(entropy_bits(sampled.final_probs), rel=1e-9, abs=1e-12)


def test_seeded_choice_is_reproducible_and_follows_the_distribution(logits):
    sampled = apply_sampling(logits, SamplingSettings(temperature=1.0, top_k=5))
    first = [choose_token(sampled, np.random.default_rng(1234)) for _ in range(3)]
    rng_a, rng_b = np.random.default_rng(99), np.random.default_rng(99)
    assert [choose_token(sampled, rng_a) for _ in range(50)] == [choose_token(sampled, rng_b) for _ in range(50)]
    assert len(set(first)) == 1

    rng = np.random.default_rng(2024)
    draws = choose_tokens(sampled, rng, 20000)  # the same draws as 20,000 choose_token calls (tested below)
    ids = sorted(kept_ids(sampled))
    assert set(draws.tolist()) <= set(ids)
    observed = np.array([(draws == i).sum() for i in ids])
    expected = sampled.final_probs[ids] * draws.size
    chi_square = float(((observed - expected) ** 2 / expected).sum())
    assert chi_square < 30.0  # 4 degrees of freedom: p < 1e-5 for a correct sampler


def test_many_draws_at_once_are_the_draws_one_at_a_time(logits):
    """choose_tokens, which the Sampling page's draws use, gives exactly the ids that as many choose_token calls
    (the generation loop's) give from the same generator, and leaves the generator where they leave it."""
    for settings in (SamplingSettings(temperature=0.8, top_p=0.95), SamplingSettings(temperature=0.0)):
        sampled = apply_sampling(logits, settings)
        one_by_one, at_once = np.random.default_rng(5), np.random.default_rng(5)
        expected = [choose_token(sampled, one_by_one) for _ in range(500)]
        assert choose_tokens(sampled, at_once, 500).tolist() == expected
        assert one_by_one.random() == at_once.random()
    assert len(set(expected)) == 1  # greedy: the argmax every time


def test_next_token_distribution_lists_the_most_likely_tokens(loaded, logits):
    decode = lambda i: loaded.tokenizer.decode([i])  # noqa: E731
    dist = next_token_distribution(logits, decode)
    assert dist.probs.sum() == pytest.approx(1.0, abs=1e-12)
    top = dist.top(5)
    assert [c.rank for c in top] == [1, 2, 3, 4, 5]
    assert [c.id for c in top] == np.argsort(-logits, kind="stable")[:5].tolist()
    assert all(a.probability >= b.probability for a, b in zip(top, top[1:]))
    for candidate in top:
        assert candidate.text == loaded.tokenizer.decode([candidate.id])
        assert candidate.logprob == pytest.approx(math.log(candidate.probability), rel=1e-9)
    assert 0 < dist.entropy_bits < math.log2(logits.size)
    assert dist.entropy_bits == pytest.approx(apply_sampling(logits, SamplingSettings()).entropy_bits)


@pytest.mark.parametrize(
    "kwargs,param",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": 2.01}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": float("nan")}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"min_p": -0.01}, "min_p"),
        ({"min_p": 1.01}, "min_p"),
        ({"min_p": float("nan")}, "min_p"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"repetition_penalty": 2.5}, "repetition_penalty"),
        ({"repetition_penalty": float("inf")}, "repetition_penalty"),
        ({"temperature": "hot"}, "temperature"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_validate_names_the_out_of_range_parameter(logits, kwargs, param):
    with pytest.raises(LifecycleError) as caught:
        SamplingSettings(**kwargs).validate()
    assert caught.value.param == param
    assert param in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(LifecycleError):
        apply_sampling(logits, SamplingSettings(**kwargs))


def test_validate_accepts_the_edges_of_each_range():
    for settings in [
        SamplingSettings(temperature=0.0, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=2.0, seed=0),
        SamplingSettings(temperature=2.0, top_p=1e-6, top_k=49152, min_p=1.0, repetition_penalty=0.01),
    ]:
        settings.validate()


def test_bad_logits_and_previous_ids_are_rejected(logits):
    with pytest.raises(LifecycleError) as caught:
        apply_sampling(np.array([1.0, float("nan")]), SamplingSettings())
    assert caught.value.param == "logits"
    with pytest.raises(LifecycleError) as caught:
        apply_sampling(logits, SamplingSettings(repetition_penalty=1.2), previous_ids=[logits.size])
    assert caught.value.param == "previous_ids"


def test_one_certain_token_has_zero_entropy_not_minus_zero(logits):
    # A sampled distribution that keeps one token (top-k 1, not greedy) has that token at probability 1.
    sampled = apply_sampling(logits, SamplingSettings(temperature=0.8, top_k=1))
    assert sampled.kept == 1 and f"{sampled.entropy_bits:.2f}" == "0.00"
    assert f"{entropy_bits(np.array([0.0, 1.0]))}" == "0.0"
