"""The Forward pass page's live block: every layer's steps and each head's strongest keys, a bounded payload,
and the browser's view checked before use."""

import json

import numpy as np
import pytest

from charts.live_block import TOP_KEYS, block_view_sent, live_block_data, top_keys

STEPS = ["Block input x", "RMSNorm", "Scores", "+ residual (block output)"]
SHAPES = [(5, 576), (5, 576), (9, 5, 5), (5, 576)]


def data_for(positions: int, position: int, seed: int = 0) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = rng.random((2, 3, positions))
    weights[..., position + 1:] = 0  # the causal mask
    weights /= weights.sum(-1, keepdims=True)
    norms = np.array([[3.0, 1.0, np.nan, 4.0], [4.0, 1.5, np.nan, 6.5]])
    data = live_block_data(STEPS, SHAPES, norms, weights, np.array([3.0, 4.0, 6.5]), np.array([0.5, 1.0]),
                           np.array([0.75, 2.5]), lambda p: f"{p}: t{p}", position, 3, (1, 2))
    return data, weights


def test_each_heads_strongest_keys_and_every_layers_steps_are_sent():
    data, weights = data_for(12, 10)
    keys = np.array(data["keys"]).reshape(2, 3, TOP_KEYS)
    sent = np.array(data["weights"]).reshape(2, 3, TOP_KEYS)
    for layer in range(2):
        for head in range(3):
            row = weights[layer, head]
            assert list(keys[layer, head]) == list(np.argsort(-row, kind="stable")[:TOP_KEYS])
            np.testing.assert_allclose(sent[layer, head], np.sort(row)[::-1][:TOP_KEYS], atol=1e-5)
    assert data["step_norms"] == [3.0, 1.0, None, 4.0, 4.0, 1.5, None, 6.5]  # NaN travels as null
    assert [s["add"] for s in data["steps"]] == [False, False, False, True]
    assert data["steps"][2]["shape"] == "(9 x 5 x 5)"
    assert set(data["labels"]) == {str(k) for k in keys.ravel()} | {"10"}
    assert data["start"] == {"layer": 1, "head": 2} and json.loads(json.dumps(data)) == data


def test_the_payload_does_not_grow_with_the_prompt_beyond_its_top_keys():
    small, _ = data_for(12, 11)
    large, _ = data_for(1200, 1199)
    assert len(large["keys"]) == len(small["keys"]) == 2 * 3 * TOP_KEYS
    assert large["bytes"] < 2 * small["bytes"]


def test_top_keys_never_picks_a_masked_key_and_breaks_ties_by_position():
    keys, weights = top_keys(np.array([[[0.25, 0.25, 0.5, 0.0]]]), k=3)
    assert keys.tolist() == [[[2, 0, 1]]] and weights.tolist() == [[[0.5, 0.25, 0.25]]]


@pytest.mark.parametrize(("sent", "expected"), [
    ({"layer": 1, "head": 2, "sent_at": 5}, (1, 2)), (None, None), ({"layer": 30, "head": 0}, None),
    ({"layer": -1, "head": 0}, None), ({"layer": "x", "head": 0}, None), ({"head": 1}, None),
])
def test_only_a_view_of_this_model_is_taken_from_the_browser(sent, expected):
    assert block_view_sent(sent, 30, 9) == expected
