"""The model's vocabulary as bytes: what every token id stands for, exactly.

A byte-level BPE vocabulary (GPT-2 style, as in SmolLM2) writes each byte as one printable
character in its token strings. Mapping them back gives every token's exact bytes, which both
tokenization (bytes and spans per token) and detokenization (incremental UTF-8) need. A token that
holds only part of a character is displayed with its stray bytes as ``<0xF0>`` (the convention of
byte-fallback vocabularies), never as U+FFFD.

``show_token`` is the one way every page and chart writes a token: a space as ␣, a newline as ↵,
a tab as ⇥, stray bytes as ``<0xF0>``, an invisible character (a zero-width joiner, a no-break
space) as its code point ``<U+200D>``, special tokens as they are named (``<|im_end|>``).
"""

from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from functools import cached_property

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

    @cached_property
    def longest(self) -> int:
        """Bytes in the longest ordinary token: any text needs at least len(bytes) / longest tokens."""
        return max(len(piece) for i, piece in enumerate(self.table) if i not in self.special)

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


VISIBLE_WHITESPACE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})
EMPTY_TOKEN = "∅"
# Characters that draw nothing: format (zero-width joiner, BOM), control, and other space characters.
INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Zs", "Zl", "Zp"})
# The notation in one sentence, for the first page that shows tokens.
TOKEN_NOTATION = ("␣ is a space, ↵ a newline, ⇥ a tab; <0xE2> is one byte of a character split across tokens; "
                  "<U+200D> an invisible character (here a zero-width joiner); ∅ a token with no text; "
                  "special tokens keep their names, like <|im_end|>.")


def show_token(text: str | bytes) -> str:
    """A token as every page shows it: whitespace made visible (␣ ↵ ⇥ ␍), stray bytes as ``<0xF0>``,
    other invisible characters as their code points (``<U+200D>``).

    Special tokens keep their names (``<|im_end|>``); a token with no text at all shows as ∅.
    """
    if isinstance(text, bytes):
        text = token_display(text)
    if not text:
        return EMPTY_TOKEN
    return "".join(_invisible_as_code_point(c) for c in text.translate(VISIBLE_WHITESPACE))


def _invisible_as_code_point(char: str) -> str:
    invisible = unicodedata.category(char) in INVISIBLE_CATEGORIES or 0xFE00 <= ord(char) <= 0xFE0F
    return f"<U+{ord(char):04X}>" if invisible else char
