"""The KV cache: what it holds, what it costs, and the two latencies it explains.

During prefill every layer computes a key and a value vector per key/value head for every prompt
token; the cache keeps them, so each later decode step computes K and V for the one new token only
and attends over the cached ones. Its size is

    layers x kv_heads x head_dim x 2 (K and V) x positions x bytes per number

and grouped-query attention makes it ``query_heads / kv_heads`` times smaller than full multi-head
attention would. ``measure_cache`` sums the real cache tensors of a prefill; ``measure_latency``
times prefill against prompt length and the per-token decode steps that follow it.

The functions that run the model take the Hugging Face model itself (call them through the engine).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.errors import LifecycleError


@dataclass(frozen=True)
class KVCacheShape:
    """The cache's dimensions, from the model's config and the dtype of its weights."""

    layers: int
    kv_heads: int
    query_heads: int
    head_dim: int
    bytes_per_number: int

    @classmethod
    def of(cls, model) -> KVCacheShape:
        config = model.config
        heads = int(config.num_attention_heads)
        return cls(
            layers=int(config.num_hidden_layers),
            kv_heads=int(config.num_key_value_heads),
            query_heads=heads,
            head_dim=int(getattr(config, "head_dim", None) or config.hidden_size // heads),
            bytes_per_number=int(next(model.parameters()).element_size()),
        )

    @property
    def bytes_per_token(self) -> int:
        """What one more position adds: every layer's K and V for every key/value head."""
        return self.layers * self.kv_heads * self.head_dim * 2 * self.bytes_per_number

    @property
    def multi_head_bytes_per_token(self) -> int:
        """The same with one K/V head per query head (full multi-head attention)."""
        return self.layers * self.query_heads * self.head_dim * 2 * self.bytes_per_number

    def bytes_for(self, positions: int) -> int:
        return positions * self.bytes_per_token


@dataclass(frozen=True)
class CacheMeasurement:
    """The real cache after a prefill: total bytes and each layer's key tensor shape."""

    positions: int
    total_bytes: int
    key_shape: tuple[int, ...]
    tensors: int


def measure_cache(model, ids: Sequence[int]) -> CacheMeasurement:
    """Prefill ``ids`` with a fresh cache and sum the sizes of the key and value tensors it holds."""
    import torch

    ids = _checked(model, ids)
    with torch.inference_mode():
        cache = model(torch.tensor([ids]), use_cache=True, logits_to_keep=1).cache
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    return CacheMeasurement(
        positions=int(cache.get_seq_length()),
        total_bytes=sum(t.numel() * t.element_size() for t in tensors),
        key_shape=tuple(cache.layers[0].keys.shape),
        tensors=len(tensors),
    )


@dataclass(frozen=True)
class LatencyPoint:
    """One prompt length: the prefill's wall time and each following decode step's."""

    prompt_tokens: int
    prefill_seconds: float
    decode_seconds: tuple[float, ...]

    @property
    def decode_mean(self) -> float:
        return sum(self.decode_seconds) / len(self.decode_seconds)


def measure_latency(model, ids: Sequence[int], lengths: Sequence[int], decode_steps: int = 4) -> list[LatencyPoint]:
    """For each length n: prefill the first n of ``ids`` (repeated when shorter) with a fresh cache, then
    decode ``decode_steps`` greedy tokens one at a time against that cache. Every call is timed alone."""
    import torch

    ids = _checked(model, ids)
    if decode_steps < 1:
        raise LifecycleError("decode_steps must be >= 1", param="decode_steps")
    points = []
    with torch.inference_mode():
        for length in sorted({int(n) for n in lengths}):
            if not 1 <= length <= int(model.config.max_position_embeddings) - decode_steps:
                raise LifecycleError(f"prompt length {length} does not fit the window", param="lengths")
            prompt = (ids * (length // len(ids) + 1))[:length]
            started = time.perf_counter()
            out = model(torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
            prefill = time.perf_counter() - started
            steps = []
            for _ in range(decode_steps):
                token = out.logits[0, -1].argmax().view(1, 1)
                started = time.perf_counter()
                out = model(token, cache=out.cache, use_cache=True)
                steps.append(time.perf_counter() - started)
            points.append(LatencyPoint(length, prefill, tuple(steps)))
    return points


def _checked(model, ids: Sequence[int]) -> list[int]:
    ids = [int(i) for i in ids]
    vocab = int(model.config.vocab_size)
    if not ids or min(ids) < 0 or max(ids) >= vocab:
        raise LifecycleError(f"ids must be a non-empty list of token ids in [0, {vocab})", param="ids")
    return ids


def cache_report(loaded, ids: Sequence[int]) -> CacheMeasurement:
    """``measure_cache`` on the shared model."""
    return _on_model(loaded, lambda model: measure_cache(model, ids))


def latency_report(loaded, ids: Sequence[int], lengths: Sequence[int], decode_steps: int = 4) -> list[LatencyPoint]:
    """``measure_latency`` on the shared model."""
    return _on_model(loaded, lambda model: measure_latency(model, ids, lengths, decode_steps))


def _on_model(loaded, job):
    with loaded.lock:
        return job(loaded.model)
