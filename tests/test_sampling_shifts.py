"""The moving stages of sampling (logit bias, presence and frequency penalties) on real logits,
checked against OpenAI's formulas computed by hand."""

import numpy as np
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.stages.sampling import SamplingSettings, apply_sampling


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_logit_bias_adds_to_the_logit_and_is_recorded(logits):
    top, second = np.argsort(-logits)[:2]
    sampled = apply_sampling(logits, SamplingSettings(logit_bias=((int(top), -100.0), (int(second), 5.0))))
    expected = logits.astype(np.float64).copy()
    expected[top] -= 100.0
    expected[second] += 5.0
    np.testing.assert_allclose(sampled.final_probs, softmax(expected), rtol=1e-9, atol=1e-15)
    shift = sampled.shift("logit_bias")
    assert sorted(shift.ids.tolist()) == sorted([int(top), int(second)])
    assert dict(zip(shift.ids.tolist(), (shift.after - shift.before).round(4).tolist())) == {int(top): -100.0, int(second): 5.0}


def test_logit_bias_minus_100_bans_the_greedy_choice(logits):
    top, second = np.argsort(-logits)[:2]
    greedy = apply_sampling(logits, SamplingSettings(temperature=0, logit_bias=((int(top), -100.0),)))
    assert int(np.argmax(greedy.final_probs)) == int(second)


def test_presence_and_frequency_penalties_follow_openais_formula(logits):
    generated = [11, 11, 11, 42, 7]
    settings = SamplingSettings(presence_penalty=0.5, frequency_penalty=0.25)
    sampled = apply_sampling(logits, settings, previous_ids=[1, 2, 3] + generated, generated_ids=generated)
    expected = logits.astype(np.float64).copy()
    for token_id, count in {11: 3, 42: 1, 7: 1}.items():
        expected[token_id] -= count * 0.25 + 0.5  # mu[j] - c[j] * alpha_frequency - 1[c[j] > 0] * alpha_presence
    np.testing.assert_allclose(sampled.final_probs, softmax(expected), rtol=1e-9, atol=1e-15)
    assert sampled.shift("presence_penalty").ids.tolist() == [7, 11, 42]
    assert (sampled.shift("presence_penalty").before - sampled.shift("presence_penalty").after == 0.5).all()
    frequency = sampled.shift("frequency_penalty")
    assert dict(zip(frequency.ids.tolist(), (frequency.before - frequency.after).tolist())) == {7: 0.25, 11: 0.75, 42: 0.25}


def test_penalties_ignore_prompt_tokens(logits):
    sampled = apply_sampling(logits, SamplingSettings(presence_penalty=2.0), previous_ids=[5, 6], generated_ids=[])
    np.testing.assert_allclose(sampled.final_probs, softmax(logits.astype(np.float64)), rtol=1e-9)
    assert sampled.shifts == []


def test_negative_presence_penalty_raises_a_seen_token(logits):
    low = int(np.argmin(logits))
    sampled = apply_sampling(logits, SamplingSettings(presence_penalty=-2.0), generated_ids=[low])
    assert sampled.final_probs[low] > softmax(logits.astype(np.float64))[low] * 7  # e^2 = 7.39


@pytest.mark.parametrize("settings,param", [
    (SamplingSettings(presence_penalty=2.5), "presence_penalty"),
    (SamplingSettings(frequency_penalty=float("nan")), "frequency_penalty"),
    (SamplingSettings(logit_bias=((1, 101.0),)), "logit_bias"),
    (SamplingSettings(logit_bias=((-1, 1.0),)), "logit_bias"),
])
def test_out_of_range_settings_name_their_parameter(logits, settings, param):
    with pytest.raises(LifecycleError) as error:
        apply_sampling(logits, settings)
    assert error.value.param == param


def test_logit_bias_outside_the_vocabulary_is_refused(logits):
    with pytest.raises(LifecycleError) as error:
        apply_sampling(logits, SamplingSettings(logit_bias=((logits.size, 1.0),)))
    assert error.value.param == "logit_bias"
