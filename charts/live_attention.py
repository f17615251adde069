"""The Attention page's live maps: every layer's and head's weights for the prompt, sent once, so the
browser (ui/live_attention.js) redraws any layer, head or query token without a round trip.

Weights are encoded as 16-bit codes, round(w x 65535) (so each shown weight is within 0.0008
percentage points of the model's), only the causal lower triangle (row q holds keys 0..q), layer by
layer and head by head, as base64 of little-endian uint16. A prompt whose maps would exceed
``LIVE_BUDGET_BYTES`` ships the last ``shipped`` tokens only; the page says so. Labels are plain
strings the browser sets as text, never markup.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from lifecycle.lessons.attention import AttentionFocus

LIVE_BUDGET_BYTES = 2 * 1024 * 1024  # the encoded weights before base64 (base64 adds a third)
CODE_MAX = 65535


def triangle_cells(tokens: int) -> int:
    """Cells of one causal map of ``tokens`` tokens: row q holds q + 1 keys."""
    return tokens * (tokens + 1) // 2


def shipped_tokens(tokens: int, maps: int, budget_bytes: int = LIVE_BUDGET_BYTES) -> int:
    """The most tokens (at most ``tokens``) whose ``maps`` causal maps of 2-byte codes fit ``budget_bytes``."""
    shipped = tokens
    while shipped > 1 and maps * triangle_cells(shipped) * 2 > budget_bytes:
        shipped -= 1
    return shipped


def encoded_triangles(stacked: np.ndarray) -> bytes:
    """(layers, heads, n, n) weights as uint16 codes of each map's lower triangle, row by row."""
    n = stacked.shape[-1]
    rows, cols = np.tril_indices(n)
    codes = np.rint(np.clip(stacked[..., rows, cols], 0.0, 1.0) * CODE_MAX).astype("<u2")
    return codes.tobytes()


def decoded_triangles(payload: str, layers: int, heads: int, n: int) -> np.ndarray:
    """The inverse of ``encoded_triangles`` after base64 (what the browser does): (layers, heads, n, n)."""
    codes = np.frombuffer(base64.b64decode(payload), dtype="<u2").reshape(layers, heads, -1)
    full = np.zeros((layers, heads, n, n))
    rows, cols = np.tril_indices(n)
    full[..., rows, cols] = codes / CODE_MAX
    return full


def attention_focus(stacked: np.ndarray) -> AttentionFocus:
    """The strongest (layer, head, key) of the last query row of (layers, heads, n, n) maps; with two
    tokens or fewer nothing is left out."""
    n = stacked.shape[-1]
    skip = 1 if n > 2 else 0
    last = stacked[:, :, -1, skip:n - 1] if n > 2 else stacked[:, :, -1, :]
    layer, head, key = np.unravel_index(int(last.argmax()), last.shape)
    return AttentionFocus(int(layer), int(head), int(key) + skip, float(last[layer, head, key]),
                          float(stacked[..., 0].mean()))


def live_attention_data(
    attentions: Mapping[int, np.ndarray],
    labels: Sequence[str],
    total_tokens: int,
    kv_group: int,
    start: tuple[int, int],
    budget_bytes: int = LIVE_BUDGET_BYTES,
) -> dict:
    """The component's data. ``attentions[layer]`` is (heads, n, n) for the last n of ``total_tokens``
    tokens, ``labels`` their n labels; ``start`` the (layer, head) shown first, at the last query."""
    stacked = np.stack([np.asarray(attentions[layer], dtype=np.float64) for layer in sorted(attentions)])
    layers, heads, n = stacked.shape[0], stacked.shape[1], stacked.shape[-1]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} labels for maps of {n} tokens")
    shipped = shipped_tokens(n, layers * heads, budget_bytes)
    window = stacked[..., n - shipped:, n - shipped:]
    payload = base64.b64encode(encoded_triangles(window)).decode("ascii")
    return {
        "layers": layers,
        "heads": heads,
        "kv_group": kv_group,
        "tokens": shipped,
        "first_position": total_tokens - shipped,
        "total_tokens": total_tokens,
        "labels": [str(label) for label in labels[n - shipped:]],
        "weights": payload,
        "bytes": len(payload),
        "fingerprint": hashlib.sha256(payload.encode("ascii")).hexdigest()[:16],
        "start": {"layer": int(start[0]), "head": int(start[1]), "query": shipped - 1},
    }


def picture_only(data: dict) -> dict:
    """``data`` with the weights of its start layer alone (every head of it, ``only_layer`` naming it): a new
    tab's first run sends this, 1/layers of the maps, and the browser draws its first picture from it; the whole
    maps follow in the run after (the same ``fingerprint``), before another layer can be drawn."""
    layer, cells = data["start"]["layer"], triangle_cells(data["tokens"])
    size = data["heads"] * cells * 2
    codes = base64.b64decode(data["weights"])[layer * size:(layer + 1) * size]
    return {**data, "weights": base64.b64encode(codes).decode("ascii"), "only_layer": layer}


def live_limit_note(data: dict, budget_bytes: int = LIVE_BUDGET_BYTES) -> str:
    """What the live maps leave out of a long prompt, in one sentence ('' when they hold every token)."""
    if data["tokens"] == data["total_tokens"]:
        return ""
    return (
        f"The live maps hold the last {data['tokens']} of {data['total_tokens']:,} tokens: "
        f"{data['layers']} layers x {data['heads']} heads of weights are sent to the browser once, within "
        f"{budget_bytes // 2**20} MiB, so rows leave out attention to earlier tokens and sum to less than 1."
    )
