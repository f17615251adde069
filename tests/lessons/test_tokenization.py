"""The Tokenization page's lessons: the prompt's tokens under three tokenizers, and nine languages."""

from lifecycle.lessons.tokenization import languages_lesson, ratio_range, tokenization_lesson
from lifecycle.stages.tokenization import MODEL_ENCODING


def test_the_lesson_counts_the_tokens_and_any_partial_characters():
    text = tokenization_lesson(1_234, 300, "SmolLM2", 4.1133, 49_152, 280, 290, 0)
    assert "Your prompt's 1,234 characters became **300 tokens** for SmolLM2's tokenizer" in text
    assert "(4.1 characters per token, from a vocabulary of 49,152)" in text
    assert "o200k_base needs **280** and cl100k_base **290**" in text and "UTF-8" not in text
    split = tokenization_lesson(3, 2, "SmolLM2", 1.5, 49_152, 1, 1, 2)
    assert split.endswith(" 2 of your tokens hold only part of a character's UTF-8 bytes.")


def test_the_languages_lesson_states_each_tokenizers_range_against_english():
    assert ratio_range([10, 12, 35]) == "1.2× to 3.5×"
    counts = {MODEL_ENCODING: [10, 12, 35], "cl100k_base": [10, 15, 40], "o200k_base": [10, 11, 14]}
    text = languages_lesson("SmolLM2", counts)
    assert "need 1.2× to 3.5× the tokens with SmolLM2's tokenizer, 1.5× to 4.0× with cl100k_base" in text
    assert "but 1.1× to 1.4× with o200k_base" in text
