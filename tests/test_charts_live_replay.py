"""The browser replays' data: every step, event and cache figure the page states arrives as plain arrays,
token text as plain strings, and the growth slider stops where this run's marks are."""

import json
import math

import pytest

from charts.live_replay import (
    HOW_CHOSEN, cache_bytes, generation_replay_data, growth_positions, how_chosen, kv_growth_data, stream_replay_data,
)
from lifecycle.stages.generation import GenerationStep, TokenLogprob
from lifecycle.stages.sampling import TokenCandidate
from lifecycle.stages.streaming import StreamEvent, sse_line
from lifecycle.stages.vocabulary import show_token

MARKUP = "</script><img src=x onerror=alert(1)>"


def _step(index: int, token_id: int, text: str, probability: float, base: float, forced: bool = False,
          delta: str | None = None) -> GenerationStep:
    log = lambda p: math.log(p) if p > 0 else -math.inf  # noqa: E731
    others = [TokenCandidate(token_id, text, probability, log(probability), 1),
              TokenCandidate(900 + index, MARKUP, 1 - probability, log(1 - probability), 2),
              TokenCandidate(950 + index, " far", 0.0, -math.inf, 3)]
    logprobs = [TokenLogprob(token_id, text.encode(), log(base)),
                TokenLogprob(900 + index, MARKUP.encode(), log(1 - base))]  # " far" is not in the top 20
    return GenerationStep(index=index, token_id=token_id, text=text, probability=probability, alternatives=others,
                          seconds=0.0123 * (index + 1), forced=forced, delta=text if delta is None else delta,
                          base_probability=base, top_logprobs=logprobs)


def test_generation_data_holds_every_step_in_order():
    steps = [_step(0, 5, " The", 1.0, 0.612345678), _step(1, 7, "\n", 0.75, 0.5, forced=True),
             _step(2, 9, " end", 0.25, 0.125)]
    data = generation_replay_data(steps, picked=(2,), greedy=False, prefill_seconds=0.23456, prompt_tokens=37,
                                  finish_reason="length")
    assert data["tokens"] == [show_token(" The"), show_token("\n"), show_token(" end")]
    assert data["deltas"] == [" The", "\n", " end"]
    assert data["p"] == [1.0, 0.75, 0.25]
    assert data["base"] == [0.61235, 0.5, 0.125]  # rounded to 0.001%
    assert data["ms"] == [12.3, 24.6, 36.9]
    assert [data["how_labels"][h] for h in data["how"]] == ["sampled", "replayed", "you picked"]
    assert data["prefill_ms"] == 234.6 and data["prompt_tokens"] == 37 and data["finish_reason"] == "length"
    first = data["alternatives"][0]
    assert first[0] == [show_token(" The"), 1.0, 0.61235, 1]
    assert first[1] == [show_token(MARKUP), 0.0, pytest.approx(1 - 0.612345678, abs=1e-5), 0]
    assert first[2][2] is None  # not among the model's top 20: the browser says n/a, not 0%
    assert "</script><img" in json.dumps(data)  # text, never escaped into markup here: the browser sets textContent


def test_how_chosen_puts_the_readers_pick_before_a_replay():
    replayed = _step(0, 5, "a", 1.0, 0.5, forced=True)
    assert HOW_CHOSEN[how_chosen(replayed, picked=(0,), greedy=True)] == "you picked"
    assert HOW_CHOSEN[how_chosen(replayed, picked=(), greedy=True)] == "replayed"
    drawn = _step(1, 6, "b", 1.0, 0.5)
    assert HOW_CHOSEN[how_chosen(drawn, picked=(), greedy=True)] == "greedy (top token)"
    assert HOW_CHOSEN[how_chosen(drawn, picked=(), greedy=False)] == "sampled"


def test_growth_positions_span_the_window_and_stop_at_the_marks():
    positions = growth_positions(8192, [37, 84, 8192])
    assert positions[0] == 1 and positions[-1] == 8192
    assert 37 in positions and 84 in positions
    assert positions == sorted(set(positions))
    assert 40 <= len(positions) <= 52
    assert growth_positions(100, [500]) == growth_positions(100, [])  # a mark past the window is not a stop


def test_kv_growth_data_gives_the_shape_the_browser_multiplies_out():
    data = kv_growth_data(30, 3, 9, 64, 4, 8192, 111_000_000, [("this prompt", 37), ("after the answer", 84)])
    per_token = data["layers"] * data["kv_heads"] * data["head_dim"] * 2 * data["bytes_per_number"]
    assert per_token == 46_080 == cache_bytes(30, 3, 64, 4, 1)
    assert cache_bytes(30, 3, 64, 4, 8192) == 8192 * 46_080
    assert data["start"] == 37 and data["marks"] == [["this prompt", 37], ["after the answer", 84]]
    assert data["query_heads"] // data["kv_heads"] == 3 and data["weight_bytes"] == 111_000_000


def test_stream_data_keeps_each_events_time_kind_and_text():
    chunk = lambda delta, finish=None: {"id": "c", "object": "chat.completion.chunk",  # noqa: E731
                                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    events = [StreamEvent(chunk({"role": "assistant", "content": ""}), sse_line(chunk({"role": "assistant"})), 0.0004),
              StreamEvent(chunk({"content": MARKUP}), sse_line(chunk({"content": MARKUP})), 0.69834),
              StreamEvent(chunk({}, "stop"), sse_line(chunk({}, "stop")), 0.75),
              StreamEvent(None, sse_line(None), 0.7512)]
    data = stream_replay_data(events)
    assert data["at"] == [0.4, 698.3, 750.0, 751.2]
    assert data["kinds"] == ["role", "content", "finish", "done"]
    assert data["text"] == ["", MARKUP, "", ""]
    assert data["sse"][-1] == "data: [DONE]"
    assert all(len(line) <= 240 for line in data["sse"])
