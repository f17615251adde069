"""The remote engine's first step against the local prefill: the gap and the sentence pages show."""

import math

from lifecycle.features.remote_gap import ROUNDING_POINTS, first_step_gap


def _remote(*pairs):
    return [(data, math.log(p)) for data, p in pairs]


def test_same_distribution_within_rounding_is_said_to_match():
    local = {b"The": 0.60, b" The": 0.25, b"Paris": 0.10}
    gap = first_step_gap(_remote((b"The", 0.6004), (b" The", 0.2499)), local, local_prompt_tokens=37,
                         remote_prompt_tokens=37)
    assert gap.top_matches and not gap.beyond_rounding
    assert math.isclose(gap.max_points, 0.04, abs_tol=1e-9)
    assert gap.sentence().startswith("The remote engine's first step matches this app's model")
    assert "within 0.04 points over its 2 listed tokens" in gap.sentence()


def test_a_different_top_token_is_named_with_the_widest_gap():
    local = {b"The": 0.111, b"L": 0.05, b" Paris": 0.02}
    gap = first_step_gap(_remote((b"L", 0.151), (b"The", 0.111), (b"X", 0.01)), local, local_prompt_tokens=37,
                         remote_prompt_tokens=37)
    assert not gap.top_matches and gap.beyond_rounding
    assert gap.remote_top == b"L" and gap.local_top == b"The"
    assert math.isclose(gap.max_points, 10.1, abs_tol=1e-9) and gap.widest == b"L"
    text = gap.sentence()
    assert "the remote's top token is L, this app's model's is The" in text
    assert "differ by up to 10.1 points (on L, over its 3 listed tokens)" in text
    assert "same 37 prompt tokens" in text and "quantise differently" in text


def test_same_top_but_probabilities_apart_says_the_points():
    local = {b"The": 0.50, b" A": 0.20}
    gap = first_step_gap(_remote((b"The", 0.531), (b" A", 0.19)), local, local_prompt_tokens=10,
                         remote_prompt_tokens=10)
    assert gap.top_matches and gap.beyond_rounding
    assert "the remote's top token (The) matches this app's model" in gap.sentence()
    assert "up to 3.1 points (on The" in gap.sentence()


def test_another_prompt_length_is_blamed_on_the_prompt_even_when_tokens_agree():
    local = {b"The": 0.5}
    gap = first_step_gap(_remote((b"The", 0.5)), local, local_prompt_tokens=37, remote_prompt_tokens=41)
    assert gap.max_points < ROUNDING_POINTS and gap.beyond_rounding
    assert "it counted 41 prompt tokens against this app's 37: it renders another prompt" in gap.sentence()


def test_unknown_prompt_length_and_tokens_the_local_model_gives_nothing():
    gap = first_step_gap(_remote((b"\n", 0.3)), {b"The": 0.9}, local_prompt_tokens=5)
    assert math.isclose(gap.max_points, 30.0, abs_tol=1e-9) and gap.widest == b"\n"
    assert "the remote's top token is ↵" in gap.sentence()
    assert "whether it read the same prompt is unknown" in gap.sentence()


def test_nothing_listed_is_no_comparison():
    assert first_step_gap([], {b"The": 1.0}, local_prompt_tokens=3) is None
