"""The forward pass: prompt token ids through embeddings, the model's transformer layers and the LM head.

One real forward pass of the loaded model returns what the pages draw: the input token vectors
(the embedding lookup), each requested layer's attention weights per head, the residual stream
at the last position after every layer, a logit lens (each layer's hidden state pushed through
the final norm and the LM head: what the model "would say" if it stopped there) and the logits
for the next token. The Embeddings page also compares words through their input vectors.

Memory stays bounded: attention weights are captured by hooks one layer at a time, only for
the requested layers, and cut to the last ``max_attention_tokens`` positions before the next
layer runs, so the layers x heads x L x L tensor of ``output_attentions=True`` is never built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lifecycle.engine import shared_engine
from lifecycle.engine.layered import layered_forward, timed
from lifecycle.errors import LifecycleError
from lifecycle.model import LoadedModel
from lifecycle.stages.sampling import TokenCandidate, entropy_bits, top_candidates
from lifecycle.stages.vocabulary import token_bytes, token_display

# All requested attention matrices together may use at most this much (float32).
ATTENTION_BUDGET_BYTES = 256 * 1024 * 1024


@dataclass
class LayerGuess:
    """The logit lens at one layer: the next-token guesses its hidden state already encodes."""

    layer: int
    candidates: list[TokenCandidate]
    entropy_bits: float


@dataclass
class ForwardPass:
    """Everything one forward pass computed for a prompt.

    ``attentions[layer]`` is (heads, L', L') with query rows and key columns for the last L'
    tokens of the prompt; ``hidden_last`` is (layers, d), the residual stream at the last
    position after each layer. ``seconds`` is the model's own time (its slices, without the engine
    steps run between them).
    """

    ids: list[int]
    last_logits: np.ndarray
    embeddings: np.ndarray
    attentions: dict[int, np.ndarray]
    attention_note: str
    logit_lens: list[LayerGuess]
    hidden_last: np.ndarray
    seconds: float

    @property
    def attention_offset(self) -> int:
        """Position in ``ids`` of the first token shown in the attention matrices."""
        return len(self.ids) - next(iter(self.attentions.values())).shape[-1] if self.attentions else 0


def run_forward(
    loaded: LoadedModel,
    ids: Sequence[int],
    layers: Sequence[int] | None = None,
    max_attention_tokens: int = 256,
    lens_top_k: int = 5,
) -> ForwardPass:
    """Run the model once over ``ids`` (no KV cache) and collect what each stage page shows.

    ``layers=None`` means every layer; with the default cap of 256 tokens that is at most layers x heads
    x 256 x 256 floats (71 MiB for SmolLM2-135M's 30 x 9). Pass ``layers=[]`` to skip attention entirely.
    """
    ids = _checked_ids(loaded, ids)
    chosen = _checked_layers(loaded, layers)
    if not isinstance(max_attention_tokens, int) or max_attention_tokens < 1:
        raise LifecycleError("max_attention_tokens must be an integer >= 1", param="max_attention_tokens")
    shown = min(len(ids), max_attention_tokens)
    needed = len(chosen) * loaded.num_heads * shown * shown * 4
    if needed > ATTENTION_BUDGET_BYTES:
        raise LifecycleError(
            f"{len(chosen)} layers of {shown}x{shown} attention need {needed / 2**20:.0f} MiB "
            f"(limit {ATTENTION_BUDGET_BYTES // 2**20} MiB): request fewer layers or tokens",
            param="max_attention_tokens",
        )

    captured: dict[str, object] = {"attentions": {}, "hidden": [None] * loaded.num_layers, "dropped_mass": []}

    def inspect(model):
        # A sliced engine job (one decoder layer per slice): no other work sees the hooks while they
        # are on the shared model, and decoding streams run between the layers.
        handles = _install_hooks(model, chosen, shown, captured)
        try:
            logits, seconds = yield from timed(layered_forward(model, ids))
        finally:
            for handle in handles:
                handle.remove()
        with torch.inference_mode():
            hidden_last = torch.stack(captured["hidden"])
            return logits, seconds, hidden_last, model.lm_head(model.model.norm(hidden_last))

    logits, seconds, hidden_last, lens_logits = shared_engine(loaded).run_sliced(inspect)
    last_logits = logits[0, -1].float().numpy()
    return ForwardPass(
        ids=ids,
        last_logits=last_logits,
        embeddings=captured["embeddings"],
        attentions=captured["attentions"],
        attention_note=_attention_note(len(ids), shown, captured["dropped_mass"]),
        logit_lens=_logit_lens(loaded, lens_logits.float().numpy(), lens_top_k),
        hidden_last=hidden_last.float().numpy(),
        seconds=seconds,
    )


def _checked_ids(loaded: LoadedModel, ids: Sequence[int]) -> list[int]:
    ids = [int(i) for i in ids]
    if not ids:
        raise LifecycleError("the prompt has no tokens", param="ids")
    if len(ids) > loaded.context_window:
        raise LifecycleError(
            f"{len(ids)} tokens exceed the model's context window of {loaded.context_window}", param="ids"
        )
    if min(ids) < 0 or max(ids) >= loaded.vocab_size:
        raise LifecycleError(f"token ids must be in [0, {loaded.vocab_size})", param="ids")
    return ids


def _checked_layers(loaded: LoadedModel, layers: Sequence[int] | None) -> list[int]:
    if layers is None:
        return list(range(loaded.num_layers))
    chosen = sorted({int(layer) for layer in layers})
    if chosen and (chosen[0] < 0 or chosen[-1] >= loaded.num_layers):
        raise LifecycleError(f"layers must be in [0, {loaded.num_layers})", param="layers")
    return chosen


def _install_hooks(model, layers: list[int], shown: int, captured: dict) -> list:
    """Hooks that keep only what we return, so full per-layer tensors are freed as we go."""

    def keep_embeddings(_module, _inputs, output):
        captured["embeddings"] = output[0].float().numpy().copy()

    def keep_hidden(index):
        def hook(_module, _inputs, output):
            hidden = output[0] if isinstance(output, tuple) else output
            captured["hidden"][index] = hidden[0, -1].clone()

        return hook

    def keep_attention(index):
        # Eager attention returns (attn_output, attn_weights) whatever output_attentions says.
        def hook(_module, _inputs, output):
            weights = output[1][0]
            window = weights[:, -shown:, -shown:]
            captured["attentions"][index] = window.float().numpy().copy()
            captured["dropped_mass"].append(float(1.0 - window.sum(-1).mean()))

        return hook

    decoder_layers = model.model.layers
    handles = [model.model.embed_tokens.register_forward_hook(keep_embeddings)]
    handles += [layer.register_forward_hook(keep_hidden(i)) for i, layer in enumerate(decoder_layers)]
    handles += [decoder_layers[i].self_attn.register_forward_hook(keep_attention(i)) for i in layers]
    return handles


def _attention_note(length: int, shown: int, dropped_mass: list[float]) -> str:
    if shown == length:
        return ""
    mass = max(0.0, float(np.mean(dropped_mass))) if dropped_mass else 0.0
    return (
        f"Showing the last {shown:,} of {length:,} tokens: attention to and from the first "
        f"{length - shown:,} tokens is left out ({mass:.1%} of the shown rows' attention, on average), "
        "so shown rows sum to less than 1."
    )


def _logit_lens(loaded: LoadedModel, lens_logits: np.ndarray, top_k: int) -> list[LayerGuess]:
    guesses = []
    for layer, logits in enumerate(lens_logits.astype(np.float64)):
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        probs = np.exp(logprobs)
        candidates = top_candidates(probs, lambda i: token_text(loaded, i), top_k, logprobs)
        guesses.append(LayerGuess(layer, candidates, entropy_bits(probs)))
    return guesses


def token_text(loaded: LoadedModel, token_id: int) -> str:
    """One token's text from its exact bytes: a stray byte of a split character reads ``<0xF0>``, never U+FFFD."""
    return token_display(token_bytes(loaded).of(int(token_id)))


def embed_words(loaded: LoadedModel, words: Sequence[str], leading_space: bool = True) -> np.ndarray:
    """Each word's input vector: the mean embedding of its tokens, shape (len(words), d).

    With ``leading_space`` a word is embedded as it appears mid-sentence (" car"), which is how
    most common words are a single token in this vocabulary.
    """
    if not words or any(not isinstance(w, str) or not w.strip() for w in words):
        raise LifecycleError("words must be a non-empty list of non-empty strings", param="words")
    with loaded.tokenizer_lock:
        token_ids = [
            loaded.tokenizer.encode((" " if leading_space else "") + w.strip(), add_special_tokens=False)
            for w in words
        ]
    table = loaded.model.model.embed_tokens.weight
    with torch.inference_mode():
        return np.stack([table[ids].mean(0).float().numpy() for ids in token_ids])


def pca_2d(vectors: np.ndarray) -> np.ndarray:
    """Project rows onto their first two principal components, shape (n, 2).

    Each component's sign is fixed so its largest loading is positive, keeping plots stable.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise LifecycleError("vectors must be a non-empty 2-D array", param="vectors")
    centered = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    components = vt[:2]
    signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
    coords = centered @ (components * signs[:, None]).T
    return np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))


def pca_share(vectors: np.ndarray, directions: int = 2) -> float:
    """The share of the rows' spread (variance about their mean) along their first ``directions`` principal components."""
    centered = np.asarray(vectors, dtype=np.float64) - np.asarray(vectors, dtype=np.float64).mean(axis=0)
    variances = np.linalg.svd(centered, compute_uv=False) ** 2
    total = variances.sum()
    return float(variances[:directions].sum() / total) if total > 0 else 1.0


def cosine_similarity_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarity of the rows; a zero vector is similar to nothing (0)."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise LifecycleError("vectors must be a 2-D array", param="vectors")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    return np.clip(unit @ unit.T, -1.0, 1.0)
