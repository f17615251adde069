"""The Request page's lesson: the body's size and what the server made of it."""

from lifecycle.lessons.request import request_lesson


def test_the_lesson_states_the_body_and_the_usage():
    text = request_lesson(1_234, 2, 5, 1_037, 21, "stop")
    assert "a JSON body of **1,234 bytes** holding **2 messages** and 5 parameters" in text
    assert "**1,037 prompt tokens** (chat template included) and answered with **21 tokens**" in text
    assert text.endswith("stopping with finish_reason **stop**.")
    assert "finish_reason **length**" in request_lesson(300, 1, 3, 30, 1, "length")


def test_one_message_and_one_parameter_are_not_plural():
    text = request_lesson(120, 1, 1, 30, 1, "length")
    assert "holding **1 message** and 1 parameter. The server turned that message into" in text
