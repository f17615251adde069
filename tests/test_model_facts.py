"""Model facts come from the model: on a truncated copy of the real model (its first layers, a shorter
window in its config) every page and the API run and state that copy's numbers, never SmolLM2's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.truncated_model import LAYERS, REAL_FACTS, WINDOW, save_truncated_model

ROOT = Path(__file__).resolve().parents[1]
RUN_SECONDS = 900  # every page and the API in a fresh process, on a busy 2-core machine
# The Context window page's hosted-model presets, which name 8k on purpose.
PRESET = re.compile(r"^\d+k preset \([\d,]+\)$")
# Times measured on this machine, which can read 8,192 µs by chance (a kernel timed at start, in CI).
TIMING = re.compile(r"\d[\d,./]*\s*(?:µs|ms)")


def real_facts_in(text: str) -> bool:
    """Whether ``text`` states one of SmolLM2's own layer, head or window counts (measured times aside)."""
    return not PRESET.match(text) and any(fact in TIMING.sub("", text) for fact in REAL_FACTS)


@pytest.fixture(scope="module")
def truncated_run(loaded, tmp_path_factory) -> dict:
    """What every page and the API showed in a process whose LIFECYCLE_MODEL is the truncated copy."""
    folder = save_truncated_model(loaded.source, tmp_path_factory.mktemp("truncated-model"))
    # PyTorch on this worker's share of the cores, as the worker itself (tests/conftest.py): on the default two
    # threads, beside the other workers, it took 21.4 s of CPU against 18.4 s on one (two busy loops beside it).
    threads = str(torch.get_num_threads())
    env = {**os.environ, "LIFECYCLE_CALL_LOG": str(folder.parent / "calls.sqlite3"), "PYTHONPATH": str(ROOT),
           "LIFECYCLE_TORCH_THREADS": threads, "LIFECYCLE_ROOM_THREADS": threads}
    done = subprocess.run([sys.executable, "-m", "tests.truncated_model", str(folder)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=RUN_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["model"] == {"name": str(folder), "layers": LAYERS, "window": WINDOW}
    return report


def test_a_measured_time_is_not_a_model_fact_but_the_window_is():
    assert not real_facts_in("oneDNN 8,192 µs; at 2/4 rows: 8,192/9,001 µs; 8192 ms")
    assert real_facts_in("oneDNN 8,192 µs, and all 8,192 positions of the window")
    assert real_facts_in("30 layers of 9 heads")
    assert not real_facts_in("8k preset (8,192)")


def _page(report: dict, name: str) -> str:
    return "\n".join(report["pages"][name]["text"])


def test_every_page_runs_on_the_truncated_model(truncated_run):
    from ui.stages import STAGES

    assert list(truncated_run["pages"]) == ["home", *[stage.url_path for stage in STAGES]]
    for name, page in truncated_run["pages"].items():
        assert page["exceptions"] == [] and page["errors"] == [], name


def test_no_page_states_the_real_models_layers_or_window(truncated_run):
    stated = {name: [text for text in page["text"] if real_facts_in(text)]
              for name, page in truncated_run["pages"].items()}
    assert {name: texts for name, texts in stated.items() if texts} == {}


def test_the_pages_state_the_truncated_models_own_numbers(truncated_run):
    home = _page(truncated_run, "home")
    assert f"{LAYERS} layers," in home and f"a context window of {WINDOW:,} tokens" in home
    assert re.search(rf"tokens in all \(\d+ added by the template\) of {WINDOW:,}", home)
    assert f"In each of its **{LAYERS} layers**" in _page(truncated_run, "attention")
    assert f"pass through **{LAYERS} blocks**" in _page(truncated_run, "forward-pass")
    assert f"All {WINDOW:,} positions of the window" in _page(truncated_run, "kv-cache")
    context = _page(truncated_run, "context-window")
    assert f"trained on up to {WINDOW:,} positions" in context and f"The model's own ({WINDOW:,})" in context


def test_the_api_serves_the_truncated_model_and_refuses_past_its_window(truncated_run):
    api = truncated_run["api"]
    name = truncated_run["model"]["name"]
    assert [model["id"] for model in api["models"]["data"]] == [name]
    assert api["short"]["status"] == 200 and api["short"]["body"]["model"] == name
    error = api["long"]["body"]["error"]
    assert api["long"]["status"] == 400 and error["code"] == "context_length_exceeded"
    assert f"maximum context length is {WINDOW} tokens" in error["message"]
