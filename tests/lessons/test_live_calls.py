"""The Live calls page's lesson: what the call log shows this reader."""

from lifecycle.lessons.live_calls import live_calls_lesson


def test_the_lesson_counts_the_readers_calls():
    every = live_calls_lesson(12, 9, True)
    assert "The call log shows **12** of every key's recent calls: **9** answered, **3** refused" in every
    own = live_calls_lesson(1, 1, False)
    assert "**1** of your key's recent calls: **1** answered, **0** refused" in own


def test_with_no_calls_the_lesson_says_so():
    assert "It holds none of your key's calls yet." in live_calls_lesson(0, 0, False)
    assert "It holds none of every key's calls yet." in live_calls_lesson(0, 0, True)
