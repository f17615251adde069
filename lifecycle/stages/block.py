"""One transformer block opened up, and the residual stream through the whole stack.

A decoder block of this model (Llama architecture) does, for every position::

    x ─ RMSNorm ─ Q,K,V projections ─ RoPE ─ softmax(Q·Kᵀ/√d + causal mask) ─ ·V ─ output proj ─ (+x) = h
    h ─ RMSNorm ─ gate, up ─ SiLU(gate) x up ─ down ─ (+h) = block output

``trace_forward(model, ids, layer, position)`` runs one real forward pass with hooks on the real
modules and keeps every intermediate of ``layer`` at the chosen token ``position`` (plus the keys and
values of every position, which its attention reads), and, for every layer and every token, how large
the residual stream is and how much attention and the MLP add to it, the lengths after each of the
block's steps and the keys each head attends to most, plus the logit lens at the chosen position.
Only the attention scores are not a module output (they are computed inside the attention
function): they are rebuilt from the hooked queries and keys with the model's own RoPE function
and scale, and the model's softmax weights are kept beside them so a test can check the two agree.

``trace_forward`` takes the Hugging Face model itself; ``open_block`` runs it as a job of the engine,
the one place that runs the model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lifecycle.errors import LifecycleError
from lifecycle.stages.sampling import TokenCandidate

TOP_NEURONS = 8
TOP_KEYS = 8  # per layer, head and query token: the keys it attends to most


@dataclass(frozen=True)
class BlockShapes:
    """The sizes of one block, read from the loaded model's config (never written down by hand)."""

    positions: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    layers: int
    vocab: int
    rope_theta: float
    norm_eps: float

    @classmethod
    def of(cls, config, positions: int) -> BlockShapes:
        heads = int(config.num_attention_heads)
        return cls(
            positions=positions,
            hidden=int(config.hidden_size),
            heads=heads,
            kv_heads=int(config.num_key_value_heads),
            head_dim=int(getattr(config, "head_dim", None) or config.hidden_size // heads),
            intermediate=int(config.intermediate_size),
            layers=int(config.num_hidden_layers),
            vocab=int(config.vocab_size),
            rope_theta=float(config.rope_parameters["rope_theta"]),
            norm_eps=float(config.rms_norm_eps),
        )

    @property
    def group(self) -> int:
        """Query heads that share one key/value head (grouped-query attention)."""
        return self.heads // self.kv_heads

    def rope_angle(self, position: int, pair: int) -> float:
        """The angle (radians) RoPE rotates dimension pair ``pair`` by at ``position``: p / θ^(2i/d)."""
        return position / self.rope_theta ** (2 * pair / self.head_dim)


@dataclass
class BlockTrace:
    """Every intermediate of one block at one token, from the real forward pass.

    Vectors at the chosen position are 1-D; ``keys``/``values`` are (kv_heads, positions, head_dim)
    for every position of the prompt (before and after RoPE), ``cos``/``sin`` (positions, head_dim).
    ``scores`` are Q·K/√d for the chosen query against every key, -inf where the causal mask hides
    a later key; ``weights`` are the model's own softmax of them (heads, positions).
    """

    layer: int
    position: int
    shapes: BlockShapes
    block_input: np.ndarray  # (positions, hidden): the residual stream entering the block
    normed: np.ndarray
    query: np.ndarray  # (heads, head_dim) before RoPE
    query_rotated: np.ndarray
    keys: np.ndarray
    keys_rotated: np.ndarray
    values: np.ndarray
    cos: np.ndarray
    sin: np.ndarray
    scaling: float
    scores: np.ndarray
    weights: np.ndarray
    head_outputs: np.ndarray  # (heads, head_dim): each head's weighted sum of values
    attention_out: np.ndarray  # after the output projection
    after_attention: np.ndarray  # residual + attention
    normed_mlp: np.ndarray
    gate: np.ndarray  # (intermediate,)
    up: np.ndarray
    activated: np.ndarray  # SiLU(gate)
    product: np.ndarray  # SiLU(gate) * up, what the down projection reads
    mlp_out: np.ndarray
    output: np.ndarray  # the block's output at the chosen position

    @property
    def residual(self) -> np.ndarray:
        return self.block_input[self.position]

    def top_neurons(self, k: int = TOP_NEURONS) -> np.ndarray:
        """Indices of the MLP neurons with the largest |SiLU(gate) x up|: the ones firing most here."""
        return np.argsort(-np.abs(self.product), kind="stable")[:k]


@dataclass
class StackTrace:
    """The residual stream through every layer, at every token and at the chosen one (``position``).

    ``residual_norms`` has layers + 1 entries: the embedding, then each block's output.
    ``attention_norms[l]``/``mlp_norms[l]`` are the lengths of what layer l's attention and MLP add.
    ``lens`` is the logit lens at this position: each layer's output through the final norm and LM head.
    ``step_norms[l]`` is layer l's ``block_flow`` lengths at this token (NaN where a step hands on no
    vector per token) and ``head_weights[l]`` (heads, positions) its softmax rows for this token. The
    ``*_by_token`` arrays hold the same lengths for every token, and ``top_keys``/``top_weights`` each
    head's ``TOP_KEYS`` strongest keys for every query token (-1 and 0 past the query's own keys): what
    a page needs to show any layer, head and token without another pass.
    """

    position: int
    residual_norms_by_token: np.ndarray  # (positions, layers + 1)
    attention_norms_by_token: np.ndarray  # (positions, layers)
    mlp_norms_by_token: np.ndarray  # (positions, layers)
    step_norms_by_token: np.ndarray  # (positions, layers, steps of block_flow)
    top_keys: np.ndarray  # (layers, heads, positions, TOP_KEYS) key positions, strongest first
    top_weights: np.ndarray  # (layers, heads, positions, TOP_KEYS)
    head_weights: np.ndarray  # (layers, heads, positions)
    lens_ids: np.ndarray  # (layers, top_k) token ids, most likely first
    lens_probs: np.ndarray  # (layers, top_k)
    lens_entropy_bits: np.ndarray  # (layers,)
    final_logits: np.ndarray  # (vocab,) the model's own next-token logits after this position

    @property
    def residual_norms(self) -> np.ndarray:
        return self.residual_norms_by_token[self.position]

    @property
    def attention_norms(self) -> np.ndarray:
        return self.attention_norms_by_token[self.position]

    @property
    def mlp_norms(self) -> np.ndarray:
        return self.mlp_norms_by_token[self.position]

    @property
    def step_norms(self) -> np.ndarray:
        return self.step_norms_by_token[self.position]

    @property
    def final_id(self) -> int:
        return int(np.argmax(self.final_logits))

    @property
    def settles_at(self) -> int:
        """The first layer from which the lens's top guess stays the final answer to the end."""
        guesses = self.lens_ids[:, 0]
        layer = len(guesses)
        while layer > 0 and guesses[layer - 1] == self.final_id:
            layer -= 1
        return layer


@dataclass
class ForwardTrace:
    """One hooked forward pass: the chosen block opened up, and the whole stack at that token."""

    ids: list[int]
    block: BlockTrace
    stack: StackTrace


def trace_forward(model, ids: Sequence[int], layer: int, position: int, lens_top_k: int = 5) -> ForwardTrace:
    """Run ``model`` once over ``ids`` (no cache) with hooks, keeping ``layer``'s insides at ``position``."""
    from lifecycle.engine.layered import run_through

    return run_through(traced_forward(model, ids, layer, position, lens_top_k))


def traced_forward(model, ids: Sequence[int], layer: int, position: int, lens_top_k: int = 5):
    """``trace_forward`` as a generator that yields between decoder layers (an engine's sliced job)."""
    import torch

    from lifecycle.engine.layered import layered_forward

    ids = [int(i) for i in ids]
    shapes = BlockShapes.of(model.config, len(ids))
    _check(shapes, ids, layer, position)
    inner = model.model
    captured: dict = {"residual": [None] * (shapes.layers + 1), "lengths": [{} for _ in range(shapes.layers + 1)],
                      "steps": [{} for _ in range(shapes.layers)]}
    handles = _hooks(inner, inner.layers[layer], position, captured)
    try:
        logits = yield from layered_forward(model, ids, logits_to_keep=len(ids) - position)
        with torch.inference_mode():
            residual = torch.stack(captured["residual"])
            lens_logits = model.lm_head(inner.norm(residual[1:])).double()
    finally:
        for handle in handles:
            handle.remove()
    block = _block_trace(inner.layers[layer].self_attn, layer, position, shapes, captured)
    lens_probs = torch.softmax(lens_logits, -1)
    top = torch.topk(lens_probs, lens_top_k, dim=-1)
    entropy = -(lens_probs * torch.log2(lens_probs.clamp_min(1e-300))).sum(-1)
    lengths = captured["lengths"]
    stack = StackTrace(
        position=position,
        residual_norms_by_token=torch.stack([lengths[i]["residual"] for i in range(shapes.layers + 1)], 1).numpy(),
        attention_norms_by_token=torch.stack([lengths[i]["attention"] for i in range(shapes.layers)], 1).numpy(),
        mlp_norms_by_token=torch.stack([lengths[i]["mlp"] for i in range(shapes.layers)], 1).numpy(),
        step_norms_by_token=np.stack([
            _step_norms({**steps, "input": lengths[index]["residual"], "attention_out": lengths[index]["attention"],
                         "mlp_out": lengths[index]["mlp"], "output": lengths[index + 1]["residual"]})
            for index, steps in enumerate(captured["steps"])], axis=1),
        top_keys=torch.stack([steps["top_keys"] for steps in captured["steps"]]).numpy(),
        top_weights=torch.stack([steps["top_weights"] for steps in captured["steps"]]).float().numpy(),
        head_weights=torch.stack([steps["weights"] for steps in captured["steps"]]).float().numpy(),
        lens_ids=top.indices.numpy(),
        lens_probs=top.values.numpy(),
        lens_entropy_bits=entropy.numpy(),
        final_logits=logits[0, 0].float().numpy(),
    )
    return ForwardTrace(ids=ids, block=block, stack=stack)


def _check(shapes: BlockShapes, ids: list[int], layer: int, position: int) -> None:
    if not ids:
        raise LifecycleError("the prompt has no tokens", param="ids")
    if min(ids) < 0 or max(ids) >= shapes.vocab:
        raise LifecycleError(f"token ids must be in [0, {shapes.vocab})", param="ids")
    if not 0 <= layer < shapes.layers:
        raise LifecycleError(f"layer must be in [0, {shapes.layers})", param="layer")
    if not 0 <= position < len(ids):
        raise LifecycleError(f"position must be in [0, {len(ids)})", param="position")


def _hooks(inner, block, position: int, captured: dict) -> list:
    """Forward hooks that copy what the trace keeps, and nothing larger."""
    import torch
    import torch.nn.functional as F

    def at(tensor):
        return tensor[0, position].detach().clone()

    def keep(name, full=False):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            captured[name] = tensor[0].detach().clone() if full else at(tensor)

        return hook

    def keep_input(name, full=False):
        def hook(_module, inputs):
            captured[name] = inputs[0][0].detach().clone() if full else at(inputs[0])

        return hook

    def lengths(tensor):  # every token's row length, (positions,); float32 is exact to ~1e-6 here, and 10x faster
        return torch.linalg.vector_norm(tensor[0].detach(), dim=-1, dtype=torch.float32).double()

    def per_layer(kind, slot):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            captured["lengths"][slot][kind] = lengths(tensor)
            if kind == "residual":  # the logit lens reads the stream at the chosen token
                captured["residual"][slot] = at(tensor)

        return hook

    def step(index, name, before=False):  # one layer's row lengths at every token, for its step lengths
        def hook(_module, *args):
            tensor = args[0][0] if before else args[1]
            tensor = tensor[0] if isinstance(tensor, tuple) else tensor
            captured["steps"][index][name] = lengths(tensor)
            if name == "query":  # after RoPE, with the model's own function (a rotation: the same lengths)
                captured["steps"][index]["query_rotated"] = lengths(_rotated(tensor, captured))

        return hook

    def layer_weights(index):
        def hook(_module, _inputs, output):
            weights = output[1][0].detach()  # (heads, queries, keys), zero past each query
            captured["steps"][index]["weights"] = weights[:, position].clone()
            top = torch.topk(weights.float(), min(TOP_KEYS, weights.shape[-1]), dim=-1)
            keys = torch.where(top.indices <= torch.arange(weights.shape[1])[:, None], top.indices, -1)
            pad = TOP_KEYS - keys.shape[-1]
            captured["steps"][index]["top_keys"] = F.pad(keys, (0, pad), value=-1)
            captured["steps"][index]["top_weights"] = F.pad(torch.where(keys >= 0, top.values, 0.0), (0, pad))

        return hook

    def rotary(_module, _inputs, output):
        captured["cos"], captured["sin"] = (t[0].detach().clone() for t in output)

    def attention(_module, _inputs, output):
        captured["weights"] = output[1][0, :, position].detach().clone()

    attn, mlp = block.self_attn, block.mlp
    registered = [
        inner.rotary_emb.register_forward_hook(rotary),
        inner.embed_tokens.register_forward_hook(per_layer("residual", 0)),
        block.register_forward_pre_hook(keep_input("block_input", full=True)),
        block.input_layernorm.register_forward_hook(keep("normed")),
        attn.q_proj.register_forward_hook(keep("query", full=True)),
        attn.k_proj.register_forward_hook(keep("keys", full=True)),
        attn.v_proj.register_forward_hook(keep("values", full=True)),
        attn.register_forward_hook(attention),
        attn.o_proj.register_forward_pre_hook(keep_input("head_outputs")),
        attn.o_proj.register_forward_hook(keep("attention_out")),
        block.post_attention_layernorm.register_forward_pre_hook(keep_input("after_attention")),
        block.post_attention_layernorm.register_forward_hook(keep("normed_mlp")),
        mlp.gate_proj.register_forward_hook(keep("gate")),
        mlp.up_proj.register_forward_hook(keep("up")),
        mlp.act_fn.register_forward_hook(keep("activated")),
        mlp.down_proj.register_forward_pre_hook(keep_input("product")),
        mlp.down_proj.register_forward_hook(keep("mlp_out")),
        block.register_forward_hook(keep("output")),
    ]
    for index, layer in enumerate(inner.layers):
        registered.append(layer.self_attn.register_forward_hook(per_layer("attention", index)))
        registered.append(layer.mlp.register_forward_hook(per_layer("mlp", index)))
        registered.append(layer.register_forward_hook(per_layer("residual", index + 1)))
        registered += [
            layer.input_layernorm.register_forward_hook(step(index, "normed")),
            layer.self_attn.q_proj.register_forward_hook(step(index, "query")),
            layer.self_attn.register_forward_hook(layer_weights(index)),
            layer.self_attn.o_proj.register_forward_pre_hook(step(index, "head_outputs", before=True)),
            layer.post_attention_layernorm.register_forward_pre_hook(step(index, "after_attention", before=True)),
            layer.post_attention_layernorm.register_forward_hook(step(index, "normed_mlp")),
            layer.mlp.gate_proj.register_forward_hook(step(index, "gate")),
            layer.mlp.down_proj.register_forward_pre_hook(step(index, "product", before=True)),
        ]
    return registered


def _rotated(query, captured: dict):
    """``query`` (1, positions, heads x head_dim) through the model's own RoPE, in the same shape."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    cos, sin = captured["cos"], captured["sin"]
    positions, head_dim = cos.shape
    heads = query.shape[-1] // head_dim
    by_head = query[0].detach().view(positions, heads, head_dim).transpose(0, 1)[None]
    rotated, _ = apply_rotary_pos_emb(by_head, by_head, cos[None], sin[None])
    return rotated[0].transpose(0, 1).reshape(1, positions, heads * head_dim)


def _step_norms(lengths: dict) -> np.ndarray:
    """One layer's ``block_flow`` lengths at every token, (positions, steps), from its hooked row lengths
    (NaN where a step hands on no vector per token)."""
    import torch

    nan = torch.full_like(lengths["input"], math.nan)
    return torch.stack([
        lengths["input"], lengths["normed"], lengths["query"], nan, lengths["query_rotated"], nan, nan,
        lengths["head_outputs"], lengths["attention_out"], lengths["after_attention"], lengths["normed_mlp"],
        lengths["gate"], lengths["product"], lengths["mlp_out"], lengths["output"],
    ], 1).numpy()


def _block_trace(attn, layer: int, position: int, shapes: BlockShapes, captured: dict) -> BlockTrace:
    """Reshape the hooked tensors into heads and rebuild the scores with the model's own RoPE."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    def heads(tensor, count):  # (positions, count * head_dim) -> (count, positions, head_dim)
        return tensor.view(tensor.shape[0], count, shapes.head_dim).transpose(0, 1)

    queries, keys = heads(captured["query"], shapes.heads), heads(captured["keys"], shapes.kv_heads)
    cos, sin = captured["cos"], captured["sin"]
    queries_rotated, keys_rotated = apply_rotary_pos_emb(queries[None], keys[None], cos[None], sin[None])
    query_rotated = queries_rotated[0, :, position]
    expanded = keys_rotated[0].repeat_interleave(shapes.group, dim=0)  # each query head's key head
    scores = torch.einsum("hd,hkd->hk", query_rotated, expanded) * attn.scaling
    scores[:, position + 1 :] = -math.inf

    def numpy(tensor):
        return tensor.float().numpy()

    return BlockTrace(
        layer=layer,
        position=position,
        shapes=shapes,
        block_input=numpy(captured["block_input"]),
        normed=numpy(captured["normed"]),
        query=numpy(queries[:, position]),
        query_rotated=numpy(query_rotated),
        keys=numpy(keys),
        keys_rotated=numpy(keys_rotated[0]),
        values=numpy(heads(captured["values"], shapes.kv_heads)),
        cos=numpy(cos),
        sin=numpy(sin),
        scaling=float(attn.scaling),
        scores=numpy(scores),
        weights=numpy(captured["weights"]),
        head_outputs=numpy(captured["head_outputs"].view(shapes.heads, shapes.head_dim)),
        attention_out=numpy(captured["attention_out"]),
        after_attention=numpy(captured["after_attention"]),
        normed_mlp=numpy(captured["normed_mlp"]),
        gate=numpy(captured["gate"]),
        up=numpy(captured["up"]),
        activated=numpy(captured["activated"]),
        product=numpy(captured["product"]),
        mlp_out=numpy(captured["mlp_out"]),
        output=numpy(captured["output"]),
    )


def rope_pair(trace: BlockTrace, head: int, pair: int) -> tuple[np.ndarray, np.ndarray, float]:
    """One query head's dimension pair (i, i + head_dim/2) before and after RoPE, and the angle used.

    This model's RoPE rotates dimension i together with i + head_dim/2 (the "rotate half" layout).
    """
    half = trace.shapes.head_dim // 2
    if not 0 <= pair < half:
        raise LifecycleError(f"pair must be in [0, {half})", param="pair")
    before = trace.query[head, [pair, pair + half]]
    after = trace.query_rotated[head, [pair, pair + half]]
    return before, after, trace.shapes.rope_angle(trace.position, pair)


def lens_guesses(stack: StackTrace, token_text) -> list[tuple[int, list[TokenCandidate], float]]:
    """(layer, candidates, entropy in bits) per layer, with ``token_text(id)`` for the token texts."""
    rows = []
    for layer, (ids, probs) in enumerate(zip(stack.lens_ids, stack.lens_probs)):
        candidates = [
            TokenCandidate(int(i), token_text(int(i)), float(p), math.log(p) if p > 0 else -math.inf, rank)
            for rank, (i, p) in enumerate(zip(ids, probs), start=1)
        ]
        rows.append((layer, candidates, float(stack.lens_entropy_bits[layer])))
    return rows


def open_block(loaded, ids: Sequence[int], layer: int, position: int) -> ForwardTrace:
    """``trace_forward`` on the shared model, as a sliced engine job (no other call sees the hooks;
    decoding streams run between its layers)."""
    from lifecycle.engine import shared_engine

    return shared_engine(loaded).run_sliced(lambda model: traced_forward(model, ids, layer, position))


@dataclass(frozen=True)
class FlowStep:
    """One step of the block: its name, the tensor shape it hands on for the whole prompt, and the length
    of that tensor's row at the chosen token (None where the step's output is not one vector per token)."""

    name: str
    shape: tuple[int, ...]
    norm: float | None


def block_flow(trace: BlockTrace) -> list[FlowStep]:
    """The block as a sequence of steps, shapes from the config, lengths from this run's tensors."""
    s = trace.shapes
    n, d = s.positions, s.hidden

    def length(vector: np.ndarray) -> float:
        return float(np.linalg.norm(vector))

    return [
        FlowStep("Block input x", (n, d), length(trace.residual)),
        FlowStep("RMSNorm", (n, d), length(trace.normed)),
        FlowStep("Q projection (query heads)", (s.heads, n, s.head_dim), length(trace.query)),
        FlowStep("K, V projections (KV heads)", (s.kv_heads, n, s.head_dim), None),
        FlowStep("RoPE turns Q and K", (s.heads, n, s.head_dim), length(trace.query_rotated)),
        FlowStep(f"Scores Q·Kᵀ/√{s.head_dim} + mask", (s.heads, n, n), None),
        FlowStep("Softmax (rows sum to 1)", (s.heads, n, n), None),
        FlowStep("Weighted sum of V", (n, s.heads * s.head_dim), length(trace.head_outputs)),
        FlowStep("Output projection", (n, d), length(trace.attention_out)),
        FlowStep("+ residual (x + attention)", (n, d), length(trace.after_attention)),
        FlowStep("RMSNorm", (n, d), length(trace.normed_mlp)),
        FlowStep("Gate and up projections", (n, s.intermediate), length(trace.gate)),
        FlowStep("SiLU(gate) x up", (n, s.intermediate), length(trace.product)),
        FlowStep("Down projection", (n, d), length(trace.mlp_out)),
        FlowStep("+ residual (block output)", (n, d), length(trace.output)),
    ]
