"""A lean fp32 Llama forward pass over a flattened batch, built from the loaded model's own weights.

Every token the engine runs in one step (chunks of arriving prompts and one token per decoding
request) goes through the dense matrix products together as a single [T, d] matrix, so the
weights are read once per step however many requests share it. Attention alone is per request
(torch SDPA with grouped-query attention) against that request's own preallocated KV tensor.
Logits are computed only at the positions that need them.

The matrix products go through oneDNN (PyTorch's ``mkldnn`` linear) where this PyTorch build has
it: at one to a few tokens a step (decoding) MKL's sgemm, behind ``F.linear``, reads the weights
at about half the speed on this machine's CPU (measured: the model's products for one token took
39 ms with oneDNN against 60 ms, for two tokens 41 against 116 ms).

For one token a step, each matrix runs the kernel measured fastest for it on this machine when
the stack is built (``kernel_choice.py``): the compiled ``gemv.c`` over the 4-bit or 8-bit codes
the matrix was shipped as (``packing.py``, about a fifth of the fp32 bytes, results equal to its
fp32 product bit for bit), ``gemv.c`` over fp32, or oneDNN. For a few rows a step (two to about
sixteen requests decoding together), a packed matrix runs ``gemv.c``'s few-row product over its codes up
to the most rows at which it was timed faster than oneDNN (one product at a time after the engine's first
work); longer steps (prefill chunks, many requests) read the fp32 weights, where oneDNN's matrix products
are the faster road.

The query/key/value and gate/up projections are fused into one matrix each, and the modules'
parameters are re-pointed to views of those fused matrices, so the weights exist once in memory
and the Hugging Face model (used for the inspection passes) still computes with them. ``model``
is a Hugging Face model or the same tree read without transformers (``checkpoint.py``). Every
fact (sizes, heads, RoPE, norm epsilon, tied head) comes from the loaded model and config.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lifecycle.engine.kernel_choice import (BATCH_ROWS, Candidate, KernelChoice, choose_kernels, describe,
                                            few_rows_timing)
from lifecycle.engine.native import compiled_gemv
from lifecycle.engine.packed_store import packed_matrices
from lifecycle.engine.packing import Packed
from lifecycle.model import cache_root


@dataclass(frozen=True)
class Segment:
    """Tokens of one request in this step: ``ids`` at positions ``start`` .. ``start + len(ids) - 1``,
    with attention against ``cache`` (that request's KV); ``wants_logits`` for its last position."""

    ids: list[int]
    start: int
    cache: KVCache
    wants_logits: bool


class KVCache:
    """One request's keys and values, preallocated: (layers, kv_heads, capacity, head_dim) each.
    A cache in a slot of a ``KVPool`` is a view of the pool (``slot`` says which)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, slot: int | None = None):
        self.keys, self.values, self.slot = keys, values, slot
        self.length = 0  # positions filled

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def load_prefix(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Copy the first ``length`` positions of a cached prefix into this cache."""
        self.keys[:, :, :length] = keys[:, :, :length]
        self.values[:, :, :length] = values[:, :, :length]
        self.length = length


class KVPool:
    """Slots of KV cache side by side, (layers, slots, kv_heads, slot_tokens, head_dim), so the
    decode attention of every request in a slot runs as one batched SDPA call per layer.

    The pool is allocated once (``torch.empty``) and never zeroed as a whole, so its resident size follows what
    is in use, not its capacity. A batched step reads, for each request, the positions between its own length
    and the longest request's (masked, but SDPA still multiplies their weight of 0 by the value there, and
    0 x NaN is NaN): ``make_finite`` zeroes that strip of a slot the first time a step reads it, never whatever
    memory the allocator recycled (later occupants of the slot find finite keys and values there). Zeroing the
    whole pool at allocation (calloc) was measured slower and larger: 30 browser sessions peaked at 2.45 GB
    against 1.80 GB, and the first token of 8 concurrent requests came after 0.34 s against 0.15 s.
    """

    def __init__(self, layers: int, slots: int, kv_heads: int, slot_tokens: int, head_dim: int):
        shape = (layers, slots, kv_heads, slot_tokens, head_dim)
        self.keys = torch.empty(shape)
        self.values = torch.empty(shape)
        self.slot_tokens = slot_tokens
        self._free = list(range(slots - 1, -1, -1))
        self._finite = [0] * slots  # per slot: positions before this hold finite numbers (written or zeroed)

    def acquire(self, capacity: int) -> KVCache | None:
        """A slot's cache for a request needing ``capacity`` positions, or None if none fits."""
        if capacity > self.slot_tokens or not self._free:
            return None
        slot = self._free.pop()
        return KVCache(self.keys[:, slot], self.values[:, slot], slot)

    def make_finite(self, slot: int, written: int, read: int) -> None:
        """Before a step reads positions ``0 .. read - 1`` of ``slot``, whose request has written ``0 ..
        written - 1``: zero the positions between that no one has made finite yet."""
        start = max(written, self._finite[slot])
        if start < read:
            self.keys[:, slot, :, start:read] = 0
            self.values[:, slot, :, start:read] = 0
        self._finite[slot] = max(self._finite[slot], read)

    def release(self, cache: KVCache) -> None:
        if cache.slot is not None and cache.slot not in self._free:
            self._free.append(cache.slot)
            self._free.sort(reverse=True)  # lowest slots first keeps the batched span short


class LlamaStack:
    """The decoder of a Llama-family model as a few fused tensors per layer."""

    def __init__(self, model, packed_store: Path | None = None, weights_sha256: str | None = None):
        """``packed_store`` and ``weights_sha256`` (the fp32 copy's hash) let the packed codes be read
        back from a file rather than found again (``packed_store.py``)."""
        config = model.config
        self.layers = int(config.num_hidden_layers)
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(getattr(config, "num_key_value_heads", None) or self.heads)
        self.hidden = int(config.hidden_size)
        self.head_dim = int(getattr(config, "head_dim", None) or self.hidden // self.heads)
        self.eps = float(config.rms_norm_eps)
        self.max_positions = int(config.max_position_embeddings)
        self.scale = self.head_dim**-0.5
        inner = model.model
        self.embed = inner.embed_tokens.weight
        self.norm = inner.norm.weight
        head = model.lm_head
        self.lm_head = head.weight
        self.lm_bias = head.bias
        self.cos, self.sin = _rope_tables(inner.rotary_emb, self.max_positions)
        self.blocks = [_fuse_block(layer) for layer in inner.layers]
        gemv = compiled_gemv(cache_root() / "kernels")
        self.packed = self._packed(packed_store, weights_sha256) if gemv is not None and gemv.reads_packed else {}
        onednn = _onednn_linear()  # probed once: for batched steps and as a one-token candidate
        self.batched_name, self._batched = (("oneDNN", onednn) if onednn is not None
                                            else ("PyTorch's F.linear", F.linear))
        self.choice: KernelChoice | None = None
        self._few_rows_timing: Generator[None, None, KernelChoice] | None = None  # until every product is timed
        self._measuring = threading.Lock()
        if gemv is not None:
            reader = Candidate("gemv.c packed", gemv, packed=True)
            batched = Candidate(self.batched_name, self._batched)
            candidates = [reader] if self.packed else []
            candidates += [Candidate("gemv.c fp32", gemv, contiguous_only=True), batched]
            self.choice = choose_kernels(self.matrices(), self.packed, candidates)
            if self.packed:
                self._few_rows_timing = few_rows_timing(self.choice, self.matrices(), self.packed, reader, batched)

    @property
    def kernels(self) -> str:
        """Which kernel runs each kind of step's products, with the times measured (the Live calls panel)."""
        if self.choice is None:
            return f"every step's matrix products: {self.batched_name} (no compiled gemv.c here)"
        return describe(self.choice, self.batched_name)

    @property
    def kernels_named(self) -> str:
        """The same without the times."""
        return self.kernels if self.choice is None else describe(self.choice, self.batched_name, measured=False)

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """``x @ weight.T + bias`` for a [T, in] ``x``: for one row the kernel measured fastest for that
        matrix at start (reading its packed codes or its fp32 weights); for a few rows its packed codes where
        they measured faster at that many rows; else the batched kernel."""
        rows = x.shape[0]
        if self.choice is not None and x.is_contiguous():
            if rows == 1:
                chosen = self.choice.by_matrix.get(id(weight))
                if chosen is not None:
                    return chosen[0](x, chosen[1], bias)
            elif rows <= BATCH_ROWS[-1]:
                few = self.choice.few_rows.get(id(weight))  # empty until timed (``few_rows``)
                if few is not None and rows <= few[2]:
                    return few[0](x, few[1], bias)
        return self._batched(x, weight, bias)

    def few_rows_untimed(self) -> bool:
        return self._few_rows_timing is not None

    def time_few_rows_product(self) -> None:
        """Time the next product of ``few_rows_timing`` (one kind of matrix at one number of rows: 0.1-184 ms
        on a 2-core AMD machine, the output head at 16 rows the longest). The engine calls it after its first
        work, while idle or between two steps: not at start (there the whole timing took 0.4-0.9 s on one thread, which
        would delay every start or first request), nor in a step of a few rows (beside a batch's other work a
        call took up to 20x its quiet time), nor all at once (a request arriving meanwhile would wait for all of
        it). Until the last product is timed, steps of a few rows read the fp32 weights."""
        with self._measuring:
            if self._few_rows_timing is None:
                return
            try:
                next(self._few_rows_timing)
            except StopIteration as done:
                self.choice, self._few_rows_timing = done.value, None

    def few_rows(self) -> dict[int, tuple]:
        """The packed kernel's row limit per matrix, every remaining product timed now if need be."""
        while self.few_rows_untimed():
            self.time_few_rows_product()
        return self.choice.few_rows

    def products_of(self, rows: int) -> str:
        """What computes a step's matrix products at ``rows`` rows (more than one), e.g. "oneDNN" or "packed
        codes for 121 of 121 matrices"."""
        packed = self.choice.packed_matrices(rows) if self.choice is not None else 0
        total = len(self.matrices())
        if packed == 0:
            return self.batched_name
        rest = f", {self.batched_name} for {total - packed}" if packed < total else ""
        return f"packed codes for {packed} of {total} matrices{rest}"

    def matrices(self) -> list[torch.Tensor]:
        """Every weight matrix a decode step reads, the output head last."""
        inner = [m for b in self.blocks for m in (b.qkv, b.o, b.gate_up, b.down)]
        return [*inner, self.lm_head]

    def _packed(self, store: Path | None, weights_sha256: str | None) -> dict[int, Packed]:
        """The matrices that pack exactly, by ``id`` (the engine's fused tensors live as long as it does)."""
        matrices = self.matrices()
        found = packed_matrices(matrices, store, weights_sha256)
        return {id(m): p for m, p in zip(matrices, found) if p is not None}

    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads: every matrix once, as the codes or the fp32
        weights its one-token kernel reads."""
        chosen = self.choice.by_matrix if self.choice is not None else {}
        return sum(_nbytes(chosen[id(m)][1]) if id(m) in chosen else _nbytes(m) for m in self.matrices())

    def cache_bytes(self, capacity: int) -> int:
        """Bytes of the keys and values of ``capacity`` positions (fp32)."""
        return 2 * self.layers * self.kv_heads * capacity * self.head_dim * self.embed.element_size()

    def new_cache(self, capacity: int) -> KVCache:
        """A cache of its own (outside any pool) for ``capacity`` positions."""
        shape = (self.layers, self.kv_heads, capacity, self.head_dim)
        return KVCache(torch.empty(shape), torch.empty(shape))

    def new_pool(self, slots: int, slot_tokens: int) -> KVPool:
        return KVPool(self.layers, slots, self.kv_heads, min(slot_tokens, self.max_positions), self.head_dim)

    @torch.inference_mode()
    def forward(self, segments: list[Segment], pool: KVPool | None = None) -> torch.Tensor:
        """Run one step; return logits (one row per segment that wants them, in order).

        The leading one-token segments whose caches are slots of ``pool`` (decoding requests) share
        one attention call per layer; every other segment attends on its own."""
        ids, positions, bounds = [], [], []
        for seg in segments:
            n = len(seg.ids)
            bounds.append((len(ids), len(ids) + n))
            ids.extend(seg.ids)
            positions.extend(range(seg.start, seg.start + n))
        pooled = _pooled_decode(segments, pool)
        rest = list(zip(segments, bounds))[len(pooled.slots) if pooled else 0:]
        pos = torch.tensor(positions)
        x = self.embed[torch.tensor(ids)]
        cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        masks = [_prefix_causal_mask(seg.start, len(seg.ids)) for seg, _ in rest]
        h, kv, hd = self.heads, self.kv_heads, self.head_dim
        half, qk_width, total = hd // 2, (h + kv) * hd, len(ids)
        attn = torch.empty(total, h * hd)
        for index, block in enumerate(self.blocks):
            y = F.rms_norm(x, (self.hidden,), block.attn_norm, self.eps)
            qkv = self.linear(y, block.qkv, block.qkv_bias)
            qk = qkv[:, :qk_width].view(total, h + kv, hd)
            rotated = torch.cat((-qk[..., half:], qk[..., :half]), dim=-1)
            qk = qk * cos + rotated * sin
            q, k = qk[:, :h], qk[:, h:]
            v = qkv[:, qk_width:].view(total, kv, hd)
            if pooled:
                pooled.attend(pool, index, q, k, v, attn, self.scale)
            for (seg, (a, b)), mask in zip(rest, masks):
                end = seg.start + b - a
                keys, values = seg.cache.keys[index], seg.cache.values[index]
                keys[:, seg.start:end] = k[a:b].transpose(0, 1)
                values[:, seg.start:end] = v[a:b].transpose(0, 1)
                out = F.scaled_dot_product_attention(
                    q[a:b].transpose(0, 1).unsqueeze(0),
                    keys[:, :end].unsqueeze(0),
                    values[:, :end].unsqueeze(0),
                    attn_mask=mask,
                    is_causal=mask is None and b - a > 1,
                    scale=self.scale,
                    enable_gqa=True,
                )
                attn[a:b] = out[0].transpose(0, 1).reshape(b - a, h * hd)
            x = x + self.linear(attn, block.o, block.o_bias)
            y = F.rms_norm(x, (self.hidden,), block.mlp_norm, self.eps)
            gate_up = self.linear(y, block.gate_up, block.gate_up_bias)
            gate, up = gate_up.chunk(2, dim=-1)
            x = x + self.linear(F.silu(gate) * up, block.down, block.down_bias)
        for seg in segments:
            seg.cache.length = seg.start + len(seg.ids)
        last = [b - 1 for seg, (_, b) in zip(segments, bounds) if seg.wants_logits]
        if not last:
            return torch.empty(0, self.lm_head.shape[0])
        y = F.rms_norm(x[last], (self.hidden,), self.norm, self.eps)
        return self.linear(y, self.lm_head, self.lm_bias)


@dataclass(frozen=True)
class _PooledDecode:
    """The first ``len(slots)`` rows of the step: one new token each, in pool slots ``slots``."""

    slots: torch.Tensor  # (B,) slot of each row
    rows: torch.Tensor  # (B,) slot - low, the row of each request inside the span
    positions: torch.Tensor  # (B,) position of each new token
    low: int
    high: int
    length: int  # keys attended: the longest request's length after this token
    mask: torch.Tensor  # (high - low, 1, 1, length): key j visible to the slot's query

    def attend(self, pool: KVPool, layer: int, q, k, v, attn, scale: float) -> None:
        batch = len(self.slots)
        keys, values = pool.keys[layer], pool.values[layer]
        keys[self.slots, :, self.positions] = k[:batch]
        values[self.slots, :, self.positions] = v[:batch]
        query = q.new_zeros(self.high - self.low, q.shape[1], 1, q.shape[2])
        query[self.rows, :, 0] = q[:batch]
        out = F.scaled_dot_product_attention(
            query,
            keys[self.low:self.high, :, :self.length],
            values[self.low:self.high, :, :self.length],
            attn_mask=self.mask,
            scale=scale,
            enable_gqa=True,
        )
        attn[:batch] = out[self.rows, :, 0].reshape(batch, -1)


def _pooled_decode(segments: list[Segment], pool: KVPool | None) -> _PooledDecode | None:
    lead = []
    for seg in segments:
        if pool is None or len(seg.ids) != 1 or seg.cache.slot is None:
            break
        lead.append(seg)
    if len(lead) < 2:  # one request alone attends faster without the batched bookkeeping
        return None
    slots = [seg.cache.slot for seg in lead]
    low, high = min(slots), max(slots) + 1
    lengths = torch.zeros(high - low, dtype=torch.long)
    for seg in lead:
        lengths[seg.cache.slot - low] = seg.start + 1
    length = int(lengths.max())
    for seg in lead:
        pool.make_finite(seg.cache.slot, seg.start + 1, length)
    # Slots in the span that are not in this step see one key, so their (ignored) rows stay finite.
    visible = torch.arange(length) < lengths.clamp(min=1).unsqueeze(1)
    slot_ids = torch.tensor(slots)
    return _PooledDecode(slot_ids, slot_ids - low, torch.tensor([seg.start for seg in lead]), low, high, length,
                         visible[:, None, None, :])


@dataclass(frozen=True)
class _Block:
    attn_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    mlp_norm: torch.Tensor
    gate_up: torch.Tensor
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


def _fuse(modules) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Concatenate the linear layers' weights (and biases) and re-point each module at its view.

    Built outside inference mode even when the engine starts inside it: the Hugging Face model
    keeps using these as ordinary parameters, also where autograd is on."""
    with torch.inference_mode(False), torch.no_grad():
        weight = torch.cat([m.weight.detach() for m in modules])
        biases = [m.bias for m in modules]
        bias = torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None
        row = 0
        for m in modules:
            rows = m.weight.shape[0]
            m.weight = torch.nn.Parameter(weight[row:row + rows], requires_grad=False)
            if bias is not None:
                m.bias = torch.nn.Parameter(bias[row:row + rows], requires_grad=False)
            row += rows
    return weight, bias


def _fuse_block(layer) -> _Block:
    attn, mlp = layer.self_attn, layer.mlp
    qkv, qkv_bias = _fuse([attn.q_proj, attn.k_proj, attn.v_proj])
    gate_up, gate_up_bias = _fuse([mlp.gate_proj, mlp.up_proj])
    return _Block(
        attn_norm=layer.input_layernorm.weight.detach(),
        qkv=qkv,
        qkv_bias=qkv_bias,
        o=attn.o_proj.weight.detach(),
        o_bias=None if attn.o_proj.bias is None else attn.o_proj.bias.detach(),
        mlp_norm=layer.post_attention_layernorm.weight.detach(),
        gate_up=gate_up,
        gate_up_bias=gate_up_bias,
        down=mlp.down_proj.weight.detach(),
        down_bias=None if mlp.down_proj.bias is None else mlp.down_proj.bias.detach(),
    )


Linear = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


def _nbytes(weight: torch.Tensor | Packed) -> int:
    return weight.nbytes if isinstance(weight, Packed) else weight.numel() * weight.element_size()


def _onednn_linear() -> Linear | None:
    try:
        onednn = torch.ops.mkldnn._linear_pointwise
        with torch.inference_mode():
            x, weight, bias = torch.randn(3, 8), torch.randn(5, 8), torch.randn(5)
            if not torch.allclose(onednn(x, weight, bias, "none", [], ""), F.linear(x, weight, bias), atol=1e-5):
                return None
    except (AttributeError, RuntimeError):
        return None

    def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return onednn(x, weight, bias, "none", [], "")

    return linear


def _rope_tables(rotary, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for every position, (positions, head_dim), from the model's own rotary module."""
    with torch.inference_mode():
        ids = torch.arange(positions).unsqueeze(0)
        cos, sin = rotary(torch.empty(1, dtype=torch.float32), ids)
    return cos[0].float().clone(), sin[0].float().clone()


def _prefix_causal_mask(start: int, n: int) -> torch.Tensor | None:
    """Causal mask for ``n`` new queries after ``start`` cached keys (None: SDPA needs none or is_causal)."""
    if n == 1 or start == 0:
        return None
    keys = torch.arange(start + n)
    queries = torch.arange(start, start + n).unsqueeze(1)
    return keys <= queries
