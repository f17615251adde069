"""ui.audience: the room's live panels refresh within a budget, however many watch."""

from ui.audience import Audience


def test_one_watcher_refreshes_at_the_fastest_interval():
    audience = Audience(runs_per_second=5.0)
    assert audience.watch("a", 1.0, now=100.0) == 1
    assert audience.interval(1.0, 1) == 1.0


def test_sixty_watchers_together_keep_to_the_budget():
    audience = Audience(runs_per_second=5.0)
    for n in range(60):
        audience.watch(f"s{n}", 1.0, now=100.0)
    watchers = audience.watchers(now=100.5)
    interval = audience.interval(1.0, watchers)
    assert (watchers, interval) == (60, 12.0)
    assert watchers / interval == audience.runs_per_second


def test_a_joining_session_is_counted_once():
    audience = Audience(runs_per_second=5.0)
    audience.watch("a", 1.0, now=0.0)
    assert audience.watchers(now=0.5, joining="a") == 1
    assert audience.watchers(now=0.5, joining="b") == 2


def test_a_session_that_missed_two_refreshes_has_left():
    audience = Audience(runs_per_second=5.0)
    audience.watch("slow", 10.0, now=0.0)
    audience.watch("fast", 1.0, now=0.0)
    assert audience.watchers(now=2.9) == 2  # fast: 2 x 1 s + 1 s of grace
    assert audience.watchers(now=3.1) == 1
    assert audience.watchers(now=21.1) == 0
