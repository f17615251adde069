"""The KV cache on the real model: its size formula equals the real cache tensors, and the two latencies."""

import time

import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.errors import LifecycleError
from lifecycle.engine import shared_engine
from lifecycle.stages.kv_cache import (WARM_TOKENS, KVCacheShape, LatencyPoint, cache_filler, cache_report,
                                       fastest_of, latency_report, measure_cache, measure_latency, timed_prefill)
from lifecycle.features.multiturn import common_prefix, replay_turns
from tests.engine_idle import until_idle


@pytest.fixture(scope="module")
def ids(loaded) -> list[int]:
    return render_prompt(Conversation(new_message="Why is the sea salty?")).ids


def test_cache_bytes_equal_the_sum_of_the_real_cache_tensors(loaded, ids):
    shape = KVCacheShape.of(loaded.model)
    engine = shared_engine(loaded)
    seconds, served, _ = engine.run(lambda _m: timed_prefill(engine.stack, ids, engine.prefill_chunk))
    assert served.length == len(ids) and seconds > 0
    assert served.keys.nbytes + served.values.nbytes == shape.bytes_for(len(ids))  # the engine's own cache
    measured = cache_report(loaded, ids)  # the Hugging Face model's cache, tensor by tensor
    assert measured.positions == len(ids)
    assert measured.total_bytes == shape.bytes_for(len(ids))
    assert measured.tensors == 2 * loaded.num_layers
    assert measured.key_shape == (1, loaded.model.config.num_key_value_heads, len(ids), shape.head_dim)


def test_the_cache_is_filled_on_the_models_own_weights_with_sdpa_leaving_the_model_eager(loaded, ids):
    import torch

    model = loaded.model
    filler = cache_filler(model)
    assert filler is not model and filler.config is not model.config
    assert filler.config._attn_implementation == "sdpa" and model.config._attn_implementation == "eager"
    assert all(mine is theirs for mine, theirs in zip(filler.parameters(), model.parameters()))
    assert all(mine is theirs for mine, theirs in zip(filler.buffers(), model.buffers()))
    with torch.inference_mode():
        eager = model(torch.tensor([ids]), use_cache=True).cache
        sdpa = filler(torch.tensor([ids]), use_cache=True).cache
    # Layer 0's keys and values come before any attention: the same numbers; the later layers' within float error.
    assert torch.equal(eager.layers[0].keys, sdpa.layers[0].keys)
    for mine, theirs in zip(sdpa.layers, eager.layers):
        assert mine.keys.shape == theirs.keys.shape and torch.allclose(mine.values, theirs.values, atol=1e-4)


def test_each_token_adds_the_same_bytes_and_gqa_saves_the_head_ratio(loaded, ids):
    shape = KVCacheShape.of(loaded.model)
    grown = measure_cache(loaded.model, ids + ids[-3:]).total_bytes - measure_cache(loaded.model, ids).total_bytes
    assert grown == 3 * shape.bytes_per_token
    config = loaded.model.config
    assert shape.multi_head_bytes_per_token * config.num_key_value_heads == (
        shape.bytes_per_token * config.num_attention_heads)
    assert shape.bytes_per_number == 4  # the fp32 copy of the model


def test_latency_points_cover_each_length_with_its_decode_steps(loaded, ids):
    """(No timing assertions here: speed lives in `make bench`.)"""
    points = latency_report(loaded, ids, [8, len(ids), 3 * len(ids)], decode_steps=3, rounds=2)
    assert [p.prompt_tokens for p in points] == [8, len(ids), 3 * len(ids)]
    assert all(len(p.decode_seconds) == 2 * 3 and p.prefill_seconds > 0 for p in points)
    with pytest.raises(LifecycleError):
        latency_report(loaded, ids, [loaded.context_window], decode_steps=1)


class _Watched:
    """The engine's stack, with every forward call's segment sizes written down (the work itself unchanged); the
    call numbered ``held`` (from 0) is held up ``HELD_SECONDS`` first, as other work on a busy machine would."""

    HELD_SECONDS = 2.0

    def __init__(self, stack, held: int | None = None):
        self.stack, self.calls, self.held = stack, [], held

    def __getattr__(self, name):
        return getattr(self.stack, name)

    def forward(self, segments, *args):
        if len(self.calls) == self.held:
            time.sleep(self.HELD_SECONDS)
        self.calls.append([len(segment.ids) for segment in segments])
        return self.stack.forward(segments, *args)


def test_the_sweep_warms_both_paths_before_its_first_length(loaded, ids):
    """Warmed by a prefill alone, the first length's decode steps were charged for the decode path's first use
    (17.6 ms against 7.5 ms warm). Before the first timed prefill, an untimed one and its decode steps run; then
    each length is prefilled and decoded from."""
    engine = shared_engine(loaded)
    watched = _Watched(engine.stack)
    points = engine.run(lambda _m: measure_latency(watched, engine.prefill_chunk, ids, [len(ids)], decode_steps=2))
    warm = min(len(ids), WARM_TOKENS)
    assert watched.calls == [[warm], [1], [1], [len(ids)], [1], [1]]
    assert [p.prompt_tokens for p in points] == [len(ids)] and len(points[0].decode_seconds) == 2


def test_rounds_keep_each_lengths_fastest_prefill_and_every_decode_step():
    first = [LatencyPoint(16, 0.225, (0.020, 0.031)), LatencyPoint(39, 0.081, (0.009, 0.010))]
    second = [LatencyPoint(16, 0.050, (0.008, 0.012)), LatencyPoint(39, 0.090, (0.011, 0.009))]
    assert fastest_of([first, second]) == [LatencyPoint(16, 0.050, (0.020, 0.031, 0.008, 0.012)),
                                           LatencyPoint(39, 0.081, (0.009, 0.010, 0.011, 0.009))]


def test_the_report_times_each_length_a_sweep_apart(loaded, ids, monkeypatch):
    """One engine job per length and round, in rounds over every length: a burst of other work holding up the
    first round's shorter length (its prefill here) leaves the second round's, and the point keeps that one."""
    engine = shared_engine(loaded)
    until_idle(engine, 60)
    short, long = len(ids), 2 * len(ids)
    watched = _Watched(engine.stack, held=2)  # after the first job's warm-up (a prefill, one decode step)
    monkeypatch.setattr(engine, "stack", watched)
    points = latency_report(loaded, ids, [long, short], decode_steps=1, rounds=2)
    warm = min(len(ids), WARM_TOKENS)

    def job(length: int) -> list[list[int]]:
        return [[warm], [1], [length], [1]]

    assert watched.calls == job(short) + job(long) + job(short) + job(long)
    assert [p.prompt_tokens for p in points] == [short, long] and len(points[0].decode_seconds) == 2
    assert 0 < points[0].prefill_seconds < _Watched.HELD_SECONDS / 3
    with pytest.raises(LifecycleError):
        latency_report(loaded, ids, [short], rounds=0)


def test_a_points_decode_step_is_its_fastest():
    """A busy machine only adds time, so the page shows each length's fastest decode step, not its median."""
    assert LatencyPoint(16, 0.05, (0.020, 0.007, 0.031, 0.009)).decode_fastest == 0.007


def test_each_turn_resends_the_whole_history(loaded):
    turns = replay_turns(loaded, ["Name a colour, test 7.", "Another one?", "And a third?"], max_tokens=6)
    assert [t.turn for t in turns] == [1, 2, 3]
    assert turns[0].repeated_tokens == 0 and turns[0].cached_tokens < turns[0].prompt_tokens
    for before, after in zip(turns, turns[1:]):
        assert after.prompt_tokens > before.prompt_tokens + 4  # the answer and the new question were added
        assert after.repeated_tokens >= before.prompt_tokens  # the whole previous prompt is sent again
        # the prefix cache serves at least the previous prompt, never more than what repeats
        assert before.prompt_tokens <= after.cached_tokens <= after.repeated_tokens
    assert all(t.cold_prefill_seconds > 0 and t.answer for t in turns)


def test_a_prefill_already_timed_from_scratch_is_not_timed_again(loaded):
    """A turn whose prompt ids come with a time (the KV cache page's sweep timed them) takes it; the others are
    timed. A time no prefill could take shows which one was used."""
    first = tuple(render_prompt(Conversation(new_message="Name a colour, test 8.")).ids)
    turns = replay_turns(loaded, ["Name a colour, test 8.", "Another one?"], max_tokens=4, cold_seconds={first: 1234.5})
    assert turns[0].prompt_tokens == len(first) and turns[0].cold_prefill_seconds == 1234.5
    assert 0 < turns[1].cold_prefill_seconds < 1234.5


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0
