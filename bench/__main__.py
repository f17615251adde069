"""Benchmarks of the lifecycle on this machine, printed with their targets.

Targets (issue #2): start from the converted cache <= 3 s to the first forward pass; a sampling
transform <= 5 ms on the 49,152-token vocabulary; the step loop >= 0.8x ``model.generate``
tokens/s. The "room" section (bench/room.py) measures the engine for a class at once.
Cold starts run in fresh subprocesses; everything else in this process.
The "pages" section opens every page of ``streamlit run app.py`` in Debian's chromium (bench/browser_timings.py).
``python -m bench room`` (or ``pages``) runs one section.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile

from bench import room
from bench.report import check, heading, median_seconds, row

from bench.browser import slider_rows

COLD_START = """
import time
started = time.perf_counter()
import torch
import transformers
from lifecycle.engine import shared_engine
from lifecycle.model import load_model
imported = time.perf_counter()
loaded = load_model()
with torch.inference_mode():
    shared_engine(loaded).run(lambda model: model(torch.tensor([[1, 2, 3]])))
print(imported - started, time.perf_counter() - imported, loaded.from_cache)
"""


def cold_start(cache_dir: str) -> tuple[float, float, bool]:
    """(seconds importing torch and transformers, seconds from there to the first forward pass, cache used)."""
    env = {**os.environ, "LIFECYCLE_CACHE_DIR": cache_dir, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", COLD_START], env=env, capture_output=True, text=True, check=True)
    imports, ready, from_cache = out.stdout.split()
    return float(imports), float(ready), from_cache == "True"


def main() -> None:
    """``python -m bench`` runs every section; ``python -m bench room`` only the room."""
    from lifecycle.model import shared_model

    sections = sys.argv[1:] or ["lifecycle", "room", "pages"]
    if "pages" in sections:  # first, while this process holds no model: the app's server is measured alone
        pages_section()
    if sections == ["pages"]:
        return
    _on_a_passing_thread(shared_model)
    if "lifecycle" in sections:
        _on_a_passing_thread(lifecycle_section)
    if "room" in sections:
        _on_a_passing_thread(lambda: room.main(shared_model()))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row("peak RSS of this process (MiB)", f"{peak_mib:.0f}", "(app budget 2,700)")


def _on_a_passing_thread(work):
    """Run ``work`` in a thread that then ends, as the app runs a page's script (a session's script thread), and
    return what it returned.

    A thread that runs PyTorch work keeps its own OpenMP threads while it lives. Had this main thread loaded the
    model, or run the lifecycle section's passes, its idle OpenMP thread and the engine's would outnumber two
    cores, and OpenMP then parks its threads between the ~450 small parallel regions of a decode step instead of
    spinning. Measured on 7 Dec 2026 (Zen 5): one stream's decode step took 14.3 ms after a few matrix products in
    this main thread, against 7.4-7.7 ms without them or with them in a thread that had ended; 43 ms against 35 ms
    on an earlier machine."""
    import threading

    failed: list[BaseException] = []
    result = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as error:  # raised again in the calling thread: the bench stops as it would have
            failed.append(error)

    thread = threading.Thread(target=run, name="bench-section")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return result[0]


def app_start_rows(starts: int = 3) -> None:
    """``streamlit run app.py`` as the README starts it, to Streamlit answering and to ``/health`` 200
    (the model loaded from the cache, the engine built, the chat template's prefill queued as its first
    job): the median of ``starts``."""
    from statistics import median

    from bench.app_server import AppServer

    def started(ready: str) -> float:
        with AppServer(ready=ready) as server:
            return server.ready_seconds

    answering = median(started("/_stcore/health") for _ in range(starts))
    ready = median(started("/health") for _ in range(starts))
    row("streamlit run app.py -> Streamlit answers (s)", f"{answering:.2f}")
    row("streamlit run app.py -> /health 200 (s)", f"{ready:.2f}", "<= 3 s", check(ready <= 3))


def pages_section() -> None:
    """Every page's open time in chromium against ``streamlit run app.py``, both started once here (the
    browser as tests/browser/conftest.py starts it: Debian's chromium, never a downloaded build)."""
    from playwright.sync_api import sync_playwright

    from bench.app_server import AppServer
    from bench.browser_timings import (browser_control_rows, forward_tab_rows, fragment_rows,
                                        generation_kv_streaming_rows, measure_instant_controls, page_open_rows,
                                        page_switch_rows)
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

    heading("pages: open time in chromium (1366x768, warm prompt)")
    row("benchmark", "measured", "target", "")
    with AppServer() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name, figure, target in page_open_rows(server.url, browser):
                row(name, figure, target, _verdict(figure, target))
            heading("pages: switched to inside one session (a sidebar link; 1366x768, warm prompt)")
            for name, figure, target in page_switch_rows(server.url, browser):
                row(name, figure, target, _verdict(figure, target))
            heading("pages: the Forward pass page's step tabs (one session, 1366x768, warm prompt)")
            for name, figure, target in forward_tab_rows(server.url, browser):
                row(name, figure, target, _verdict(figure, target))
        finally:
            browser.close()
    heading("pages: controls redrawn in the browser (tests/browser/test_instant_*.py, run alone just now)")
    measure_instant_controls()
    for name, figure, target in browser_control_rows() + fragment_rows() + generation_kv_streaming_rows():
        row(name, figure, target, _verdict(figure, target))


def _verdict(figure: str, target: str) -> str:
    """A check mark for a row whose target reads "<= N ms" or "<= N s"; empty for the rest."""
    if figure == "-" or not target.startswith("<= "):
        return ""
    return check(float(figure.replace(",", "")) <= float(target.split()[1]))


def lifecycle_section() -> None:
    import numpy as np
    import torch

    from lifecycle.stages.context_window import Conversation, render_prompt
    from lifecycle.engine import shared_engine
    from lifecycle.stages.forward_pass import run_forward
    from lifecycle.stages.generation import generate
    from lifecycle.model import shared_model
    from lifecycle.stages.sampling import SamplingSettings, apply_sampling

    heading("lifecycle: start, forward pass, sampling, step loop")
    print(f"torch threads: {torch.get_num_threads()}, cores: {os.cpu_count()}")
    row("benchmark", "measured", "target", "")
    with tempfile.TemporaryDirectory() as empty:
        _, converting, _ = cold_start(empty)
        row("start with GGUF conversion -> first forward (s)", f"{converting:.2f}", "(reference ~27)")
        imports, cached, from_cache = cold_start(empty)
        row("start from the cache -> first forward (s)", f"{cached:.2f}", "<= 3 s", check(cached <= 3 and from_cache))
        row("  conversion / cache ratio", f"{converting / cached:.1f}x")
        row("  (import torch + transformers first, s)", f"{imports:.2f}")
    app_start_rows()

    loaded = shared_model()
    vocab = loaded.vocab_size
    for length in (32, 128, 512):
        ids = [int(i) for i in np.random.default_rng(0).integers(100, vocab, length)]
        # Each measurement whose own thread runs PyTorch (here, the attention maps' arithmetic) runs on a thread of
        # its own, so the step loop below is not slowed by this thread's idle OpenMP team.
        seconds = _on_a_passing_thread(lambda: median_seconds(lambda: run_forward(
            loaded, ids, layers=None if length <= 128 else [0, 15, 29], max_attention_tokens=length), 3))
        row(f"forward + attentions, {length} tokens (ms)", f"{seconds * 1000:.0f}")

    logits = np.random.default_rng(1).normal(0, 3, vocab).astype(np.float32)
    chain = SamplingSettings(temperature=0.8, top_k=50, top_p=0.9, min_p=0.05, repetition_penalty=1.1)
    previous = list(range(0, 400, 7))
    sample_ms = _on_a_passing_thread(lambda: median_seconds(lambda: apply_sampling(logits, chain, previous), 50)) * 1000
    row("sampling transform, full chain (ms)", f"{sample_ms:.2f}", "<= 5 ms", check(sample_ms <= 5))

    prompt = render_prompt(Conversation("Write a short poem about the sea.")).ids
    new_tokens = 48
    greedy = SamplingSettings(temperature=0.0)
    loop_s = median_seconds(lambda: generate(loaded, prompt, greedy, new_tokens), 3)
    ids = torch.tensor([prompt])

    def hf_generate(model):
        with torch.inference_mode():
            return median_seconds(lambda: model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new_tokens,
                min_new_tokens=new_tokens, pad_token_id=loaded.eos_token_id), 3)

    hf_s = shared_engine(loaded).run(hf_generate)
    steps = len(generate(loaded, prompt, greedy, new_tokens).steps)
    loop_tps, hf_tps = steps / loop_s, new_tokens / hf_s
    row("step loop (tokens/s, incl. prefill)", f"{loop_tps:.1f}")
    row("model.generate (tokens/s, incl. prefill)", f"{hf_tps:.1f}")
    row("  step loop / model.generate", f"{loop_tps / hf_tps:.2f}x", ">= 0.8x", check(loop_tps / hf_tps >= 0.8))

    from bench.grammar import rows as grammar_rows

    for name, value, target, verdict in _on_a_passing_thread(lambda: grammar_rows(loaded)):
        row(name, value, target, verdict)

    from lifecycle.stages.block import open_block

    traced = [int(i) for i in np.random.default_rng(2).integers(100, vocab, 128)]
    plain_s = _on_a_passing_thread(lambda: median_seconds(lambda: run_forward(loaded, traced, layers=[]), 3))
    block_s = _on_a_passing_thread(lambda: median_seconds(
        lambda: open_block(loaded, traced, loaded.num_layers // 2, len(traced) - 1), 3))
    row("Forward pass page: hooked block trace, 128 tokens (ms)", f"{block_s * 1000:.0f}")
    row("  hooked trace / plain forward", f"{block_s / plain_s:.2f}x", "<= 1.5x", check(block_s / plain_s <= 1.5))

    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row("peak RSS of this process (MiB)", f"{peak_mib:.0f}", "(app budget 2,700)")

    for name, value, target, verdict in slider_rows():
        row(name, value, target, verdict)


if __name__ == "__main__":
    main()
