"""The app's tokenizer (lifecycle.engine.tokenizer, read without transformers) against transformers' own
fast tokenizer loaded from the same folder: every call the app makes gives the same result."""

from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from lifecycle.engine.tokenizer import ModelTokenizer

TEXTS = [
    "",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "Why is the sky blue?\nAnswer in one sentence.",
    "naïve café, 東京, Здравствуйте, 👩‍👩‍👧 and a zero\u200bwidth space",
    "def f(x):\n\treturn x ** 2  # tabs and code",
    "a typed marker <|im_end|> and <|im_start|>user in the text",
    "<|endoftext|><repo_name>",
    "\u00e9\u0301 combining, \r\n windows line ends, \x00 a NUL byte",
    "word " * 300,
]
CONVERSATIONS = [
    [{"role": "user", "content": "x"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! 👋"},
     {"role": "user", "content": "A typed <|im_end|> marker"}],
]
# A template with every extension transformers gives templates: loop controls, tojson (non-ASCII kept),
# the special tokens by name, raise_exception.
FEATURE_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
    "{% if loop.index > 2 %}{% break %}{% endif %}{{ m | tojson }}\n{% endfor %}"
    "{% if add_generation_prompt %}{{ eos_token }}{% endif %}")


@pytest.fixture(scope="module")
def pair(loaded):
    ours = ModelTokenizer.from_folder(Path(loaded.source))
    return ours, PreTrainedTokenizerFast.from_pretrained(loaded.source)


@pytest.mark.parametrize("text", TEXTS)
def test_encoding_matches_transformers(pair, text):
    ours, theirs = pair
    for options in ({}, {"add_special_tokens": False}, {"split_special_tokens": True},
                    {"add_special_tokens": False, "split_special_tokens": True, "return_offsets_mapping": True}):
        mine, reference = ours(text, **options), theirs(text, **options)
        assert mine.keys() == reference.keys()
        for key in mine:
            assert [tuple(x) if isinstance(x, (list, tuple)) else x for x in mine[key]] == \
                   [tuple(x) if isinstance(x, (list, tuple)) else x for x in reference[key]], (options, key)
    assert ours.encode(text, add_special_tokens=False) == theirs.encode(text, add_special_tokens=False)


def test_a_marker_is_split_only_when_asked(pair):
    ours, _ = pair
    marker = ours.convert_tokens_to_ids("<|im_end|>")
    assert ours.encode("<|im_end|>", add_special_tokens=False) == [marker]
    assert marker not in ours("<|im_end|>", add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert ours.encode("<|im_end|>", add_special_tokens=False) == [marker]  # the split did not stick


@pytest.mark.parametrize("text", TEXTS)
def test_decoding_matches_transformers(pair, text):
    ours, theirs = pair
    ids = theirs.encode(text) + [theirs.eos_token_id]
    for skip in (False, True):
        assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)


def test_the_vocabulary_and_special_tokens_match_transformers(pair):
    ours, theirs = pair
    every_id = list(range(len(theirs)))
    assert (len(ours), ours.vocab_size) == (len(theirs), theirs.vocab_size)
    assert ours.convert_ids_to_tokens(every_id) == theirs.convert_ids_to_tokens(every_id)
    assert ours.convert_ids_to_tokens(2) == theirs.convert_ids_to_tokens(2)
    tokens = ["<|im_start|>", "<|im_end|>", "Ġthe", "not-a-token-at-all"]
    assert ours.convert_tokens_to_ids(tokens) == theirs.convert_tokens_to_ids(tokens)
    assert ours.convert_tokens_to_ids("not-a-token-at-all") == theirs.unk_token_id
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert ours.all_special_ids == theirs.all_special_ids
    assert (ours.eos_token_id, ours.unk_token_id, ours.unk_token) == \
           (theirs.eos_token_id, theirs.unk_token_id, theirs.unk_token)
    assert {i: (t.content, t.special) for i, t in ours.added_tokens_decoder.items()} == \
           {i: (t.content, t.special) for i, t in theirs.added_tokens_decoder.items()}


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_the_chat_template_renders_as_transformers_renders_it(pair, messages):
    ours, theirs = pair
    for prompt in (False, True):
        assert ours.apply_chat_template(messages, add_generation_prompt=prompt) == \
               theirs.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=False)
        assert ours.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=True) == list(
            theirs.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=True, return_dict=True)["input_ids"])


def test_template_extensions_render_as_transformers_renders_them(pair):
    ours, theirs = pair
    custom = ModelTokenizer(ours.backend_tokenizer, FEATURE_TEMPLATE, ours.special_tokens)
    messages = CONVERSATIONS[2] + [{"role": "user", "content": "cut by the loop's break"}]
    assert custom.apply_chat_template(messages, add_generation_prompt=True) == theirs.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, chat_template=FEATURE_TEMPLATE)
    assert "👋" in custom.apply_chat_template(messages)  # tojson keeps non-ASCII text as it is
    with pytest.raises(Exception, match="no tools"):
        custom.apply_chat_template([{"role": "tool", "content": "x"}])


def test_built_from_a_loaded_transformers_tokenizer_it_is_the_same(pair):
    ours, theirs = pair
    again = ModelTokenizer.from_hugging_face(theirs)
    assert again.all_special_tokens == ours.all_special_tokens
    assert again.special_tokens == ours.special_tokens
    assert again.apply_chat_template(CONVERSATIONS[1], add_generation_prompt=True) == \
           ours.apply_chat_template(CONVERSATIONS[1], add_generation_prompt=True)
    assert again.encode(TEXTS[4]) == ours.encode(TEXTS[4])
