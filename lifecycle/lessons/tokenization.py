"""The Tokenization page's lessons: the prompt's tokens under three tokenizers, and the same sentence's
tokens in nine languages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lifecycle.stages.tokenization import MODEL_ENCODING


def tokenization_lesson(characters: int, tokens: int, model_name: str, chars_per_token: float, vocabulary: int,
                        o200k_tokens: int, cl100k_tokens: int, partial: int) -> str:
    """The page's lesson: the prompt's characters as the model's tokens next to OpenAI's two encodings, and
    how many of its tokens hold only part of a character (said only when some do)."""
    return (
        f"Your prompt's {characters:,} characters became **{tokens:,} tokens** for "
        f"{model_name}'s tokenizer ({chars_per_token:.1f} characters per token, from a vocabulary of "
        f"{vocabulary:,}); OpenAI's o200k_base needs **{o200k_tokens:,}** and cl100k_base "
        f"**{cl100k_tokens:,}**. The model never sees letters, only these ids."
        + (f" {partial} of your tokens hold only part of a character's UTF-8 bytes." if partial else "")
    )


def ratio_range(counts: Sequence[int]) -> str:
    """The other counts against the first (English) as a range: "1.2× to 3.4×"."""
    ratios = [count / counts[0] for count in counts[1:]]
    return f"{min(ratios):.1f}× to {max(ratios):.1f}×"


def languages_lesson(model_name: str, counts: Mapping[str, Sequence[int]]) -> str:
    """The languages' lesson: ``counts[encoding]`` holds the sentence's token count per language, English
    first, for the model's encoding, cl100k_base and o200k_base."""
    spans = {encoding: ratio_range(counts[encoding]) for encoding in counts}
    return (
        f"Relative to English, the other eight languages need {spans[MODEL_ENCODING]} the tokens with "
        f"{model_name}'s tokenizer, {spans['cl100k_base']} with cl100k_base, but {spans['o200k_base']} with "
        "o200k_base, whose larger vocabulary was built for many languages. So non-English text costs more "
        "with some tokenizers, not with all: tokens per word depend on what the tokenizer was trained on."
    )
