"""The Forward pass page's live block: every token's and layer's steps and each head's strongest keys, a
payload bounded by a window of tokens, and the browser's view checked before use."""

import json

import numpy as np
import pytest

from charts.live_block import (LIVE_TOKENS, TOP_KEYS, WEIGHT_UNIT, block_view_sent, live_block_data, token_window,
                               unpacked)

STEPS = ["Block input x", "RMSNorm", "Scores", "+ residual (block output)"]
SHAPES = [(5, 576), (5, 576), (9, 5, 5), (5, 576)]
LAYERS, HEADS, STAGE_TOP = 2, 3, 8


def stack_for(positions: int, seed: int = 0) -> dict:
    """A stack's arrays as lifecycle.stages.block keeps them, for ``positions`` tokens."""
    rng = np.random.default_rng(seed)
    weights = rng.random((LAYERS, HEADS, positions, positions))
    weights *= np.tril(np.ones((positions, positions)))  # the causal mask
    weights /= weights.sum(-1, keepdims=True)
    order = np.argsort(-weights, axis=-1, kind="stable")[..., :STAGE_TOP]
    top = np.take_along_axis(weights, order, axis=-1)
    keys = np.where(order <= np.arange(positions)[:, None], order, -1)
    if keys.shape[-1] < STAGE_TOP:
        pad = STAGE_TOP - keys.shape[-1]
        keys = np.pad(keys, [(0, 0)] * 3 + [(0, pad)], constant_values=-1)
        top = np.pad(top, [(0, 0)] * 3 + [(0, pad)])
    norms = rng.random((positions, LAYERS, len(STEPS))) * 10
    norms[..., 2] = np.nan  # the scores hand on no vector per token
    return dict(step_norms=norms, top_keys=keys, top_weights=np.where(keys >= 0, top, 0.0),
                residual_norms=rng.random((positions, LAYERS + 1)) * 10,
                attention_norms=rng.random((positions, LAYERS)), mlp_norms=rng.random((positions, LAYERS)))


def data_for(positions: int, position: int) -> tuple[dict, dict]:
    stack = stack_for(positions)
    labels = [f"{p}: t{p}" for p in range(positions)]
    return unpacked(live_block_data(STEPS, SHAPES, **stack, labels=labels, kv_group=3, start=(1, 2, position))), stack


def test_every_tokens_steps_and_each_heads_strongest_keys_are_sent():
    data, stack = data_for(12, 10)
    assert data["tokens"] == [0, 12] and data["top"] == TOP_KEYS
    keys = np.array(data["keys"]).reshape(12, LAYERS, HEADS, TOP_KEYS)
    weights = np.array(data["weights"]).reshape(12, LAYERS, HEADS, TOP_KEYS) * WEIGHT_UNIT
    for token in (0, 3, 11):
        for layer in range(LAYERS):
            for head in range(HEADS):
                expected = stack["top_keys"][layer, head, token, :TOP_KEYS]
                assert list(keys[token, layer, head]) == list(expected)
                assert (keys[token, layer, head] <= token).all()  # never a later key
                np.testing.assert_allclose(weights[token, layer, head],
                                           stack["top_weights"][layer, head, token, :TOP_KEYS], atol=WEIGHT_UNIT)
    assert list(keys[0, 0, 0]) == [0] + [-1] * (TOP_KEYS - 1)  # the first token has one key: itself
    norms = np.array([np.nan if n is None else n for n in data["step_norms"]]).reshape(12, LAYERS, len(STEPS))
    np.testing.assert_allclose(norms, stack["step_norms"], atol=0.051, equal_nan=True)  # NaN travels as null
    assert data["step_norms"][2] is None
    np.testing.assert_allclose(np.reshape(data["residual"], (12, LAYERS + 1)), stack["residual_norms"], atol=0.051)
    assert [s["add"] for s in data["steps"]] == [False, False, False, True]
    assert data["steps"][2]["shape"] == "(9 x 5 x 5)"
    assert set(data["labels"]) == {str(p) for p in range(12)}
    assert data["start"] == {"layer": 1, "head": 2, "position": 10} and json.loads(json.dumps(data)) == data


def test_a_long_prompt_sends_a_window_of_tokens_around_the_chosen_one():
    assert token_window(5, 20) == range(0, 20)
    assert token_window(5, 200) == range(0, LIVE_TOKENS)
    assert token_window(100, 200) == range(100 - LIVE_TOKENS // 2, 100 + LIVE_TOKENS // 2)
    assert token_window(199, 200) == range(200 - LIVE_TOKENS, 200)
    full, _ = data_for(LIVE_TOKENS, LIVE_TOKENS - 1)
    long, _ = data_for(3 * LIVE_TOKENS, 2 * LIVE_TOKENS)
    assert long["tokens"] == [2 * LIVE_TOKENS - LIVE_TOKENS // 2, 2 * LIVE_TOKENS + LIVE_TOKENS // 2]
    assert len(long["keys"]) == len(full["keys"]) == LIVE_TOKENS * LAYERS * HEADS * TOP_KEYS
    assert long["bytes"] < 1.2 * full["bytes"]
    # Labels: the window's tokens and the earlier keys they attend to, not the whole prompt.
    window = range(*long["tokens"])
    assert {str(p) for p in window} <= set(long["labels"]) and len(long["labels"]) < 3 * LIVE_TOKENS


def test_the_start_is_not_part_of_the_fingerprint():
    """The browser keeps its block when only the view changes (a rerun after its controls rested)."""
    stack = stack_for(12)
    labels = [str(p) for p in range(12)]
    one = live_block_data(STEPS, SHAPES, **stack, labels=labels, kv_group=3, start=(0, 0, 11))
    other = live_block_data(STEPS, SHAPES, **stack, labels=labels, kv_group=3, start=(1, 2, 4))
    assert one["fingerprint"] == other["fingerprint"] and one["start"] != other["start"]


@pytest.mark.parametrize(("sent", "expected"), [
    ({"layer": 1, "head": 2, "position": 4, "sent_at": 5}, (1, 2, 4)), (None, None),
    ({"layer": 30, "head": 0, "position": 0}, None), ({"layer": -1, "head": 0, "position": 0}, None),
    ({"layer": 1, "head": 0, "position": 12}, None), ({"layer": 1, "head": 0, "position": -1}, None),
    ({"layer": "x", "head": 0, "position": 0}, None), ({"head": 1, "position": 0}, None),
    ({"layer": 1, "head": 2}, None),
])
def test_only_a_view_of_this_model_and_prompt_is_taken_from_the_browser(sent, expected):
    assert block_view_sent(sent, 30, 9, 12) == expected
