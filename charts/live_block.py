"""The Forward pass page's live block: any layer, query head and token, redrawn in the browser
(ui/live_block.js) from one hooked pass's numbers, sent once.

What is sent grows with the prompt only up to ``LIVE_TOKENS`` tokens (a window around the chosen one
beyond that): for each token, every layer's step lengths (the block's 15 steps), what each layer's
attention and MLP add, the residual stream's length, and per layer and head the ``TOP_KEYS`` keys the
token attends to most (position, weight in 1/1,000). Labels are plain strings the browser sets as
text, never markup.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence

import numpy as np

from charts.forward_pass import shape_text

LIVE_TOKENS = 48  # tokens the block can move through in the browser (~9 KB each as JSON for the default model)
TOP_KEYS = 5  # of the stage's strongest keys per head and token, the ones sent
WEIGHT_UNIT = 1e-3  # weights travel as whole numbers of this unit (the page shows 0.1%): 3 digits, not 0.xxxx
DIGITS = 1  # lengths rounded as the page shows them


def token_window(position: int, positions: int, size: int = LIVE_TOKENS) -> range:
    """The tokens sent: all of a prompt up to ``size``, else ``size`` of them around ``position``."""
    first = max(0, min(position - size // 2, positions - size))
    return range(first, min(positions, first + size))


def _rounded(values) -> list:
    # tolist() first: Python floats round ~10x faster than NumPy scalars, to the same values.
    return [round(v, DIGITS) if math.isfinite(v) else None for v in np.asarray(values, dtype=np.float64).ravel().tolist()]


def live_block_data(
    step_names: Sequence[str],
    step_shapes: Sequence[Sequence[int]],
    step_norms: np.ndarray,
    top_keys: np.ndarray,
    top_weights: np.ndarray,
    residual_norms: np.ndarray,
    attention_norms: np.ndarray,
    mlp_norms: np.ndarray,
    labels: Sequence[str],
    kv_group: int,
    start: tuple[int, int, int],
) -> dict:
    """The component's data from ``step_norms`` (positions, layers, steps), ``top_keys``/``top_weights`` (layers,
    heads, positions, k; key -1 for none), the stack's lengths (positions, layers [+ 1]), every token's
    label, and ``start`` the (layer, head, token) shown first: the numbers in ``body`` (a JSON string, see
    ``unpacked``), its ``fingerprint`` and size, and ``start``."""
    layers, heads, positions, _ = top_keys.shape
    tokens = token_window(start[2], positions)
    chosen = slice(tokens.start, tokens.stop)
    keys = np.moveaxis(top_keys[..., chosen, :TOP_KEYS], 2, 0)  # (tokens, layers, heads, k)
    weights = np.moveaxis(top_weights[..., chosen, :TOP_KEYS], 2, 0)
    shown = sorted(set(np.unique(keys[keys >= 0]).tolist()) | set(tokens))
    body = {
        "layers": int(layers),
        "heads": int(heads),
        "kv_group": int(kv_group),
        "tokens": [tokens.start, tokens.stop],
        "steps": [{"name": name, "shape": shape_text(shape), "add": name.startswith("+")}
                  for name, shape in zip(step_names, step_shapes)],
        "step_norms": _rounded(step_norms[chosen]),
        "keys": keys.ravel().astype(np.int64).tolist(),
        "weights": np.rint(weights.ravel() / WEIGHT_UNIT).astype(np.int64).tolist(),
        "weight_unit": WEIGHT_UNIT,
        "top": int(keys.shape[-1]),
        "residual": _rounded(residual_norms[chosen]),
        "attention": _rounded(attention_norms[chosen]),
        "mlp": _rounded(mlp_norms[chosen]),
        "labels": {str(p): labels[p] for p in shown},
    }
    # The body travels as one JSON string: Streamlit serialises a component's data twice in every run, and half a
    # megabyte of numbers as lists cost ~50 ms of each; a string costs ~2 ms.
    encoded = json.dumps(body, sort_keys=True)
    return {"body": encoded, "fingerprint": hashlib.sha256(encoded.encode()).hexdigest()[:16], "bytes": len(encoded),
            "start": {"layer": int(start[0]), "head": int(start[1]), "position": int(start[2])}}


def unpacked(data: dict) -> dict:
    """The data as the browser reads it: the body's fields beside the fingerprint, size and start."""
    return {**json.loads(data["body"]), **{k: v for k, v in data.items() if k != "body"}}


def block_view_sent(values: dict | None, layers: int, heads: int, positions: int) -> tuple[int, int, int] | None:
    """The (layer, head, token) the browser sent, if it is one of this model's and prompt's (None: nothing
    valid sent)."""
    if not values:
        return None
    try:
        layer, head, position = int(values["layer"]), int(values["head"]), int(values["position"])
    except (KeyError, TypeError, ValueError):
        return None
    valid = 0 <= layer < layers and 0 <= head < heads and 0 <= position < positions
    return (layer, head, position) if valid else None
