"""The Failures page's lesson: the installed SDK's retry policy, in numbers."""

from lifecycle.lessons.failures import failures_lesson


def test_the_lesson_states_the_sdks_retries_and_backoff():
    text = failures_lesson("1.99.1", 2, 0.375, 0.5, 8.0)
    assert "(version 1.99.1) retries a failed attempt **2 times** by default" in text
    assert "sleeping 0.375–0.500 s before the first retry" in text and "(up to 8 s)" in text
    assert "(up to 2.5 s)" in failures_lesson("2.0.0", 5, 0.4, 0.5, 2.5)
