"""The app's start: ``/health`` turns 200 once the engine is built, and the work only later requests
need (the chat template's prefill, with the vocabulary's byte table, and the Hugging Face model the
pages hook) is done right after, in the same loader thread, instead of holding the class's first calls
back; and the modules the start imports leave out what only later work needs (an HTTP client,
transformers)."""

import os
import subprocess
import sys
import threading
from pathlib import Path

from lifecycle.api import serving
from lifecycle.errors import LifecycleError
from lifecycle.api.serving import ModelStatus

ROOT = Path(__file__).resolve().parents[1]


class HeldPrime:
    """Stands in for the priming job's handle: ``wait`` blocks until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waited = threading.Event()

    def wait(self) -> None:
        self.waited.set()
        assert self.release.wait(30), "the test never released the prime"


def test_health_is_ready_before_the_prime_and_the_deferred_work_follows(loaded, monkeypatch):
    held = HeldPrime()
    engine = serving.shared_engine(loaded)
    built: list[str] = []
    ready_when: list[str] = []

    def head() -> list[int]:
        ready_when.append(serving.model_status().state)
        return [1, 2]

    monkeypatch.setattr(engine, "prime", lambda ids, label: built.append(f"prime {label} {ids}") or held)
    monkeypatch.setattr(serving, "shared_head", head)
    monkeypatch.setattr(serving, "_status", ModelStatus("loading", loaded.name))
    monkeypatch.setattr(loaded, "hf_model", None)  # as at a start: the loader builds it last

    loader = threading.Thread(target=serving._load, daemon=True)
    loader.start()
    assert held.waited.wait(30), "the loader never reached the prime"
    assert ready_when == ["ready"]  # the template's head is rendered after /health turns 200
    assert serving.model_status().state == "ready"  # while its prefill is still queued
    assert built == ["prime chat template [1, 2]"]
    assert serving.pages_state() == "loading"  # /health says so: a class should not arrive yet
    held.release.set()
    loader.join(60)
    assert not loader.is_alive()
    assert serving.model_status().state == "ready"
    assert loaded.hf_model is not None  # the pages' hooked model is built after the prime
    assert serving.pages_state() == "ready"


def test_work_for_the_pages_runs_in_the_loader_before_they_are_said_ready(loaded, monkeypatch):
    """What app.py registers (its pages' imports) runs last in the loader, /health's "pages" saying "loading" until
    it is done; a failing piece is logged and the rest runs; one registered after the loader runs at once."""
    monkeypatch.setattr(serving, "_status", ModelStatus("loading", loaded.name))
    monkeypatch.setattr(serving, "_page_work", [])
    monkeypatch.setattr(serving, "_page_work_done", [])
    monkeypatch.setattr(serving, "_loader_done", False)
    seen = []

    def failing() -> None:
        raise ImportError("a page's module is broken")

    def work() -> None:
        seen.append((threading.current_thread().name, loaded.hf_model is not None, serving.pages_state()))

    for registered in (failing, work, work):
        serving.before_pages_ready(registered)
    assert seen == [] and serving.pages_state() == "loading"
    loader = threading.Thread(target=serving._load, name=serving.LOADER_THREAD, daemon=True)
    loader.start()
    loader.join(120)
    assert seen == [(serving.LOADER_THREAD, True, "loading")]  # once, after the hooked model, before "ready"
    assert serving.pages_state() == "ready"
    late = []
    serving.before_pages_ready(lambda: late.append((threading.current_thread().name, serving.pages_state())))
    assert late == [(threading.current_thread().name, "ready")]
    serving.before_pages_ready(work)
    assert len(seen) == 1


def test_pages_say_failed_when_their_model_cannot_be_built(loaded, monkeypatch):
    from lifecycle.engine import checkpoint

    def unbuildable(*_args):
        raise RuntimeError("no modeling code for this architecture")

    monkeypatch.setattr(checkpoint, "hugging_face_model", unbuildable)
    monkeypatch.setattr(loaded, "hf_model", None)
    monkeypatch.setattr(serving, "_pages_failed", False)
    monkeypatch.setattr(serving, "_status", ModelStatus("loading", loaded.name))
    serving._load()
    assert serving.model_status().state == "ready"  # the API serves without the pages' model
    assert serving.pages_state() == "failed"


def test_a_template_the_app_cannot_render_fails_the_load_after_ready(loaded, monkeypatch):
    def head() -> list[int]:
        raise LifecycleError("SmolLM2 has no ChatML markers; only ChatML templates are supported.")

    monkeypatch.setattr(serving, "shared_head", head)
    monkeypatch.setattr(serving, "_status", ModelStatus("loading", loaded.name))
    serving._load()
    status = serving.model_status()
    assert status.state == "failed" and "only ChatML templates are supported" in status.error


def test_the_start_from_the_copy_never_imports_transformers():
    """The model, its tokenizer, the engine and the template's prefill come up without transformers
    (~0.7 s of a 3 s start: its import and its tokenizer class); only the pages' hooked model imports it."""
    script = ("import sys; from lifecycle.model import shared_model; from lifecycle.api import serving; "
              "loaded = shared_model(); serving.shared_engine(loaded).prime(serving.shared_head()).wait(); "
              "print(type(loaded.tokenizer).__name__, 'transformers' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["ModelTokenizer", "False"]


def test_the_apps_start_imports_no_http_client():
    """What ``streamlit run app.py`` imports before the model loads (the API's routes and the warm
    route) holds no HTTP client: httpx and what it pulls in (rich, pygments) cost ~0.1-0.4 s of a
    start that must stay under 3 s, and only a remote engine, a remote page or ``lifecycle warm`` uses it."""
    script = ("import sys; import lifecycle.api.routes, lifecycle.api.warm_route, ui.deployment, ui.settings; "
              "print(sorted(m for m in ('httpx', 'rich', 'pygments') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
