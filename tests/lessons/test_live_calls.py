"""The Live calls page's lessons: what the call log shows this reader, and what the engine did."""

import pytest

from lifecycle.lessons.live_calls import live_calls_lesson, refresh_note


def test_the_lesson_counts_the_readers_calls():
    every = live_calls_lesson(12, 9, True)
    assert "The call log shows **12** of every key's recent calls: **9** answered, **3** refused" in every
    own = live_calls_lesson(1, 1, False)
    assert "**1** of your key's recent calls: **1** answered, **0** refused" in own


def test_with_no_calls_the_lesson_says_so():
    assert "It holds none of your key's calls yet." in live_calls_lesson(0, 0, False)
    assert "It holds none of every key's calls yet." in live_calls_lesson(0, 0, True)


def test_the_engine_rate_is_over_the_time_since_the_first_recent_step_began():
    from lifecycle.engine.scheduler import StepRecord, recent_rate
    from lifecycle.lessons.live_calls import engine_lesson

    def step(end: float, generated: int) -> StepRecord:
        return StepRecord(end, 1, (1,), 0, generated, generated, 0.05)

    now = 1000.0
    steps = [step(985.0, 7), step(998.15, 1), step(999.0, 9), step(999.9, 9)]  # the first is out of the 10 s
    generated, span, rate = recent_rate(steps, now)  # its window: RATE_WINDOW_SECONDS, 10 s
    assert (generated, span) == (19, pytest.approx(1.9)) and rate == pytest.approx(10.0)
    sentence = engine_lesson(10.0, 3, 1.0, generated, span, rate)
    assert "ran **3 steps**" in sentence and "generated **19 tokens** in the 1.90 s" in sentence
    assert "**10.0 per second**" in sentence
    assert recent_rate([], now) == (0, 0.0, 0.0)
    assert "idle" in engine_lesson(10.0, 0, 0.0, 0, 0.0, 0.0)


def test_the_engine_lesson_counts_the_page_jobs_in_hand():
    from lifecycle.lessons.live_calls import engine_lesson

    busy = engine_lesson(10.0, 3, 2.0, 6, 0.5, 12.0, jobs=2)
    assert "ran **3 steps**" in busy and "**2 page jobs** in hand" in busy
    assert "**1 page job** in hand" in engine_lesson(10.0, 3, 2.0, 6, 0.5, 12.0, jobs=1)
    assert "page job" not in engine_lesson(10.0, 3, 2.0, 6, 0.5, 12.0)
    only_jobs = engine_lesson(10.0, 0, 0.0, 0, 0.0, 0.0, jobs=1)
    assert "idle" not in only_jobs and only_jobs.startswith("No generation step in the last 10 s.")


def test_a_panel_watched_by_few_says_how_often_it_refreshes():
    assert refresh_note(1.0, 3, fastest=1.0) == "This panel refreshes every 1 s."


def test_a_panel_slowed_for_the_room_says_why_with_its_numbers():
    note = refresh_note(12.0, 60, fastest=1.0)
    assert note.startswith("This panel refreshes every 12 s, not every 1 s: 60 sessions watch it")


def test_the_note_writes_the_interval_as_it_is():
    assert refresh_note(1.6, 8, fastest=1.0).startswith("This panel refreshes every 1.6 s, not every 1 s: 8 sessions")
