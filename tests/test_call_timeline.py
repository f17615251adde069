"""The call's spans: contiguous from 0 to the last event, each where its time really went."""

from types import SimpleNamespace

import pytest

from lifecycle.features.call_timeline import HANDOVER, LAST_FRAMES, SETUP, WAIT, call_spans

STARTED = 100.0  # the stream's origin on perf_counter's clock


def _step(index, made_at, seconds, text="x"):
    return SimpleNamespace(index=index, made_at=STARTED + made_at, seconds=seconds, text=text)


def test_spans_follow_setup_queue_prefill_and_each_step_to_the_last_event():
    # Set up in 2 ms, 0.450 s in the queue, a 0.237 s prefill ending at 0.689, 1 ms to keep the prompt
    # and hand over the logits, then three tokens, the first only sampled.
    steps = [_step(0, 0.692, 0.002), _step(1, 0.745, 0.053), _step(2, 0.787, 0.042)]
    spans = call_spans(STARTED, STARTED + 0.002, STARTED + 0.452, 0.237, steps, last_event_at=0.790)
    assert [s.stage for s in spans] == [SETUP, WAIT, "prefill", HANDOVER, "decode 1", "decode 2", "decode 3",
                                        LAST_FRAMES]
    assert [s.seconds for s in spans] == pytest.approx([0.002, 0.450, 0.237, 0.001, 0.002, 0.053, 0.042, 0.003])
    assert [s.seconds for s in spans[4:7]] == pytest.approx([step.seconds for step in steps])
    assert all(a.end == pytest.approx(b.start) for a, b in zip(spans, spans[1:]))
    assert spans[0].start == 0 and spans[-1].end == pytest.approx(0.790)


def test_a_generation_without_tokens_still_ends_at_its_last_event():
    spans = call_spans(STARTED, STARTED + 0.001, STARTED + 0.001, 0.120, [], last_event_at=0.150)
    assert [s.stage for s in spans] == [SETUP, WAIT, "prefill", LAST_FRAMES]
    assert spans[1].seconds == 0 and spans[2].seconds == pytest.approx(0.120)
    assert spans[-1].end == pytest.approx(0.150)
