"""Forward pass and KV cache charts: the figures carry exactly the data they are given."""

import json

import numpy as np
import pytest

from charts.forward_pass import (
    rope_rotation,
    scores_and_weights,
    shape_text,
    silu_neurons,
    top_neuron_bars,
)
from charts.kv_cache import cache_growth, latency_chart, turns_chart
from lifecycle.features.handout import script_json


def test_shape_text_groups_thousands():
    assert shape_text((9, 1536, 64)) == "(9 x 1,536 x 64)"


def test_rope_rotation_draws_both_vectors_and_the_turn_modulo_a_full_circle():
    figure = rope_rotation(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 2 * np.pi + np.pi / 2, (0, 32))
    arc, before, after = figure.data
    assert (before.x[1], before.y[1]) == (1.0, 0.0) and (after.x[1], after.y[1]) == (0.0, 1.0)
    assert np.degrees(np.arctan2(arc.y[-1], arc.x[-1])) == pytest.approx(90.0)
    assert "90.0°" in arc.name


def test_scores_mark_masked_keys_and_weights_are_drawn_as_given():
    scores = np.array([1.0, 2.0, -np.inf, -np.inf])
    weights = np.array([0.27, 0.73, 0.0, 0.0])
    figure = scores_and_weights(scores, weights, ["a", "b", "c", "d"])
    bars, masked, drawn = figure.data
    assert list(bars.y) == [1.0, 2.0, 0.0, 0.0] and list(masked.x) == ["c", "d"]
    np.testing.assert_array_equal(drawn.y, weights)


def test_neuron_charts_highlight_the_given_neurons():
    gate = np.array([-2.0, 0.5, 3.0, 1.0])
    activated = gate / (1 + np.exp(-gate))
    up = np.array([1.0, -1.0, 2.0, 0.5])
    figure = silu_neurons(gate, activated, [2, 3])
    assert list(figure.data[2].x) == [3.0, 1.0] and list(figure.data[2].text) == ["#2", "#3"]
    bars = top_neuron_bars([2, 0], activated, up, activated * up)
    assert list(bars.data[2].x) == ["2", "0"]
    np.testing.assert_allclose(bars.data[2].y, (activated * up)[[2, 0]])


def test_cache_growth_lines_have_the_per_token_slopes():
    figure = cache_growth(1024, 3072, 2048, [("this prompt", 100)])
    mha, gqa, mark = figure.data
    assert gqa.x[0] == 1 and gqa.x[-1] == 2048 and figure.layout.xaxis.type == "log"
    assert gqa.y[-1] == pytest.approx(2048 * 1024 / 2**20)
    np.testing.assert_allclose(np.asarray(mha.y) / np.asarray(gqa.y), 3.0)
    assert mark.x[0] == 100 and mark.y[0] == pytest.approx(100 * 1024 / 2**20)


def test_latency_and_turn_charts_carry_the_measurements():
    figure = latency_chart([16, 64], [10.0, 40.0], [5.0, 5.5], 64)
    assert list(figure.data[0].y) == [10.0, 40.0] and list(figure.data[1].y) == [5.0, 5.5]
    turns = turns_chart([1, 2], [0, 30], [40, 20], [50.0, 20.0], [50.0, 60.0])
    computed = next(t for t in turns.data if t.name == "computed")
    assert list(computed.base) == [0, 30] and list(computed.y) == [40, 20]


def test_script_json_cannot_close_its_script_element():
    text = json.dumps({"label": "</script><!-- & >"})
    safe = script_json(text)
    assert "<" not in safe and ">" not in safe and "&" not in safe
    assert json.loads(safe) == json.loads(text)
