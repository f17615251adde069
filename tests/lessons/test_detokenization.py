"""The Detokenization page's lesson: only the bytes that became content are counted."""

from lifecycle.lessons.detokenization import detokenized_sentence


def test_the_detokenized_sentence_counts_only_the_bytes_that_became_content():
    usage = {"prompt_tokens": 41, "completion_tokens": 30, "total_tokens": 71}
    cut = detokenized_sentence(30, 47, 15, 2, 0, 15, "length", usage)  # stopped two bytes into a character
    assert "(**45 bytes** of content in all)" in cut and "until the next token completed it" not in cut
    assert "those **2 bytes** never became text and were dropped" in cut
    assert "special token" not in cut and "usage of **71 tokens** (41 prompt + 30 completion)" in cut
    whole = detokenized_sentence(24, 108, 3, 0, 1, 100, "stop", usage)
    assert "(**108 bytes** of content" in whole and "**3** of them ended inside a character" in whole
    assert "until the next token completed it" in whole and "dropped" not in whole
    assert "1 special token (end of turn) was left out of the content." in whole
    assert "2 special tokens (end of turn) were left out" in detokenized_sentence(3, 5, 0, 0, 2, 5, "stop", usage)
    plain = detokenized_sentence(1, 5, 0, 0, 0, 5, "length", usage)
    assert "**1 token id**" in plain and "none of them split a character" in plain
