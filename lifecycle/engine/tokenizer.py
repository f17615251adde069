"""The model's tokenizer, read straight from its files with the Rust ``tokenizers`` library.

transformers' tokenizer classes wrap that same Rust tokenizer, but importing them imports transformers
itself: measured on this 2-core machine, ~0.5 s of CPU for ``import transformers`` (its import
structure walks every model folder) and ~0.24 s for ``PreTrainedTokenizerFast.from_pretrained``,
against ~0.09 s for ``tokenizers.Tokenizer.from_file``, of a start that must be ready in 3 s. So the
app's tokenizer is this class: the part of transformers' interface the app uses, with the same
results (tests/test_model_tokenizer.py compares the two on every call the app makes). The chat
template is rendered as transformers renders it: a sandboxed Jinja environment with ``trim_blocks``,
``lstrip_blocks``, loop controls, ``raise_exception``, ``strftime_now`` and a ``tojson`` that keeps
non-ASCII text as it is.

Like transformers' fast tokenizers, one instance must not be used by two threads at once (the Rust
side raises "Already borrowed"): ``LoadedModel.tokenizer_lock`` serialises it.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cached_property
from pathlib import Path

import tokenizers

NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token")
TEMPLATE_FILE = "chat_template.jinja"


class ModelTokenizer:
    """Encode, decode and render the chat template of one model, as transformers' fast tokenizer does."""

    def __init__(self, backend: tokenizers.Tokenizer, chat_template: str | None,
                 special_tokens: dict[str, str | None], extra_special: tuple[str, ...] = ()):
        self.backend_tokenizer = backend
        self.chat_template = chat_template
        self.special_tokens = {name: special_tokens.get(name) for name in NAMED_SPECIAL}
        self._extra_special = extra_special

    @classmethod
    def from_folder(cls, directory: Path) -> ModelTokenizer:
        """The tokenizer a ``save_pretrained`` folder holds (``tokenizer.json``, ``tokenizer_config.json``
        and the chat template, in its own file or in the config)."""
        config = json.loads((directory / "tokenizer_config.json").read_text())
        template_file = directory / TEMPLATE_FILE
        template = template_file.read_text() if template_file.is_file() else config.get("chat_template")
        extra = config.get("extra_special_tokens") or config.get("additional_special_tokens") or ()
        return cls(tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json")), template,
                   {name: _content(config.get(name)) for name in NAMED_SPECIAL},
                   tuple(_content(token) for token in (extra.values() if isinstance(extra, dict) else extra)))

    @classmethod
    def from_hugging_face(cls, hf_tokenizer) -> ModelTokenizer:
        """The same tokenizer as a transformers fast tokenizer already loaded (a GGUF's, another model's)."""
        named = {name: getattr(hf_tokenizer, name, None) for name in NAMED_SPECIAL}
        extra = tuple(t for t in hf_tokenizer.all_special_tokens if t not in named.values())
        return cls(hf_tokenizer.backend_tokenizer, hf_tokenizer.chat_template, named, extra)

    # --- special tokens ---------------------------------------------------------------------------
    @property
    def eos_token_id(self) -> int | None:
        return self._id_of(self.special_tokens["eos_token"])

    @property
    def unk_token(self) -> str | None:
        return self.special_tokens["unk_token"]

    @property
    def unk_token_id(self) -> int | None:
        return self._id_of(self.unk_token)

    @cached_property
    def all_special_tokens(self) -> list[str]:
        named = [token for token in self.special_tokens.values() if token is not None]
        return list(dict.fromkeys(named + list(self._extra_special)))

    @cached_property
    def all_special_ids(self) -> list[int]:
        return [self.convert_tokens_to_ids(token) for token in self.all_special_tokens]

    @property
    def added_tokens_decoder(self) -> dict[int, tokenizers.AddedToken]:
        return self.backend_tokenizer.get_added_tokens_decoder()

    # --- vocabulary ---------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """The base vocabulary, without added tokens (transformers' ``vocab_size``)."""
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=False)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def convert_ids_to_tokens(self, ids: int | list[int]) -> str | list[str]:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:
        """Each token's id; a token not in the vocabulary gets the unknown token's id (None without one)."""
        if isinstance(tokens, str):
            found = self.backend_tokenizer.token_to_id(tokens)
            return self.unk_token_id if found is None else found
        return [self.convert_tokens_to_ids(token) for token in tokens]

    def _id_of(self, token: str | None) -> int | None:
        return None if token is None else self.backend_tokenizer.token_to_id(token)

    # --- encode and decode -----------------------------------------------------------------------------
    def __call__(self, text: str, add_special_tokens: bool = True, split_special_tokens: bool = False,
                 return_offsets_mapping: bool = False) -> dict[str, list]:
        """``input_ids`` and ``attention_mask`` (and ``offset_mapping``) of one text. With
        ``split_special_tokens`` a marker typed in the text is encoded as plain text, not as the marker."""
        self.backend_tokenizer.encode_special_tokens = split_special_tokens
        try:
            encoded = self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens)
        finally:
            self.backend_tokenizer.encode_special_tokens = False
        result = {"input_ids": encoded.ids, "attention_mask": encoded.attention_mask}
        if return_offsets_mapping:
            result["offset_mapping"] = encoded.offsets
        return result

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self(text, add_special_tokens=add_special_tokens)["input_ids"]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def to_json(self) -> str:
        """The tokenizer as ``tokenizer.json`` holds it (what llguidance builds its token trie from)."""
        return self.backend_tokenizer.to_str()

    # --- chat template -----------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False,
                            tokenize: bool = False, tools: list[dict] | None = None) -> str | list[int]:
        """The conversation as the model's template writes it (its ids with ``tokenize``: the template's
        markers are its special tokens, and nothing is added around it)."""
        if self.chat_template is None:
            raise ValueError("This tokenizer has no chat template.")
        text = _compiled(self.chat_template).render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
            **{name: token for name, token in self.special_tokens.items() if token is not None})
        return self.encode(text, add_special_tokens=False) if tokenize else text


def _content(token: object) -> str | None:
    """A special token as the config writes it: a string, or a dict with its ``content``."""
    return token.get("content") if isinstance(token, dict) else token


_templates: dict[str, object] = {}


def _compiled(template: str):
    compiled = _templates.get(template)
    if compiled is None:
        compiled = _templates[template] = _environment().from_string(template)
    return compiled


def _environment():
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
        # Jinja's own filter escapes HTML characters, which a prompt must not get.
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return environment
