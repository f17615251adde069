"""The browser-drawn replays' data: the Generation page's steps, the KV cache's growth and the recorded stream.

Each function turns a finished run into compact JSON arrays that ui/live_replay.js draws and
replays in the browser (a step slider, buttons, a play button) without a script run. Token labels
are plain strings (lifecycle.stages.vocabulary.show_token) the browser sets as text, never markup.
Numbers are rounded to what the page prints, so a long answer stays a small payload.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from lifecycle.stages.generation import GenerationStep
from lifecycle.stages.streaming import StreamEvent, delta_content, frame_kind
from lifecycle.stages.vocabulary import show_token

HOW_CHOSEN = ("greedy (top token)", "sampled", "replayed", "you picked")
DIGITS = 5  # probabilities: 0.001% is the finest the page shows
SSE_CHARS = 240  # a frame's wire text kept for the replay's "last frame" line


def _p(value: float) -> float:
    return round(float(value), DIGITS)


def how_chosen(step: GenerationStep, picked: Collection[int], greedy: bool) -> int:
    """Index into HOW_CHOSEN: the reader's pick, a replayed (forced) step, or the sampler's choice."""
    if step.index in picked:
        return 3
    if step.forced:
        return 2
    return 0 if greedy else 1


def _base_of(step: GenerationStep) -> dict[int, float]:
    """The model's own probability (T = 1) of the tokens this step kept, by id."""
    known = {entry.token_id: math.exp(entry.logprob) for entry in step.top_logprobs}
    known[step.token_id] = step.base_probability
    return known


def generation_replay_data(steps: Sequence[GenerationStep], picked: Collection[int], greedy: bool,
                           prefill_seconds: float, prompt_tokens: int, finish_reason: str) -> dict:
    """Every step of one generation as parallel arrays: token label, probability after sampling and in
    the model's own distribution, the step's time (ms), how it was chosen, and its top alternatives as
    [label, probability after sampling, model's probability or None when not among its top 20]."""
    alternatives = []
    for step in steps:
        base = _base_of(step)
        alternatives.append([[show_token(c.text), _p(c.probability),
                              None if c.id not in base else _p(base[c.id]), int(c.id == step.token_id)]
                             for c in step.alternatives])
    return {
        "kind": "generation",
        "tokens": [show_token(s.text) for s in steps],
        "deltas": [s.delta for s in steps],
        "p": [_p(s.probability) for s in steps],
        "base": [_p(s.base_probability) for s in steps],
        "ms": [round(s.seconds * 1000, 1) for s in steps],
        "how": [how_chosen(s, picked, greedy) for s in steps],
        "how_labels": list(HOW_CHOSEN),
        "alternatives": alternatives,
        "prefill_ms": round(prefill_seconds * 1000, 1),
        "prompt_tokens": prompt_tokens,
        "finish_reason": finish_reason,
        "end_of_sequence": [int(s.end_of_sequence) for s in steps],
    }


def growth_positions(window: int, marks: Sequence[int], count: int = 48) -> list[int]:
    """The positions the growth slider stops at: 1, about ``count`` steps spread evenly on a log scale
    up to the window, and this run's own ``marks``, sorted and without repeats."""
    spread = {round(window ** (i / (count - 1))) for i in range(count)}
    return sorted({1, window, *spread, *(m for m in marks if 1 <= m <= window)})


def kv_growth_data(layers: int, kv_heads: int, query_heads: int, head_dim: int, bytes_per_number: int,
                   window: int, weight_bytes: int, marks: Sequence[tuple[str, int]]) -> dict:
    """The growth slider's data: the cache's shape (the browser multiplies it out per position), the
    weights a decode step reads beside it, the slider's stops and this run's marks (label, positions)."""
    return {
        "kind": "kv",
        "layers": layers, "kv_heads": kv_heads, "query_heads": query_heads, "head_dim": head_dim,
        "bytes_per_number": bytes_per_number, "window": window, "weight_bytes": weight_bytes,
        "positions": growth_positions(window, [count for _, count in marks]),
        "marks": [[label, count] for label, count in marks],
        "start": marks[0][1] if marks else 1,
    }


def cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_number: int, positions: int) -> int:
    """Keys and values of every layer and KV head at ``positions``: what the browser computes per stop."""
    return layers * kv_heads * head_dim * 2 * bytes_per_number * positions


def stream_replay_data(events: Sequence[StreamEvent]) -> dict:
    """Every SSE event: when it was produced (ms), its kind, the text it added and its wire form (cut)."""
    return {
        "kind": "stream",
        "at": [round(e.at * 1000, 1) for e in events],
        "kinds": [frame_kind(e.sse) for e in events],
        "text": [delta_content(e.data) or "" for e in events],
        "sse": [e.sse.strip()[:SSE_CHARS] for e in events],
    }
