"""The KV cache: what it holds, what it costs, and the two latencies it explains.

During prefill every layer computes a key and a value vector per key/value head for every prompt
token; the cache keeps them, so each later decode step computes K and V for the one new token only
and attends over the cached ones. Its size is

    layers x kv_heads x head_dim x 2 (K and V) x positions x bytes per number

and grouped-query attention makes it ``query_heads / kv_heads`` times smaller than full multi-head
attention would. ``measure_cache`` sums the real cache tensors of a prefill; ``measure_latency``
times prefill against prompt length and the per-token decode steps that follow it, on the engine's
own forward pass. The ``*_report`` functions run them as engine jobs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.errors import LifecycleError

WARM_TOKENS = 16  # prefilled, then decoded from, untimed, before a latency sweep's first length


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
        cache = cache_filler(model)(torch.tensor([ids]), use_cache=True, logits_to_keep=1).cache
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    return CacheMeasurement(
        positions=int(cache.get_seq_length()),
        total_bytes=sum(t.numel() * t.element_size() for t in tensors),
        key_shape=tuple(cache.layers[0].keys.shape),
        tensors=len(tensors),
    )


def cache_filler(model):
    """``model`` with SDPA attention, on the same weights: a prefill kept only for its cache needs no attention
    weights. The shared model runs eager attention, which the Attention page needs in order to show them; for a
    1,007-token prompt on one thread that prefill took 6.3-6.8 s against SDPA's 4.0 s, with the same cache sizes. A
    copy of the module tree (~40 ms) whose parameters and buffers are the model's own, with a configuration of its
    own, so the shared model's setting is never changed under another reader."""
    import copy
    import itertools

    shared = {id(tensor): tensor for tensor in itertools.chain(model.parameters(), model.buffers())}
    filler = copy.deepcopy(model, shared)
    filler.set_attn_implementation("sdpa")
    return filler


@dataclass(frozen=True)
class LatencyPoint:
    """One prompt length: the prefill's wall time (the fastest of its timed prefills) and every decode step timed
    after them."""

    prompt_tokens: int
    prefill_seconds: float
    decode_seconds: tuple[float, ...]

    @property
    def decode_fastest(self) -> float:
        """The fastest decode step: other work on the machine only ever adds time (under a test suite's load the
        median of four read 20 ms after 16 tokens and 17 ms after 512)."""
        return min(self.decode_seconds)


def point_for(points: Sequence[LatencyPoint], prompt_tokens: int) -> LatencyPoint:
    """The sweep's point at ``prompt_tokens`` (the prompt's own length, always one of the lengths swept)."""
    return next(point for point in points if point.prompt_tokens == prompt_tokens)


def timed_prefill(stack, ids: Sequence[int], chunk: int, room: int = 0):
    """Prefill ``ids`` into a fresh cache the way the engine serves it (``chunk`` tokens per step), timed.

    ``stack`` is the engine's LlamaStack; returns (seconds, the cache, the last position's logits).
    """
    from lifecycle.engine.llama import Segment

    ids = list(ids)
    cache = stack.new_cache(len(ids) + room)
    started = time.perf_counter()
    for start in range(0, len(ids), chunk):
        piece = ids[start:start + chunk]
        logits = stack.forward([Segment(piece, start, cache, start + len(piece) == len(ids))])
    return time.perf_counter() - started, cache, logits[0]


def measure_latency(stack, chunk: int, ids: Sequence[int], lengths: Sequence[int],
                    decode_steps: int = 4) -> list[LatencyPoint]:
    """For each length n: prefill the first n of ``ids`` (repeated when shorter) into an empty cache, then decode
    ``decode_steps`` greedy tokens one at a time against it, each call timed alone. ``stack`` and ``chunk`` are the
    engine's, so these are the times the engine itself takes.

    One untimed short run of both (WARM_TOKENS prefilled, then the decode steps) first warms the caches and both
    code paths, so the first length measured is not charged for it: warmed by a prefill alone, the first length's
    decode steps took 17.6, 13.6, 10.4 and 7.4 ms, against 7.5-7.7 ms warm (7 Dec 2026), and the page read that as
    decoding getting faster with a longer cache."""
    ids = [int(i) for i in ids]
    if decode_steps < 1:
        raise LifecycleError("decode_steps must be >= 1", param="decode_steps")
    _, cache, logits = timed_prefill(stack, ids[:WARM_TOKENS], chunk, decode_steps)
    _decode_times(stack, cache, logits, min(len(ids), WARM_TOKENS), decode_steps)
    sweep = sorted({int(n) for n in lengths})
    for length in sweep:
        if not 1 <= length <= stack.max_positions - decode_steps:
            raise LifecycleError(f"prompt length {length} does not fit the window", param="lengths")
    points = []
    for length in sweep:
        seconds, cache, logits = timed_prefill(stack, (ids * (length // len(ids) + 1))[:length], chunk, decode_steps)
        points.append(LatencyPoint(length, seconds, _decode_times(stack, cache, logits, length, decode_steps)))
    return points


def fastest_of(rounds: Sequence[Sequence[LatencyPoint]]) -> list[LatencyPoint]:
    """Several sweeps of the same lengths as one: each length's fastest prefill and every decode step (other work
    on the machine only ever adds time; under a test suite's load one prefill of 16 tokens took 225 ms and one of
    39 took 81 ms)."""
    return [LatencyPoint(same[0].prompt_tokens, min(p.prefill_seconds for p in same),
                         tuple(step for p in same for step in p.decode_seconds)) for same in zip(*rounds)]


def _decode_times(stack, cache, logits, position: int, steps: int) -> tuple[float, ...]:
    """Decode ``steps`` greedy tokens one at a time from ``position`` on, after ``logits``; each call's seconds."""
    from lifecycle.engine.llama import Segment

    times = []
    for at in range(position, position + steps):
        started = time.perf_counter()
        logits = stack.forward([Segment([int(logits.argmax())], at, cache, True)])[0]
        times.append(time.perf_counter() - started)
    return tuple(times)


def _checked(model, ids: Sequence[int]) -> list[int]:
    ids = [int(i) for i in ids]
    vocab = int(model.config.vocab_size)
    if not ids or min(ids) < 0 or max(ids) >= vocab:
        raise LifecycleError(f"ids must be a non-empty list of token ids in [0, {vocab})", param="ids")
    return ids


def cache_report(loaded, ids: Sequence[int]) -> CacheMeasurement:
    """``measure_cache`` on the shared model, as an engine job."""
    from lifecycle.engine import shared_engine

    return shared_engine(loaded).run(lambda model: measure_cache(model, ids))


def latency_report(loaded, ids: Sequence[int], lengths: Sequence[int], decode_steps: int = 4,
                   rounds: int = 2) -> list[LatencyPoint]:
    """``measure_latency`` with the engine's own stack, one engine job per length: each job has the model to
    itself (so its times are clean), and other requests' steps run between them. ``rounds`` sweeps over every
    length, kept as ``fastest_of`` them: a length's timings are a whole sweep apart, so one burst of other work
    cannot hold up all of them (timed back to back under a test suite's load, 39 tokens' prefill read 171 ms
    against 125 ms for 64, and 16 tokens' fastest of four decode steps 48 ms against 15 ms after 512)."""
    from lifecycle.engine import shared_engine

    if rounds < 1:
        raise LifecycleError("rounds must be >= 1", param="rounds")
    engine = shared_engine(loaded)
    _checked(loaded.model, ids)
    sweep = sorted({int(n) for n in lengths})

    def one(length: int) -> list[LatencyPoint]:
        return engine.run(lambda _m: measure_latency(engine.stack, engine.prefill_chunk, ids, [length], decode_steps))

    return fastest_of([[point for length in sweep for point in one(length)] for _ in range(rounds)])
