"""show_token, the one way every page writes a token: whitespace, stray bytes, special and empty tokens."""

import pytest

from lifecycle.stages.forward_pass import token_text
from lifecycle.stages.tokenization import encode_plain
from lifecycle.stages.vocabulary import EMPTY_TOKEN, TOKEN_NOTATION, show_token, token_bytes


@pytest.mark.parametrize(
    "token, shown",
    [
        (" sky", "␣sky"),
        ("\n", "↵"),
        (".\n\n", ".↵↵"),
        ("\tx", "⇥x"),
        ("\r\n", "␍↵"),
        ("  ", "␣␣"),
        ("Paris", "Paris"),
        ("<|im_end|>", "<|im_end|>"),  # a special token keeps its name
        ("", EMPTY_TOKEN),
    ],
)
def test_whitespace_and_names(token, shown):
    assert show_token(token) == shown


def test_bytes_of_a_split_character_are_written_in_hex():
    crab = "🦀".encode()  # F0 9F A6 80
    assert show_token(crab[:2]) == "<0xF0><0x9F>"
    assert show_token(b" " + crab[:1]) == "␣<0xF0>"
    assert show_token(crab[2:]) == "<0xA6><0x80>"
    assert show_token(crab) == "🦀" and show_token(" é".encode()) == "␣é"


def test_invisible_characters_are_written_as_code_points():
    assert show_token("\u200d") == "<U+200D>"  # o200k_base's id 2524, a zero-width joiner: a blank chip before
    assert show_token("\u00a0") == "<U+00A0>" and show_token("\ufeff") == "<U+FEFF>"
    assert show_token(" \u2764\ufe0f") == "␣\u2764<U+FE0F>"  # the emoji's variation selector is a code point of its own
    assert show_token("caf\u00e9 \U0001F44B\U0001F3FD") == "caf\u00e9␣\U0001F44B\U0001F3FD"  # visible ones stay


def test_bytes_and_text_of_a_whole_token_show_the_same():
    assert show_token(b" the\n") == show_token(" the\n") == "␣the↵"
    assert show_token(b"") == EMPTY_TOKEN


def test_the_notation_sentence_names_every_mark():
    for mark in ("␣", "↵", "⇥", "<0xE2>", "<U+200D>", EMPTY_TOKEN, "<|im_end|>"):
        assert mark in TOKEN_NOTATION


def test_the_models_token_text_never_shows_a_replacement_character(loaded):
    """A token of a split emoji reads <0x..> wherever lifecycle names tokens (candidates, lens, pages)."""
    ids = encode_plain("I love 🦀")
    vocabulary = token_bytes(loaded)
    split = [i for i in ids if not _is_utf8(vocabulary.of(i))]
    assert split, "the emoji should be split across tokens"
    for token_id in ids:
        assert "\ufffd" not in token_text(loaded, token_id)
        assert show_token(token_text(loaded, token_id)) == show_token(vocabulary.of(token_id))
    assert all("<0x" in token_text(loaded, i) for i in split)
    special = loaded.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert show_token(token_text(loaded, special)) == "<|im_end|>"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
