"""The Forward pass page's live block: any layer and query head at the chosen token, redrawn in the
browser (ui/live_block.js) from one hooked pass's numbers, sent once.

What is sent does not grow with the prompt beyond ``TOP_KEYS`` keys per head: every layer's step
lengths (the block's 15 steps), what each layer's attention and MLP add, the residual stream's
length, and per layer and head the ``TOP_KEYS`` keys the token attends to most (position, weight).
Labels are plain strings the browser sets as text, never markup.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence

import numpy as np

from charts.forward_pass import shape_text

TOP_KEYS = 8
DIGITS = 5  # weights and lengths rounded to 5 decimals: the page shows at most 1 (lengths) or 3 (shares)


def top_keys(weights: np.ndarray, k: int = TOP_KEYS) -> tuple[np.ndarray, np.ndarray]:
    """(layers, heads, k) key positions with the largest weight first (ties: the earlier key), and their
    weights, from (layers, heads, positions) softmax rows."""
    order = np.argsort(-np.asarray(weights), axis=-1, kind="stable")[..., :k]
    return order, np.take_along_axis(np.asarray(weights), order, axis=-1)


def _rounded(values) -> list:
    return [None if not math.isfinite(v) else round(float(v), DIGITS) for v in np.asarray(values).ravel()]


def live_block_data(
    step_names: Sequence[str],
    step_shapes: Sequence[Sequence[int]],
    step_norms: np.ndarray,
    head_weights: np.ndarray,
    residual_norms: np.ndarray,
    attention_norms: np.ndarray,
    mlp_norms: np.ndarray,
    label: Callable[[int], str],
    position: int,
    kv_group: int,
    start: tuple[int, int],
) -> dict:
    """The component's data for one token: ``step_norms`` (layers, steps), ``head_weights`` (layers, heads,
    positions), the stack's lengths, ``label(position)`` for a token's label, ``start`` the (layer, head)
    shown first."""
    layers, heads, _ = head_weights.shape
    keys, weights = top_keys(head_weights[..., : position + 1])
    shown = sorted({int(k) for k in keys.ravel()} | {position})
    body = {
        "layers": int(layers),
        "heads": int(heads),
        "kv_group": int(kv_group),
        "position": int(position),
        "steps": [{"name": name, "shape": shape_text(shape), "add": name.startswith("+")}
                  for name, shape in zip(step_names, step_shapes)],
        "step_norms": _rounded(step_norms),
        "keys": [int(k) for k in keys.ravel()],
        "weights": _rounded(weights),
        "top": int(keys.shape[-1]),
        "residual": _rounded(residual_norms),
        "attention": _rounded(attention_norms),
        "mlp": _rounded(mlp_norms),
        "labels": {str(p): label(p) for p in shown},
    }
    encoded = json.dumps(body, sort_keys=True)
    return {**body, "fingerprint": hashlib.sha256(encoded.encode()).hexdigest()[:16], "bytes": len(encoded),
            "start": {"layer": int(start[0]), "head": int(start[1])}}


def block_view_sent(values: dict | None, layers: int, heads: int) -> tuple[int, int] | None:
    """The (layer, head) the browser sent, if it is one of this model's (None: nothing valid sent)."""
    if not values:
        return None
    try:
        layer, head = int(values["layer"]), int(values["head"])
    except (KeyError, TypeError, ValueError):
        return None
    return (layer, head) if 0 <= layer < layers and 0 <= head < heads else None
