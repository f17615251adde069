"""The Home page's lessons: what the generation waited for, and where the call's time went."""

from lifecycle.lessons.home import engine_wait_sentence, home_lesson


def test_the_engine_wait_says_what_was_there():
    assert "at once" in engine_wait_sentence(0.0004, (), 0)
    alone = engine_wait_sentence(0.004, (), 0)
    assert "4.0 ms" in alone and "nothing else was in the engine" in alone and "other requests" not in alone
    busy = engine_wait_sentence(0.5963, ("page", "api", "page"), 1)
    assert "596.3 ms" in busy and "2 page requests, 1 api request and 1 exclusive job" in busy
    job = engine_wait_sentence(0.45, (), 1)
    assert "1 exclusive job (an inspection pass" in job and "request" not in job.split("held")[1]


def test_the_home_lesson_states_the_calls_times():
    text = home_lesson(1.2345, 0.00042, 0.0031, 37, 21, 0.9871, 0.4567)
    assert "Your prompt's call took **1,234.5 ms**" in text
    assert "tokenizing (0.42 ms)" in text and "detokenizing (3.1 ms)" in text
    assert "the prefill of 37 prompt tokens and 21 decode steps — took **987.1 ms**" in text
    assert "one **inspection pass** (456.7 ms)" in text
    slow = home_lesson(12.34, 0.001, 0.002, 5, 1, 11.5, 2.0)
    assert "took **12.3 s**" in slow and "took **11.5 s**" in slow and "(2,000.0 ms)" in slow
