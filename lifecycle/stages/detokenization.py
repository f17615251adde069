"""Detokenization: generated token ids -> bytes -> text, one token at a time.

A byte-level BPE token is a run of bytes, not of characters: an emoji or a rare CJK character
is often split across two or more tokens, and a token on its own may be invalid UTF-8. Decoding
each token separately would print U+FFFD replacement characters; a streaming server must instead
hold incomplete UTF-8 bytes back until the rest of the character arrives. This module keeps
every token's exact bytes, what each push released as text and what it held back. Special
tokens (``<|im_end|>`` ...) are recorded but are not part of the content text, like
``skip_special_tokens=True``.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from dataclasses import dataclass, field

from lifecycle.stages.vocabulary import TokenBytes, token_bytes


@dataclass(frozen=True)
class DetokenizedStep:
    """One token pushed: its bytes, the text it released, and the bytes still held back after it."""

    token_id: int
    bytes: bytes
    emitted: str
    held: bytes
    special: bool = False


@dataclass
class IncrementalDetokenizer:
    """Turns token ids into text as they arrive, never splitting a UTF-8 character.

    Invalid bytes that can never become a character (not a split one) decode to U+FFFD, exactly
    as ``tokenizer.decode`` shows them.
    """

    vocabulary: TokenBytes
    steps: list[DetokenizedStep] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @classmethod
    def for_tokenizer(cls, tokenizer_ish: object) -> IncrementalDetokenizer:
        return cls(token_bytes(tokenizer_ish))

    @property
    def held(self) -> bytes:
        """Bytes of an incomplete character waiting for the next token."""
        return self._decoder.getstate()[0]

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes ("" while a character is still incomplete)."""
        data = self.vocabulary.of(int(token_id))
        special = int(token_id) in self.vocabulary.special
        emitted = "" if special else self._decoder.decode(data)
        self.steps.append(DetokenizedStep(int(token_id), data, emitted, self.held, special))
        return emitted

    def flush(self) -> str:
        """End of output: release held bytes (an unfinished character becomes U+FFFD, as in ``decode``)."""
        return self._decoder.decode(b"", final=True)


def detokenize(ids: Iterable[int], tokenizer_ish: object) -> list[DetokenizedStep]:
    """Every token of ``ids`` pushed in order; bytes left in the last step's ``held`` were never completed."""
    detokenizer = IncrementalDetokenizer.for_tokenizer(tokenizer_ish)
    for token_id in ids:
        detokenizer.push(token_id)
    return detokenizer.steps


def detokenized_text(ids: Iterable[int], tokenizer_ish: object) -> str:
    """The content text of ``ids``: every emitted piece plus the final flush."""
    detokenizer = IncrementalDetokenizer.for_tokenizer(tokenizer_ish)
    return "".join(detokenizer.push(token_id) for token_id in ids) + detokenizer.flush()
