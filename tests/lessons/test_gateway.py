"""The Gateway page's lesson: the call's cost in the key's bucket, the prompt's tokens plus max_tokens."""

from lifecycle.lessons.gateway import gateway_lesson


def test_the_lesson_reserves_the_prompt_and_max_tokens():
    text = gateway_lesson(1_037, 256, "SmolLM2-135M-Instruct")
    assert "**1 request** and **1,293 tokens** for this call (its 1,037 prompt tokens plus max_tokens 256" in text
    assert "which backend serves **SmolLM2-135M-Instruct**" in text
