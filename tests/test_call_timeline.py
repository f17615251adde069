"""The call's spans: contiguous from 0 to the last event, each where its time really went."""

from types import SimpleNamespace

import pytest

from lifecycle.call_timeline import LAST_FRAMES, WAIT, call_spans

STARTED = 100.0  # the stream's origin on perf_counter's clock


def _step(index, made_at, seconds, text="x"):
    return SimpleNamespace(index=index, made_at=STARTED + made_at, seconds=seconds, text=text)


def test_spans_follow_the_queue_the_prefill_and_each_step_to_the_last_event():
    # 0.450 s in the queue, a 0.237 s prefill ending at 0.687, the first sampling 0.002 s, then two steps.
    steps = [_step(0, 0.689, 0.002), _step(1, 0.742, 0.053), _step(2, 0.784, 0.042)]
    spans = call_spans(STARTED, 0.237, steps, last_event_at=0.790)
    assert [s.stage for s in spans] == [WAIT, "prefill", "decode 1", "decode 2", "decode 3", LAST_FRAMES]
    assert [s.seconds for s in spans] == pytest.approx([0.450, 0.237, 0.002, 0.053, 0.042, 0.006])
    assert all(a.end == pytest.approx(b.start) for a, b in zip(spans, spans[1:]))
    assert spans[0].start == 0 and spans[-1].end == pytest.approx(0.790)


def test_a_generation_without_tokens_still_ends_at_its_last_event():
    spans = call_spans(STARTED, 0.120, [], last_event_at=0.150)
    assert [s.stage for s in spans] == [WAIT, "prefill", LAST_FRAMES]
    assert spans[0].seconds == 0 and spans[1].seconds == pytest.approx(0.120)
    assert spans[-1].end == pytest.approx(0.150)
