"""The Streaming page's lessons: the time to first token, the gaps between frames, the whole stream."""

from types import SimpleNamespace

import pytest

from lifecycle.lessons.streaming import Gap, gaps_sentence, stream_gaps, streaming_lesson, ttft_sentence
from lifecycle.stages.streaming import StreamMetrics


def test_ttft_is_mostly_the_prefill_only_above_half():
    above = ttft_sentence(0.200, 37, setup=0.002, waited=0.010, prefill=0.150)
    assert "mostly the prefill of 37 prompt tokens" in above and "150.0 ms" in above and "75%" in above
    # The run: 698.3 ms to the first token, 237.3 ms of prefill, 450 ms in the engine's queue.
    below = ttft_sentence(0.6983, 37, setup=0.0, waited=0.450, prefill=0.2373)
    assert "mostly" not in below
    assert "only 237.3 ms" in below and "(34%)" in below
    assert "450.0 ms waiting in the engine's queue and 11.0 ms choosing the first token" in below  # 698.3-237.3-450
    assert "before the engine" not in below
    exactly_half = ttft_sentence(0.2, 5, setup=0.090, waited=0.0, prefill=0.1)
    assert "mostly" not in exactly_half and "waiting" not in exactly_half
    assert "90.0 ms before the engine had the request and 10.0 ms choosing" in exactly_half


def _step(seconds, delta, held=b""):
    return SimpleNamespace(seconds=seconds, delta=delta, held=held)


def test_stream_gaps_pair_each_frame_with_the_steps_behind_it():
    steps = [_step(0.002, "The"), _step(0.050, ""), _step(0.045, " é", b""), _step(0.040, "")]
    steps[1].held = b"\xc3"
    (gap,) = stream_gaps([0.300, 0.396], steps)
    assert gap.seconds == pytest.approx(0.096) and gap.step_seconds == pytest.approx(0.095)
    assert gap.tokens == 2 and gap.held_character
    assert stream_gaps([0.3], steps) is None  # two frames released text, only one time given


def test_gaps_sentence_says_one_step_only_when_it_was():
    even = [Gap(0.045, 0.044, 1, False), Gap(0.050, 0.051, 1, False)]
    assert gaps_sentence(even).endswith("here all 2 gaps were one step each.")
    # The sky prompt: " answer" and " to" 0 ms apart after 118.8 ms; their steps 52.9, 42.3 and 46.9 ms.
    batched = [Gap(0.1188, 0.0529 + 0.0423, 1, False), Gap(0.0, 0.0469, 1, False)]
    text = gaps_sentence(batched)
    assert "delivery batching" in text and "46.9 ms apart" in text and "one step each" not in text
    assert "character" not in text
    character = [Gap(0.095, 0.095, 2, True)]
    text = gaps_sentence(character)
    assert "1 frame carried more than one token" in text and "a character spans them" in text
    assert "batching" not in text
    held_for_stop = [Gap(0.095, 0.095, 2, False)]
    assert "stop sequence" in gaps_sentence(held_for_stop)


def test_a_frame_is_delivered_together_only_when_its_step_ended_later():
    assert Gap(0.0005, 0.040, 1, False).delivered_together
    assert not Gap(0.0005, 0.001, 1, False).delivered_together  # the steps themselves were that close
    assert not Gap(0.030, 0.040, 1, False).delivered_together


def test_the_streaming_lesson_counts_the_events_and_times_the_stream():
    metrics = StreamMetrics(ttft=0.3, inter_token=[0.040, 0.050], tokens_per_second=22.2, total_seconds=1.2)
    text = streaming_lesson(9, 5, True, metrics, 37, 0.01, 0.02, 0.2)
    assert "**9 server-sent events**" in text and "**5 content deltas**, a finish chunk, a usage chunk and" in text
    assert "after **300.0 ms** (time to first token: mostly the prefill of 37 prompt tokens, 200.0 ms (67%))" in text
    assert "a new piece every **45.0 ms** on average (**22.2 tokens/s**)" in text
    assert "a non-streaming client waited **1,200.0 ms** for anything at all." in text
    alone = streaming_lesson(4, 1, False, StreamMetrics(0.3, [], 0.0, 0.3), 37, 0.01, 0.02, 0.2)
    assert "usage chunk" not in alone and "every **n/a** on average" in alone
