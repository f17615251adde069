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
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from lifecycle.errors import LifecycleError


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable character, used by byte-level BPE vocabularies."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars)}


@dataclass(frozen=True)
class TokenBytes:
    """Every vocabulary entry's exact bytes, and which ids are special (control) tokens."""

    table: tuple[bytes, ...]
    special: frozenset[int]
    byte_level: bool  # False: bytes come from decoding each token alone (approximate for byte-fallback vocabularies)

    def of(self, token_id: int) -> bytes:
        if not 0 <= token_id < len(self.table):
            raise LifecycleError(f"token id {token_id} is outside the vocabulary [0, {len(self.table)})", param="ids")
        return self.table[token_id]


_tables: dict[int, tuple[object, TokenBytes]] = {}
_tables_lock = threading.Lock()


def _tokenizer_and_lock(tokenizer_ish: object) -> tuple[object, object]:
    """Accept a LoadedModel (use its tokenizer and tokenizer_lock) or a bare HF tokenizer."""
    tokenizer = getattr(tokenizer_ish, "tokenizer", tokenizer_ish)
    return tokenizer, getattr(tokenizer_ish, "tokenizer_lock", None) or threading.RLock()


def token_bytes(tokenizer_ish: object) -> TokenBytes:
    """The byte table of a tokenizer, built once per tokenizer object (~0.1 s for 49k tokens)."""
    tokenizer, tokenizer_lock = _tokenizer_and_lock(tokenizer_ish)
    with _tables_lock:
        cached = _tables.get(id(tokenizer))
        if cached is None or cached[0] is not tokenizer:
            with tokenizer_lock:
                cached = (tokenizer, _build_table(tokenizer))
            _tables[id(tokenizer)] = cached
    return cached[1]


def _build_table(tokenizer) -> TokenBytes:
    size = len(tokenizer)
    special = {int(i) for i in tokenizer.all_special_ids}
    special |= {int(i) for i, added in tokenizer.added_tokens_decoder.items() if added.special}
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    byte_level = type(decoder).__name__ == "ByteLevel"
    if byte_level:
        byte_of = {char: byte for byte, char in bytes_to_unicode().items()}
        table = tuple(
            piece.encode("utf-8") if i in special or any(c not in byte_of for c in piece)
            else bytes(byte_of[c] for c in piece)
            for i, piece in enumerate(pieces)
        )
    else:
        table = tuple(
            piece.encode("utf-8") if i in special else tokenizer.decode([i]).encode("utf-8")
            for i, piece in enumerate(pieces)
        )
    return TokenBytes(table, frozenset(special), byte_level)


def token_display(data: bytes) -> str:
    """A token's text for display: valid UTF-8 as text, each stray byte of a split character as ``<0xF0>``."""
    text = data.decode("utf-8", errors="surrogateescape")
    return "".join(f"<0x{ord(c) - 0xDC00:02X}>" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)


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
