"""The app's start: ``/health`` turns 200 once the engine is built, and the work only later requests
need (the chat template's prefill, the vocabulary's byte table, the Hugging Face model the pages hook)
is done right after, in the same loader thread, instead of holding the class's first calls back; and
the modules the start imports leave out what only later work needs."""

import os
import subprocess
import sys
import threading
from pathlib import Path

from lifecycle import serving
from lifecycle.serving import ModelStatus

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
    monkeypatch.setattr(engine, "prime", lambda ids, label: built.append(f"prime {label}") or held)
    monkeypatch.setattr(serving, "token_bytes", lambda model: built.append("byte table"))
    monkeypatch.setattr(serving, "_status", ModelStatus("loading", loaded.name))

    loader = threading.Thread(target=serving._load, daemon=True)
    loader.start()
    assert held.waited.wait(30), "the loader never reached the prime"
    assert serving.model_status().state == "ready"  # while the template's prefill is still queued
    assert built == ["prime chat template", "byte table"]
    held.release.set()
    loader.join(30)
    assert not loader.is_alive()
    assert serving.model_status().state == "ready"
    assert loaded.hf_model is not None  # the pages' hooked model is built after the prime


def test_the_apps_start_imports_no_http_client():
    """What ``streamlit run app.py`` imports before the model loads (the API's routes and the warm
    route) holds no HTTP client: httpx and what it pulls in (rich, pygments) cost ~0.1-0.4 s of a
    start that must stay under 3 s, and only a remote engine, a remote page or ``lifecycle warm`` uses it."""
    script = ("import sys; import lifecycle.server.routes, ui.deployment, ui.warm; "
              "print(sorted(m for m in ('httpx', 'rich', 'pygments') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
