"""The app's start: ``/health`` turns 200 once the engine is built, and the work only later requests
need (the chat template's prefill, the vocabulary's byte table, the Hugging Face model the pages hook)
is done right after, in the same loader thread, instead of holding the class's first calls back."""

import threading

from lifecycle import serving
from lifecycle.serving import ModelStatus


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
