"""One block opened up on the real model: recomputed by hand from the hooked tensors, it gives the block's output.

The hand computation is float64 numpy from the model's weight matrices and the config (RMSNorm, RoPE
angles from rope_theta, causal softmax, SwiGLU), never the model's own modules. The model computes in
float32, so the comparison allows float32 rounding: |hand - model| <= 2e-5 * max|model| + 1e-6 for
every intermediate (measured on layers 0, 7 and 29: at most 2.4e-6 of the largest entry).
"""

import numpy as np
import pytest
import torch

from lifecycle.stages.block import TOP_KEYS, BlockShapes, block_flow, open_block, rope_pair, trace_forward
from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.errors import LifecycleError

PROMPT = "The capital of France is"
LAYER = 7


def close(hand: np.ndarray, model: np.ndarray) -> None:
    model = np.asarray(model, dtype=np.float64)
    np.testing.assert_allclose(hand, model, rtol=0, atol=2e-5 * np.abs(model).max() + 1e-6)


@pytest.fixture(scope="module")
def ids(loaded) -> list[int]:
    return render_prompt(Conversation(new_message=PROMPT)).ids


@pytest.fixture(scope="module")
def forward(loaded, ids):
    return open_block(loaded, ids, LAYER, len(ids) - 4)


@pytest.fixture(scope="module")
def trace(forward):
    return forward.block


def layer_weights(loaded, layer: int) -> dict[str, np.ndarray]:
    block = loaded.model.model.layers[layer]
    named = {
        "norm1": block.input_layernorm.weight, "q": block.self_attn.q_proj.weight,
        "k": block.self_attn.k_proj.weight, "v": block.self_attn.v_proj.weight, "o": block.self_attn.o_proj.weight,
        "norm2": block.post_attention_layernorm.weight, "gate": block.mlp.gate_proj.weight,
        "up": block.mlp.up_proj.weight, "down": block.mlp.down_proj.weight,
    }
    return {name: w.detach().double().numpy() for name, w in named.items()}


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return weight * x / np.sqrt((x**2).mean(-1, keepdims=True) + eps)


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Rotate pair (i, i + d/2) of each row by position / theta^(2i/d); x is (..., positions, d)."""
    half = x.shape[-1] // 2
    angles = positions[:, None] / theta ** (2 * np.arange(half) / x.shape[-1])
    cos, sin = np.cos(angles), np.sin(angles)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


@pytest.mark.parametrize("layer", [0, LAYER, -1])
def test_hand_recomputed_block_equals_the_models_block_output(loaded, ids, layer):
    layer %= loaded.num_layers
    trace = open_block(loaded, ids, layer, len(ids) - 4).block
    weights = layer_weights(loaded, layer)
    s, p = trace.shapes, trace.position
    x = trace.block_input.astype(np.float64)  # every position: keys and values come from all of them
    normed = rms_norm(x, weights["norm1"], s.norm_eps)
    close(normed[p], trace.normed)
    q = (normed @ weights["q"].T).reshape(s.positions, s.heads, s.head_dim).transpose(1, 0, 2)
    k = (normed @ weights["k"].T).reshape(s.positions, s.kv_heads, s.head_dim).transpose(1, 0, 2)
    v = (normed @ weights["v"].T).reshape(s.positions, s.kv_heads, s.head_dim).transpose(1, 0, 2)
    close(q[:, p], trace.query)
    close(k, trace.keys)
    close(v, trace.values)
    positions = np.arange(s.positions, dtype=np.float64)
    q, k = rope(q, positions, s.rope_theta), rope(k, positions, s.rope_theta)
    close(q[:, p], trace.query_rotated)
    close(k, trace.keys_rotated)

    k, v = np.repeat(k, s.group, axis=0), np.repeat(v, s.group, axis=0)  # grouped-query: heads share K/V
    scores = np.einsum("hd,hkd->hk", q[:, p], k) / np.sqrt(s.head_dim)
    scores[:, p + 1 :] = -np.inf
    visible = np.isfinite(trace.scores)
    assert (visible == np.isfinite(scores)).all() and visible.sum(1).tolist() == [p + 1] * s.heads
    close(scores[:, : p + 1], trace.scores[:, : p + 1])
    attention = np.exp(scores - scores.max(1, keepdims=True))
    attention /= attention.sum(1, keepdims=True)
    close(attention, trace.weights)
    heads = np.einsum("hk,hkd->hd", attention, v)
    close(heads, trace.head_outputs)
    attention_out = heads.reshape(-1) @ weights["o"].T
    close(attention_out, trace.attention_out)
    after_attention = x[p] + attention_out
    close(after_attention, trace.after_attention)

    normed_mlp = rms_norm(after_attention, weights["norm2"], s.norm_eps)
    gate, up = weights["gate"] @ normed_mlp, weights["up"] @ normed_mlp
    silu = gate / (1 + np.exp(-gate))
    close(gate, trace.gate)
    close(up, trace.up)
    close(silu, trace.activated)
    close(silu * up, trace.product)
    mlp_out = weights["down"] @ (silu * up)
    close(mlp_out, trace.mlp_out)
    close(after_attention + mlp_out, trace.output)


def test_block_output_is_the_next_blocks_input(loaded, ids, trace):
    following = open_block(loaded, ids, LAYER + 1, trace.position)
    assert np.array_equal(following.block.residual, trace.output)
    assert following.ids == ids


def test_shapes_come_from_the_config_and_match_the_tensors(loaded, ids, trace):
    config = loaded.model.config
    s = trace.shapes
    assert s == BlockShapes.of(config, len(ids))
    assert trace.block_input.shape == (len(ids), config.hidden_size)
    assert trace.query.shape == (config.num_attention_heads, s.head_dim)
    assert trace.keys.shape == trace.values.shape == (config.num_key_value_heads, len(ids), s.head_dim)
    assert trace.gate.shape == trace.product.shape == (config.intermediate_size,)
    assert s.heads * s.head_dim == config.hidden_size and s.group * s.kv_heads == s.heads


def test_rope_pair_is_a_rotation_by_the_configured_angle(trace):
    before, after, angle = rope_pair(trace, head=2, pair=1)
    assert angle == pytest.approx(trace.position / trace.shapes.rope_theta ** (2 / trace.shapes.head_dim))
    assert np.linalg.norm(after) == pytest.approx(np.linalg.norm(before), rel=1e-5)
    turned = np.arctan2(after[1], after[0]) - np.arctan2(before[1], before[0])
    assert np.angle(np.exp(1j * (turned - angle))) == pytest.approx(0.0, abs=1e-4)
    with pytest.raises(LifecycleError):
        rope_pair(trace, head=0, pair=trace.shapes.head_dim // 2)


def test_stack_matches_the_models_hidden_states_and_logits(loaded, ids, forward, trace):
    with loaded.lock, torch.inference_mode():
        out = loaded.model(torch.tensor([ids]), output_hidden_states=True)
    p = trace.position
    hidden = torch.stack(out.hidden_states)[:, 0, p].double()  # embedding, then each layer (last one normed)
    stack = forward.stack
    np.testing.assert_allclose(stack.residual_norms[:-1], hidden[:-1].norm(dim=-1).numpy(), rtol=1e-5)
    np.testing.assert_allclose(stack.final_logits, out.logits[0, p].numpy(), atol=1e-4)
    steps = np.diff(stack.residual_norms)
    assert len(stack.attention_norms) == len(stack.mlp_norms) == loaded.num_layers == len(steps)
    # What attention and the MLP add is what moves the stream: |Δ| is at most their two lengths.
    assert (np.abs(steps) <= stack.attention_norms + stack.mlp_norms + 1e-3).all()
    assert stack.attention_norms[LAYER] == pytest.approx(np.linalg.norm(trace.attention_out), rel=1e-5)
    assert stack.mlp_norms[LAYER] == pytest.approx(np.linalg.norm(trace.mlp_out), rel=1e-5)
    assert stack.lens_ids[-1, 0] == stack.final_id
    assert (stack.lens_ids[stack.settles_at:, 0] == stack.final_id).all()
    assert stack.settles_at == 0 or stack.lens_ids[stack.settles_at - 1, 0] != stack.final_id


def test_the_last_position_predicts_paris_in_raw_mode(loaded):
    ids = loaded.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    stack = trace_forward(loaded.model, ids, 0, len(ids) - 1).stack
    assert loaded.tokenizer.decode([stack.final_id]) == " Paris"
    assert stack.settles_at < loaded.num_layers


@pytest.mark.parametrize("layer, position", [(-1, 0), (30, 0), (0, -1), (0, 99)])
def test_out_of_range_layer_or_position_is_a_clear_error(loaded, ids, layer, position):
    with pytest.raises(LifecycleError):
        trace_forward(loaded.model, ids, layer if layer != 30 else loaded.num_layers, position)


def test_every_layers_step_lengths_and_weights_are_the_opened_blocks(loaded):
    """The stack keeps each layer's block_flow lengths and softmax rows at the token, so a page can show any
    layer from one pass: they must equal what opening that layer itself gives."""
    ids = render_prompt(Conversation(new_message="Why is the sky blue?")).ids
    position = len(ids) - 2
    for layer in (0, 17, loaded.num_layers - 1):
        trace = trace_forward(loaded.model, ids, layer, position)
        flow = [step.norm if step.norm is not None else np.nan for step in block_flow(trace.block)]
        assert trace.stack.step_norms.shape == (loaded.num_layers, len(flow))
        np.testing.assert_allclose(trace.stack.step_norms[layer], flow, rtol=1e-5, equal_nan=True)
        np.testing.assert_allclose(trace.stack.head_weights[layer], trace.block.weights, atol=1e-7)
        np.testing.assert_allclose(trace.stack.step_norms[:, -1], trace.stack.residual_norms[1:], rtol=1e-5)


def test_every_tokens_lengths_and_strongest_keys_are_the_ones_opening_that_token_gives(loaded):
    """One pass keeps every token's step lengths, stack lengths and each head's strongest keys, so the page can
    move through tokens without another pass: they must equal what a pass opened at that token keeps, and the
    keys must be the model's own softmax rows' largest, never a key after the query."""
    ids = render_prompt(Conversation(new_message="Why is the sky blue?")).ids
    layer = loaded.num_layers // 2
    last = trace_forward(loaded.model, ids, layer, len(ids) - 1).stack
    assert last.step_norms_by_token.shape[:2] == (len(ids), loaded.num_layers)
    assert last.top_keys.shape == (loaded.num_layers, loaded.model.config.num_attention_heads, len(ids), TOP_KEYS)
    for position in (0, 3, len(ids) - 2):
        at = trace_forward(loaded.model, ids, layer, position)
        np.testing.assert_allclose(last.step_norms_by_token[position], at.stack.step_norms, rtol=1e-5, equal_nan=True)
        np.testing.assert_allclose(last.residual_norms_by_token[position], at.stack.residual_norms, rtol=1e-5)
        np.testing.assert_allclose(last.attention_norms_by_token[position], at.stack.attention_norms, rtol=1e-5)
        rows = at.stack.head_weights  # (layers, heads, keys): the softmax rows of this query
        expected = np.argsort(-rows[..., : position + 1], axis=-1, kind="stable")[..., :TOP_KEYS]
        found = last.top_keys[:, :, position]
        kept = min(TOP_KEYS, position + 1)
        np.testing.assert_array_equal(found[..., :kept], expected)
        assert (found[..., kept:] == -1).all() and (last.top_weights[:, :, position, kept:] == 0).all()
        np.testing.assert_allclose(last.top_weights[:, :, position, :kept],
                                   np.take_along_axis(rows, expected, axis=-1), atol=1e-6)
