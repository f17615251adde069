"""The "room" section: what one server gives a class of users at once, measured in one run.

Engine part (issue #9, #8): a single stream against plain ``model.generate``; throughput and
time to first token / to completion for 1, 8 and 30 concurrent distinct prompts (48 tokens each);
the prefill of a 2,000-token prompt; what the prefix cache saves on a re-sent conversation.
Further parts (e.g. simulated browser sessions) add a function to ``PARTS``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from bench.report import check, heading, percentile, row
from bench.gaps import gaps_part
from bench.sessions import sessions_part

NEW_TOKENS = 48
CONCURRENCY = (1, 8, 30)
LONG_PROMPT_TOKENS = 2000
TOPICS = [
    "the ocean", "volcanoes", "honey bees", "the moon", "glaciers", "owls", "deserts", "rainbows", "octopuses",
    "the Roman Empire", "jazz", "chess", "coffee", "penguins", "thunderstorms", "bridges", "tea", "comets",
    "rivers", "mushrooms", "the printing press", "trains", "whales", "maps", "clocks", "bicycles", "salt",
    "forests", "lighthouses", "kites", "paper", "glass", "bread", "wolves", "coral reefs", "sundials", "violins",
    "tides", "cheese", "eagles", "caves", "islands", "windmills", "the alphabet", "snow", "ants", "telescopes",
    "dolphins", "castles", "silk", "pyramids", "libraries", "marathons", "puzzles", "lanterns", "origami",
    "hurricanes", "tulips", "zebras", "gardens", "submarines", "the compass", "rockets", "bamboo", "pottery",
    "frogs", "opera", "the desert fox", "canals", "spices",
]


@dataclass
class Timed:
    """One request of a concurrent run: when its first and last tokens arrived, how many tokens."""

    first: float = 0.0
    last: float = 0.0
    tokens: int = 0


def _chat_ids(loaded, text: str) -> list[int]:
    from lifecycle.stages.context_window import Conversation, render_prompt

    return render_prompt(Conversation(text)).ids


def _engine_seconds(loaded, prompt: list[int], tokens: int) -> float:
    """Wall seconds for the engine to prefill ``prompt`` and choose ``tokens`` tokens greedily
    (an argmax step callable that ignores end-of-sequence, like ``min_new_tokens``)."""
    from lifecycle.engine import EngineRequest, shared_engine

    started = time.perf_counter()
    handle = shared_engine(loaded).submit(EngineRequest(prompt, tokens, lambda logits: int(logits.argmax()), label="bench"))
    handle.done.wait()
    return time.perf_counter() - started


def _hf_seconds(loaded, prompt: list[int], tokens: int) -> float:
    """Wall seconds of plain ``model.generate`` for the same work (greedy, exactly ``tokens`` tokens)."""
    from lifecycle.engine import shared_engine

    def job(model):
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            started = time.perf_counter()
            model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=tokens,
                           min_new_tokens=tokens, pad_token_id=loaded.eos_token_id)
            return time.perf_counter() - started

    return shared_engine(loaded).run(job)


def single_stream(loaded) -> None:
    """One request alone: the engine against ``model.generate``, three alternating runs each (so load
    on a shared machine hits both alike), medians; prompt + 48 greedy tokens, prefill included."""
    prompt = _chat_ids(loaded, "Write a long story about a dragon who learns to read.")
    engine_runs, hf_runs = [], []
    for _ in range(3):
        engine_runs.append(_engine_seconds(loaded, prompt, NEW_TOKENS))
        hf_runs.append(_hf_seconds(loaded, prompt, NEW_TOKENS))
    engine_rate = NEW_TOKENS / sorted(engine_runs)[1]
    hf_rate = NEW_TOKENS / sorted(hf_runs)[1]
    row("single stream, engine (tokens/s)", f"{engine_rate:.1f}")
    row("single stream, model.generate (tokens/s)", f"{hf_rate:.1f}")
    row("  engine / model.generate", f"{engine_rate / hf_rate:.2f}x", ">= 2.0x", check(engine_rate / hf_rate >= 2.0))
    step = _lone_decode_step_seconds(loaded)
    dense, packed = _weight_bytes(loaded)
    row("  engine decode step alone (ms)", f"{step * 1000:.1f}",
        f"(reads {packed / 1e6:.0f} MB packed, {dense / 1e6:.0f} MB as fp32: {packed / step / 1e9:.1f} GB/s)"
        if packed else f"(reads {dense / 1e6:.0f} MB of fp32 weights: {dense / step / 1e9:.1f} GB/s)")
    reading = _read_all_weights_seconds(loaded)
    row("  summing the fp32 weights once (ms)", f"{reading * 1000:.1f}",
        f"(this machine reads {dense / reading / 1e9:.1f} GB/s: no fp32 step beats {1 / reading:.0f} tokens/s; "
        f"2x model.generate needs {2 * hf_rate:.0f})")


def _lone_decode_step_seconds(loaded) -> float:
    """Median seconds of the engine's model steps that decoded one token of one request (the bench's
    own single-stream runs just above)."""
    from lifecycle.engine import shared_engine

    steps = [s.seconds for s in shared_engine(loaded).state().steps
             if s.batch_size == 1 and s.decode_tokens == 1 and s.prefill_tokens == 0]
    return float(np.median(steps))


def _read_all_weights_seconds(loaded) -> float:
    """Median seconds to read every matrix of a decode step once (a sum: the memory's own speed), in the
    engine's thread with its threads."""
    from lifecycle.engine import shared_engine

    engine = shared_engine(loaded)
    matrices = engine.stack.matrices()

    def job(_model) -> float:
        with torch.inference_mode():
            started = time.perf_counter()
            for matrix in matrices:
                matrix.sum()
            return time.perf_counter() - started

    return float(np.median([engine.run(job) for _ in range(5)]))


def _weight_bytes(loaded) -> tuple[int, int]:
    """Bytes of the matrices one decode step reads (every layer's, and the head's): as fp32, and as the
    engine reads them, packed codes where the kernel measured fastest reads them (0 where it reads fp32 only)."""
    from lifecycle.engine import shared_engine

    stack = shared_engine(loaded).stack
    dense = sum(m.numel() * m.element_size() for m in stack.matrices())
    read = stack.weight_bytes()
    return dense, read if read < dense else 0


def concurrent(loaded, prompts: list[list[int]]) -> tuple[float, list[Timed], float]:
    """Run the prompts at once through the full generation path; (tokens/s in all, per request, wall s)."""
    from lifecycle.stages.generation import generate_steps
    from lifecycle.stages.sampling import SamplingSettings

    timed = [Timed() for _ in prompts]
    gate = threading.Barrier(len(prompts) + 1)

    def one(i: int) -> None:
        gate.wait()
        for step in generate_steps(loaded, prompts[i], SamplingSettings(temperature=0.7, seed=i), NEW_TOKENS):
            now = time.perf_counter()
            timed[i].first = timed[i].first or now
            timed[i].last, timed[i].tokens = now, timed[i].tokens + 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    gate.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    for t in timed:
        t.first -= started
        t.last -= started
    return sum(t.tokens for t in timed) / wall, timed, wall


def room_of(loaded) -> None:
    """Rows for 1, 8 and 30 concurrent distinct prompts, after the engine has timed its few-row products (once
    per engine, one product at a time after its first work: a server that has served anyone has done it)."""
    from lifecycle.engine import shared_engine

    stack = shared_engine(loaded).stack
    if stack.choice is not None:
        stack.few_rows()
        timed = stack.choice.few_rows_seconds * 1000
        most = max((s.packed_up_to for s in stack.choice.shapes), default=1)
        row("few-row products timed against oneDNN, once (ms)", f"{timed:.0f}", f"(packed codes up to {most} rows)")
    topics = iter(TOPICS)
    rates = {}
    for n in CONCURRENCY:
        prompts = [_chat_ids(loaded, f"Tell me three surprising facts about {next(topics)}.") for _ in range(n)]
        rate, timed, wall = concurrent(loaded, prompts)
        rates[n] = rate
        firsts, lasts = [t.first for t in timed], [t.last for t in timed]
        tokens = sum(t.tokens for t in timed)
        row(f"{n} concurrent: throughput (tokens/s in all)", f"{rate:.1f}", f"({tokens} tokens in {wall:.1f} s)")
        row("  time to first token p50 / p95 (s)", f"{percentile(firsts, 50):.2f} / {percentile(firsts, 95):.2f}")
        row("  time to completion p50 / p95 (s)", f"{percentile(lasts, 50):.2f} / {percentile(lasts, 95):.2f}")
    ratio = rates[CONCURRENCY[-1]] / rates[CONCURRENCY[0]]
    row(f"  {CONCURRENCY[-1]} concurrent / 1 (throughput)", f"{ratio:.1f}x", ">= 5x", check(ratio >= 5))


def _hf_sdpa_prefill(loaded, ids: list[int]) -> float:
    """Seconds of one plain forward pass over ``ids`` with transformers' SDPA attention (the
    reference the chunked prefill is compared with), the logits of the last position only."""
    from lifecycle.engine import shared_engine

    def job(model):
        model.set_attn_implementation("sdpa")
        try:
            with torch.inference_mode():
                started = time.perf_counter()
                model(torch.tensor([ids]), use_cache=False, logits_to_keep=1)
                return time.perf_counter() - started
        finally:
            model.set_attn_implementation("eager")

    return shared_engine(loaded).run(job)


def long_prefill(loaded) -> None:
    """A 2,000-token prompt (random ids, so nothing is cached): its chunked prefill time, against
    one unchunked SDPA pass of the same model, then the same prompt re-sent (prefix cache)."""
    from lifecycle.engine import EngineRequest, shared_engine

    engine = shared_engine(loaded)
    ids = [int(i) for i in np.random.default_rng(2).integers(100, loaded.vocab_size, LONG_PROMPT_TOKENS)]
    cpu = time.process_time()
    handle = engine.submit(EngineRequest(ids, 1, lambda logits: None, label="bench"))
    handle.done.wait()
    cpu = time.process_time() - cpu
    seconds = handle.prefill_seconds
    row(f"prefill of a {LONG_PROMPT_TOKENS:,}-token prompt (s)", f"{seconds:.2f}", "<= 8 s", check(seconds <= 8))
    row("  its CPU time, all threads (s)", f"{cpu:.2f}")
    reference = _hf_sdpa_prefill(loaded, ids)
    row("  one unchunked transformers SDPA pass (s)", f"{reference:.2f}")
    row("  engine chunked / one SDPA pass", f"{seconds / reference:.2f}x")
    repeat = engine.submit(EngineRequest(ids + ids[:10], 1, lambda logits: None, label="bench"))
    repeat.done.wait()
    row("  same prompt re-sent + 10 tokens: prefill (s)", f"{repeat.prefill_seconds:.3f}",
        f"({repeat.cached_tokens:,} cached)")


def engine_part(loaded) -> None:
    from lifecycle.engine import shared_engine

    engine = shared_engine(loaded)
    row("engine: max batch / prefill chunk (tokens)", f"{engine.max_batch} / {engine.prefill_chunk}")
    single_stream(loaded)
    room_of(loaded)
    long_prefill(loaded)
    stats = engine.state().prefix_cache
    row("prefix cache: entries / MiB / hits", f"{stats.entries} / {stats.bytes / 2**20:.0f} / {stats.hits}",
        f"(budget {stats.budget_bytes / 2**20:.0f} MiB)")


PARTS = [engine_part, sessions_part, gaps_part]


def main(loaded) -> None:
    heading("room: one server, a class of users")
    for part in PARTS:
        part(loaded)
