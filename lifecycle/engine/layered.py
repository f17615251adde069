"""The Hugging Face model's forward pass, one decoder layer at a time.

The inspection pass (attention maps, logit lens, the Forward pass page's block) needs the Hugging
Face modules themselves, with hooks on them, and so runs as an engine job. Run as one call, a
1,000-token pass holds every streaming client up for seconds. ``layered_forward`` is the same pass
as a generator that yields after the embeddings and after every decoder layer, so the engine runs
its decoding steps in between (``Engine.run_sliced``): a stream waits at most one layer's time.

It calls the very modules ``LlamaModel.forward`` calls, in the same order and with the same
arguments (embeddings, the rotary tables, the causal mask, each layer, the final norm, the head),
so hooks fire as they would and the logits are the model's own, bit for bit (tests/test_layered.py).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence

import torch

Slices = Generator[None, None, torch.Tensor]


def layered_forward(model, ids: Sequence[int], logits_to_keep: int = 1) -> Slices:
    """Yield between layers; return the logits of the last ``logits_to_keep`` positions, (1, k, vocab)."""
    # Imported here: transformers' masking module pulls in torch._dynamo (~1 s), which the app's start does not need.
    from transformers.masking_utils import create_causal_mask

    inner = model.model
    config = inner.config
    with torch.inference_mode():
        embeds = inner.embed_tokens(torch.tensor([list(ids)]))
        positions = torch.arange(embeds.shape[1]).unsqueeze(0)
        mask = create_causal_mask(config=config, inputs_embeds=embeds, attention_mask=None, cache=None,
                                  position_ids=positions)
        rotary = inner.rotary_emb(embeds, position_ids=positions)
        hidden = embeds
    for layer in inner.layers[:config.num_hidden_layers]:
        yield
        with torch.inference_mode():
            hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=positions,
                           cache=None, use_cache=False)
    with torch.inference_mode():
        return model.lm_head(inner.norm(hidden)[:, -logits_to_keep:, :])


def timed(slices: Generator):
    """``slices`` passed through, returning (its result, the seconds spent inside its slices)."""
    seconds = 0.0
    while True:
        started = time.perf_counter()
        try:
            next(slices)
        except StopIteration as finished:
            return finished.value, seconds + time.perf_counter() - started
        seconds += time.perf_counter() - started
        yield


def run_through(slices: Generator):
    """Run a sliced job to its end at once (where nothing else waits); return its result."""
    while True:
        try:
            next(slices)
        except StopIteration as finished:
            return finished.value
