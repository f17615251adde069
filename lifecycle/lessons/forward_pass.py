"""The Forward pass page's lesson: the residual stream's length through the blocks, and its largest addition."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def block_lesson(tokens: int, layers: int, token: str, position: int, residual_norms: Sequence[float],
                 attention_norms: Sequence[float], mlp_norms: Sequence[float]) -> str:
    """The page's two sentences with this run's numbers (the same whatever layer is drawn); ``token`` is
    already quoted for Markdown. ``residual_norms`` has layers + 1 entries, the embedding first."""
    attention, mlp = np.asarray(attention_norms, dtype=float), np.asarray(mlp_norms, dtype=float)
    biggest = int(np.argmax(np.maximum(attention, mlp)))
    part, size = ("MLP", mlp[biggest]) if mlp[biggest] >= attention[biggest] else ("attention", attention[biggest])
    return (
        f"The prompt's **{tokens:,} tokens** pass through **{layers} blocks**; each reads the *residual stream*, "
        f"computes something and adds it back. At token {token} (position {position}) the stream's length goes "
        f"from {residual_norms[0]:,.1f} (the embedding) to {residual_norms[-1]:,.1f} after the last block; the "
        f"largest single addition is layer {biggest}'s {part} (length {size:,.1f})."
    )
