"""KV cache page: the cache's shape and bytes, prefill vs decode time, and the prefix cache across chat turns.

``prepare`` computes its three measurements for a prompt outside any session (the warm route, ui.warm_pages).
"""

import streamlit as st

from charts.kv_cache import MIB, cache_growth, latency_chart, turns_chart
from charts.live_replay import kv_growth_data
from lifecycle.engine import shared_engine
from lifecycle.lessons.kv_cache import cache_against_weights, kv_cache_sentence, latency_sentence, prefill_in_ttft
from lifecycle.stages.kv_cache import (CacheMeasurement, KVCacheShape, LatencyPoint, cache_report, latency_report,
                                       point_for)
from lifecycle.model import LoadedModel
from lifecycle.features.multiturn import TurnUsage, replay_turns
from lifecycle.result_cache import Pending
from lifecycle.results import shared_results
from ui.cache import answered_prompt, per_prompt_cache
from ui.frame import lesson, loaded_model, show_text, stage_page
from ui.live_replay import live_replay
from ui.settings import JourneySettings
from ui.tables import fitted_table
from ui.when_idle import details_ready

DETAILS = "kv_cache_details"  # ui.when_idle: everything under the replay comes in the run after it is drawn
SWEEP = (16, 64, 256, 512)
DECODE_STEPS = 4
ROUNDS = 2  # each length timed twice, a sweep apart, the fastest kept: other work only adds time
FOLLOW_UPS = ("Can you say that more simply?", "Give me one example.")
TURN_TOKENS = 24
ColdPrefills = tuple[tuple[tuple[int, ...], float], ...]  # (prompt ids, seconds) pairs, hashable for the cache key


@per_prompt_cache
def measured_cache(ids: tuple[int, ...], _loaded: LoadedModel) -> CacheMeasurement:
    return cache_report(_loaded, ids)


@per_prompt_cache
def measured_latency(ids: tuple[int, ...], _loaded: LoadedModel) -> list[LatencyPoint]:
    return latency_report(_loaded, ids, sorted({*SWEEP, len(ids)}), DECODE_STEPS, ROUNDS)


@per_prompt_cache
def replayed(messages: tuple[str, ...], system: str, cold: ColdPrefills, _loaded: LoadedModel) -> list[TurnUsage]:
    return replay_turns(_loaded, messages, TURN_TOKENS, system or None, dict(cold))


def _own_prefill(ids: tuple[int, ...], points: list[LatencyPoint]) -> ColdPrefills:
    """The sweep's prefill of the prompt itself from scratch: the conversation's first turn sends these same ids,
    so the replay takes this time instead of prefilling them again (a 1,000-token prompt: seconds). It is part of
    the replay's key: a sweep measured again gives a replay that shows its time."""
    return ((ids, point_for(points, len(ids)).prefill_seconds),)


def _conversation(settings: JourneySettings) -> tuple[str, ...]:
    """The user turns of the conversation the prefix-cache section plays: the prompt, then the follow-ups."""
    return settings.prompt, *FOLLOW_UPS


def prepare(settings: JourneySettings, loaded: LoadedModel) -> None:
    """What this page computes for ``settings``, into the shared cache, one measurement after the other."""
    ids = tuple(shared_results(loaded).prepared(settings.journey_input()).rendered.ids)
    points = measured_latency(ids, loaded)
    measured_cache(ids, loaded)
    replayed(_conversation(settings), settings.system_prompt, _own_prefill(ids, points), loaded)


def kib(count: int) -> str:
    return f"{count / 1024:,.1f} KiB" if count < MIB else f"{count / MIB:,.2f} MiB"


def _first_turn_note(first: TurnUsage) -> str:
    """Why turn 1 already found tokens in the cache: this very prompt (the journey's), or a shared beginning."""
    if first.cached_tokens == 0:
        return ""
    if first.cached_tokens == first.prompt_tokens - 1:
        return (f" Even turn 1 found {first.cached_tokens:,} of its {first.prompt_tokens:,} tokens cached: the journey "
                "sent this very prompt a moment ago.")
    return (f" Even turn 1 found its first {first.cached_tokens:,} of {first.prompt_tokens:,} tokens cached: a prompt "
            "the server ran earlier began with the same tokens.")


def _arrived(pending: Pending, waiting: str):
    """The result of a computation started in the background; a spinner while it is still running."""
    if not pending.done():
        with st.spinner(waiting, show_time=True):
            return pending.result()
    return pending.result()


def render() -> None:
    with stage_page("kv-cache") as settings:
        prepared, answer = answered_prompt(settings)
        loaded = loaded_model()
        ids = prepared.rendered.ids
        latency = measured_latency.start(tuple(ids), loaded)  # the slow parts run while the first figure is drawn
        measuring = measured_cache.start(tuple(ids), loaded)
        shape = KVCacheShape.of(loaded.model)
        weight_bytes = shared_engine(loaded).stack.weight_bytes()
        generated = answer.generation.completion_tokens
        after = len(ids) + max(0, generated - 1)  # the last token is returned, never fed back
        ratio = shape.query_heads // shape.kv_heads
        lesson(kv_cache_sentence(len(ids), shape.bytes_for(len(ids)), shape.bytes_per_token, ratio))
        live_replay(kv_growth_data(shape.layers, shape.kv_heads, shape.query_heads, shape.head_dim, shape.bytes_per_number,
                                   loaded.context_window, weight_bytes,
                                   [("this prompt", len(ids)), ("after the answer", after),
                                    ("full window", loaded.context_window)]), key="kv_growth_replay")
        st.caption("Move the slider or jump to a mark: the bars are this model's cache at that length, the same cache "
                   "if every query head had its own keys and values, and the weights every decode step reads.")
        if not details_ready(DETAILS):
            return  # the rest comes in the run after the replay is drawn, while these measurements run
        measured = _arrived(measuring, "Measuring the real cache tensors of a prefill…")
        size_col, real_col, window_col = st.columns(3)
        size_col.metric("This prompt's cache", kib(shape.bytes_for(len(ids))),
                        help="layers x KV heads x head_dim x 2 x positions x bytes per number")
        real_col.metric("Measured tensors", kib(measured.total_bytes))
        window_col.metric("Full window", kib(shape.bytes_for(loaded.context_window)),
                          help=f"All {loaded.context_window:,} positions of the window, for one request: a server keeps "
                               "one such cache for every request it is decoding.")
        if measured.total_bytes != shape.bytes_for(len(ids)):
            st.error("The real cache differs from the formula: the model stores its cache differently.")
        with st.expander("The cache in detail: the formula, the real tensors and the growth to the whole window"):
            st.markdown(
                f"During prefill every one of the {shape.layers} layers computes a key and a value vector "
                f"({shape.head_dim} numbers) per key/value head for each of the prompt's {len(ids):,} tokens, and keeps "
                f"them: {shape.layers} layers x {shape.kv_heads} KV heads x {shape.head_dim} x 2 (K and V) x {len(ids):,} "
                f"positions x {shape.bytes_per_number} bytes = {kib(shape.bytes_for(len(ids)))}. Each generated token "
                f"then computes K and V for itself only and reads the rest from this cache, adding "
                f"{kib(shape.bytes_per_token)} per token; after this run's {generated} generated tokens it holds "
                f"{after:,} positions ({kib(shape.bytes_for(after))}). The {shape.query_heads} query heads share "
                f"{shape.kv_heads} key/value heads (grouped-query attention), so the cache is {ratio}x smaller than "
                f"with one K/V per head ({kib(shape.multi_head_bytes_per_token)} per token)."
            )
            reserved = min(len(ids) + settings.max_tokens, loaded.context_window)
            st.caption(
                f"\"Measured\" sums the {measured.tensors} key and value tensors of a real prefill of this prompt, each "
                f"key tensor shaped {measured.key_shape} (batch, KV heads, positions, head_dim). This app's engine "
                f"allocates a request's cache once, for the prompt plus max_tokens ({reserved:,} positions, "
                f"{kib(shape.bytes_for(reserved))}), so decoding never reallocates; large servers hand it out in "
                "fixed-size blocks instead (paged attention)."
            )
            st.plotly_chart(cache_growth(shape.bytes_per_token, shape.multi_head_bytes_per_token, loaded.context_window,
                                         [("this prompt", len(ids)), ("after the answer", after)]),
                            key="kv_growth", theme=None)

        st.subheader("Why the first token waits and the next ones do not", anchor=False)
        points = _arrived(latency, "Timing prefill and decode at several prompt lengths…")
        in_ttft = prefill_in_ttft(answer.stream_metrics.ttft, answer.generation.prefill_seconds,
                                  point_for(points, len(ids)).prefill_seconds)
        st.markdown(latency_sentence(points, len(ids), in_ttft) + " "
                    + cache_against_weights(len(ids), shape.bytes_per_token, weight_bytes, loaded.context_window))
        st.plotly_chart(latency_chart([p.prompt_tokens for p in points], [p.prefill_seconds * 1000 for p in points],
                                      [p.decode_fastest * 1000 for p in points], len(ids)), key="kv_latency", theme=None)
        st.caption(f"Measured now on this machine with the engine's own forward pass: each prompt (this one's tokens "
                   f"repeated to length) prefilled into an empty cache, then {DECODE_STEPS} greedy decode steps; "
                   f"{ROUNDS} rounds over every length, the fastest prefill and decode step shown. Other work on "
                   "the machine adds noise.")

        st.subheader("Prefix caching: the API forgets, the server remembers", anchor=False)
        messages = _conversation(settings)
        # Started only now, after the timings above, so the two measurements do not share the CPU.
        turns = _arrived(replayed.start(messages, settings.system_prompt, _own_prefill(tuple(ids), points), loaded),
                         f"Playing a {len(messages)}-turn conversation on the model…")
        last = turns[-1]
        st.markdown(
            f"The API is stateless: turn {last.turn} of this conversation sends all **{last.prompt_tokens:,} tokens** of "
            f"its history again, of which {last.repeated_tokens:,} repeat the previous request word for word. A server "
            f"with a prefix cache keeps recent prompts' KV caches and reads a repeated beginning from there instead of "
            f"recomputing it (always computing the last prompt token, whose logits it needs); the response reports "
            f"those tokens as `usage.prompt_tokens_details.cached_tokens`. Here the engine reported "
            f"**{last.cached_tokens:,}** cached tokens on turn {last.turn}; its prefill took "
            f"{last.prefill_seconds * 1000:,.0f} ms against {last.cold_prefill_seconds * 1000:,.0f} ms from scratch."
            + _first_turn_note(turns[0])
        )
        st.plotly_chart(turns_chart([t.turn for t in turns], [t.cached_tokens for t in turns],
                                    [t.prompt_tokens - t.cached_tokens for t in turns],
                                    [t.prefill_seconds * 1000 for t in turns], [t.cold_prefill_seconds * 1000 for t in turns]),
                        key="kv_turns", theme=None)
        fitted_table(
            {
                "turn": [t.turn for t in turns],
                "sent": [t.prompt_tokens for t in turns],
                "repeated": [t.repeated_tokens for t in turns],
                "cached_tokens": [t.cached_tokens for t in turns],
                "prefill (ms)": [round(t.prefill_seconds * 1000, 1) for t in turns],
                "from scratch (ms)": [round(t.cold_prefill_seconds * 1000, 1) for t in turns],
                "saved (ms)": [round(t.saved_seconds * 1000, 1) for t in turns],
            },
            {"turn": "turn", "sent": "sent", "cached_tokens": "cached", "prefill (ms)": "prefill (ms)",
             "saved (ms)": "saved (ms)"},
            key="kv_turns", full_from=640, hide_index=True,
            narrow_widths={"turn": 45, "sent": 55, "cached": 65, "prefill (ms)": 85, "saved (ms)": 80},
        )
        st.caption("Per turn: prompt tokens sent, how many repeat the previous request exactly, how many the engine "
                   "served from its prefix cache (`cached_tokens`), and the prefill as served against the same prompt "
                   "prefilled from scratch, both measured (turn 1's from scratch is this prompt's point in the timings "
                   "above: the same ids, timed once).")
        with st.expander("The conversation (greedy answers, at most "
                         f"{TURN_TOKENS} tokens each)"):
            for turn in turns:
                st.caption(f"Turn {turn.turn}: user")
                show_text(turn.message)
                st.caption(f"Turn {turn.turn}: assistant")
                show_text(turn.answer)
