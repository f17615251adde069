"""What the truth tests recompute with, written here and not taken from the app: GPT-2's byte-level
alphabet, the prompt through the tokenizer's own ``apply_chat_template``, and transformers' own greedy
``generate`` on the loaded model (raw logits returned, so each step's distribution is a softmax of them)."""

from __future__ import annotations

import numpy as np
import torch


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
    ids = loaded.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                               tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def transformers_greedy(loaded, ids: list[int], max_tokens: int) -> tuple[list[int], np.ndarray]:
    """transformers' own greedy generation: the new token ids and each step's distribution (softmax of raw logits)."""
    eos = [loaded.tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    with loaded.lock, torch.inference_mode():
        out = loaded.model.generate(
            input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_tokens, do_sample=False, temperature=None, top_p=None, top_k=None,
            repetition_penalty=None, eos_token_id=eos, pad_token_id=eos[-1],
            output_logits=True, return_dict_in_generate=True,
        )
    new = out.sequences[0, len(ids):].tolist()
    probs = torch.softmax(torch.stack(out.logits)[:, 0].double(), dim=-1).numpy()
    return new, probs


def next_token_probs(loaded, ids: list[int]) -> np.ndarray:
    """The distribution after ``ids`` from transformers' own forward pass of the loaded model."""
    with loaded.lock, torch.inference_mode():
        logits = loaded.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    return torch.softmax(logits, dim=-1).numpy()


# The engine multiplies the GGUF's packed codes, transformers the same weights in fp32: a probability agrees to
# about 4e-5 of itself (measured), so two tokens closer than this may swap ranks between the two.
RANK_RELATIVE = 1e-4


def rank_range(probs: np.ndarray, token_id: int) -> range:
    """The 1-based ranks ``token_id`` can take by probability, given the engine's float rounding."""
    p = probs[token_id]
    above = int(np.count_nonzero(probs > p * (1 + RANK_RELATIVE)))
    level = int(np.count_nonzero(probs >= p * (1 - RANK_RELATIVE)))
    return range(above + 1, level + 1)
