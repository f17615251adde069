"""The Attention page's live maps: the browser gets every layer's and head's causal weights, exact to
1/65535, within a stated budget; the focus the lesson states is found in the maps themselves."""

import base64
import json

import numpy as np
import pytest

from charts.live_attention import (
    CODE_MAX,
    attention_focus,
    decoded_triangles,
    live_attention_data,
    live_limit_note,
    picture_only,
    shipped_tokens,
    triangle_cells,
)


def causal_maps(layers: int, heads: int, n: int, seed: int = 0) -> np.ndarray:
    """Random softmax rows under a causal mask, as the model's attention is."""
    scores = np.random.default_rng(seed).normal(size=(layers, heads, n, n)) * 3
    scores[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = -np.inf
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


def as_mapping(stacked: np.ndarray) -> dict[int, np.ndarray]:
    return {layer: stacked[layer] for layer in range(len(stacked))}


def test_every_map_round_trips_within_one_code():
    maps = causal_maps(4, 3, 11)
    data = live_attention_data(as_mapping(maps), [f"{i}: t" for i in range(11)], 11, 3, (2, 1))
    back = decoded_triangles(data["weights"], 4, 3, 11)
    assert np.abs(back - maps).max() <= 0.5 / CODE_MAX + 1e-12
    assert np.all(back[..., np.triu_indices(11, 1)[0], np.triu_indices(11, 1)[1]] == 0)  # the mask stays
    assert len(base64.b64decode(data["weights"])) == 4 * 3 * triangle_cells(11) * 2
    assert data["tokens"] == data["total_tokens"] == 11 and data["first_position"] == 0
    assert data["start"] == {"layer": 2, "head": 1, "query": 10}
    assert live_limit_note(data) == ""


def test_the_first_picture_gets_the_start_layer_alone():
    maps = causal_maps(4, 3, 11)
    data = live_attention_data(as_mapping(maps), [f"{i}: t" for i in range(11)], 11, 3, (2, 1))
    first = picture_only(data)
    assert first["only_layer"] == 2 and first["fingerprint"] == data["fingerprint"]
    back = decoded_triangles(first["weights"], 1, 3, 11)
    assert np.array_equal(back[0], decoded_triangles(data["weights"], 4, 3, 11)[2])
    rest = ("weights", "only_layer")
    assert {k: v for k, v in first.items() if k not in rest} == {k: v for k, v in data.items() if k not in rest}


def test_a_long_prompt_ships_its_last_tokens_within_the_budget_and_says_so():
    maps = causal_maps(2, 2, 40, seed=1)
    budget = 2 * 2 * triangle_cells(25) * 2  # room for exactly 25 tokens
    labels = [f"{i + 60}: t{i}" for i in range(40)]  # the maps' tokens start at position 60 of 100
    data = live_attention_data(as_mapping(maps), labels, 100, 1, (0, 0), budget_bytes=budget)
    assert data["tokens"] == 25 and data["first_position"] == 75 and data["labels"] == labels[15:]
    assert len(base64.b64decode(data["weights"])) <= budget
    back = decoded_triangles(data["weights"], 2, 2, 25)
    np.testing.assert_allclose(back, maps[..., 15:, 15:], atol=0.5 / CODE_MAX + 1e-12)
    note = live_limit_note(data, budget)
    assert "last 25 of 100 tokens" in note and "sum to less than 1" in note
    assert shipped_tokens(26, 4, budget) == 25 and shipped_tokens(25, 4, budget) == 25


def test_labels_travel_as_plain_json_strings():
    hostile = "</script><img src=x onerror=alert(1)>"
    data = live_attention_data(as_mapping(causal_maps(1, 1, 2)), ["0: a", f"1: {hostile}"], 2, 1, (0, 0))
    assert json.loads(json.dumps(data))["labels"][1] == f"1: {hostile}"
    with pytest.raises(ValueError):
        live_attention_data(as_mapping(causal_maps(1, 1, 3)), ["0: a"], 3, 1, (0, 0))


def test_focus_leaves_out_the_first_token_and_the_query_itself():
    maps = np.zeros((2, 2, 4, 4))
    maps[..., 0] = 1.0  # everything on the first token ...
    maps[1, 0, 3] = [0.5, 0.1, 0.3, 0.1]  # ... but in layer 1, head 0 the last token also looks at token 2
    focus = attention_focus(maps)
    assert (focus.layer, focus.head, focus.key) == (1, 0, 2) and focus.weight == pytest.approx(0.3)
    assert focus.sink_share == pytest.approx((2 * 2 * 4 - 0.5) / 16)
