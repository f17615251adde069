"""Incremental detokenization on the real SmolLM2 tokenizer: exact bytes, no U+FFFD for split characters."""

import random

import pytest

from lifecycle.stages.detokenization import IncrementalDetokenizer, detokenize, detokenized_text
from lifecycle.stages.vocabulary import token_bytes, token_display
from lifecycle.errors import LifecycleError

TEXTS = [
    "Hello, world! The quick brown fox.",
    "你好，世界。今天天气很好。",
    "Emoji: 🌟😀🦄🫠 and a family 👨‍👩‍👧 done.",
    "mixed 日本語 text, naïve café, مرحبا, 𠜎𪚥龘, \t tabs\n\nnewlines  ",
]


def encode(loaded, text):
    with loaded.tokenizer_lock:
        return loaded.tokenizer.encode(text, add_special_tokens=False)


def decode(loaded, ids):
    with loaded.tokenizer_lock:
        return loaded.tokenizer.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("text", TEXTS)
def test_incremental_text_equals_tokenizer_decode_and_never_replaces(loaded, text):
    ids = encode(loaded, text)
    detokenizer = IncrementalDetokenizer.for_tokenizer(loaded)
    pieces = [detokenizer.push(i) for i in ids] + [detokenizer.flush()]
    assert "".join(pieces) == decode(loaded, ids) == text
    assert not any("\ufffd" in piece for piece in pieces)
    assert b"".join(step.bytes for step in detokenizer.steps) == text.encode("utf-8")


def test_star_emoji_spans_three_tokens_and_is_held_until_complete(loaded):
    # A real split: the model writes 🌟 as three tokens (found when it was asked for emoji).
    ids = encode(loaded, "🌟")
    assert len(ids) >= 2
    assert all(decode(loaded, [i]) == "\ufffd" for i in ids)  # decoding each token alone is wrong
    steps = detokenize(ids, loaded)
    assert [s.emitted for s in steps] == [""] * (len(ids) - 1) + ["🌟"]
    assert [s.held for s in steps[:-1]] == [b"".join(s.bytes for s in steps[: n + 1]) for n in range(len(ids) - 1)]
    assert steps[-1].held == b"" and b"".join(s.bytes for s in steps) == "🌟".encode()


def test_cjk_character_split_over_two_tokens(loaded):
    ids = encode(loaded, "你好")
    steps = detokenize(ids, loaded)
    assert len(ids) > 2 and "".join(s.emitted for s in steps) == "你好"
    assert steps[0].emitted == "" and steps[0].held == "你".encode()[: len(steps[0].bytes)]


def test_special_tokens_are_recorded_but_not_content(loaded):
    ids = [1] + encode(loaded, "hi 🌟") + [2, 0]
    steps = detokenize(ids, loaded)
    assert "".join(s.emitted for s in steps) == "hi 🌟" == decode(loaded, ids)
    assert [s.special for s in steps] == [True] + [False] * (len(ids) - 3) + [True, True]
    assert steps[0].bytes == b"<|im_start|>" and steps[-2].bytes == b"<|im_end|>"


def test_special_token_between_the_bytes_of_one_character(loaded):
    star = encode(loaded, "🌟")
    ids = star[:1] + [2] + star[1:]
    assert detokenized_text(ids, loaded) == decode(loaded, ids) == "🌟"


def test_unfinished_character_at_the_end_flushes_like_decode(loaded):
    ids = encode(loaded, "ok 🌟")[:-1]
    detokenizer = IncrementalDetokenizer.for_tokenizer(loaded)
    assert "".join(detokenizer.push(i) for i in ids) == "ok "
    assert detokenizer.held and "🌟".encode().startswith(detokenizer.held)
    assert "ok " + detokenizer.flush() == decode(loaded, ids) == "ok \ufffd"
    assert detokenizer.held == b""


def test_random_id_sequences_match_tokenizer_decode(loaded):
    rng = random.Random(0)
    vocab = len(token_bytes(loaded).table)
    for _ in range(200):
        ids = [rng.randrange(vocab) for _ in range(rng.randrange(1, 12))]
        assert detokenized_text(ids, loaded) == decode(loaded, ids)


def test_every_whole_token_has_the_bytes_decode_gives(loaded):
    vocabulary = token_bytes(loaded)
    with loaded.tokenizer_lock:
        for token_id in range(0, len(vocabulary.table), 3):
            data = vocabulary.of(token_id)
            if token_id not in vocabulary.special and data.decode("utf-8", errors="ignore").encode() == data:
                assert data.decode() == loaded.tokenizer.decode([token_id])


def test_token_display_shows_stray_bytes(loaded):
    first = token_bytes(loaded).of(encode(loaded, "🌟")[0])
    assert "\ufffd" not in token_display(first) and token_display(first).startswith("<0xF0>")
    assert token_display("a🌟".encode()) == "a🌟"


def test_out_of_vocabulary_id_is_a_clean_error(loaded):
    with pytest.raises(LifecycleError) as error:
        detokenize([5, 10**7], loaded)
    assert error.value.param == "ids"
