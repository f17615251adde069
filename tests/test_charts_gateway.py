"""The Gateway page's token-bucket chart, fed with levels from the real RateLimiter."""

import pytest

from charts.gateway import bucket_chart
from charts.theme import axis_title
from lifecycle.api.ratelimit import RateLimiter


def _burst(limiter, count, spread, cost):
    times, allowed, after = [], [], []
    for index in range(count):
        now = index * spread / count
        decision = limiter.decide("k", cost, now=now)
        times.append(now)
        allowed.append(decision.allowed)
        after.append(decision.levels)
    return times, allowed, after


def test_levels_and_call_outcomes_are_drawn_as_given():
    limiter = RateLimiter(requests_per_minute=5, tokens_per_minute=1000)
    times, allowed, levels = _burst(limiter, 8, 1.0, 100)
    assert allowed == [True] * 5 + [False] * 3  # the real limiter refuses once the bucket is empty
    figure = bucket_chart(times, [lv.requests for lv in levels], [lv.tokens for lv in levels],
                          times, allowed, 5, 1000)
    requests_line, ok_top, refused_top, tokens_line, ok_bottom, refused_bottom = figure.data
    assert list(requests_line.y) == [lv.requests for lv in levels]
    assert list(tokens_line.y) == [lv.tokens for lv in levels]
    assert list(ok_top.x) == times[:5] and list(refused_top.x) == times[5:]
    assert refused_top.marker.symbol == "x" and ok_top.name == "admitted (200)"
    assert figure.layout.xaxis2.title.text == axis_title("Time since the first call", "s")
    assert figure.layout.yaxis.title.text == axis_title("Requests left", "requests")
    assert figure.layout.yaxis2.title.text == axis_title("Tokens left", "tokens")
    capacities = sorted(shape.y0 for shape in figure.layout.shapes)
    assert capacities == [5, 1000]


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError):
        bucket_chart([0, 1], [1], [1, 2], [], [], 1, 1)
    with pytest.raises(ValueError):
        bucket_chart([0], [1], [1], [0, 1], [True], 1, 1)
