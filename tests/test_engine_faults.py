"""The engine cannot take the class down: a dying or stuck scheduler fails what it held with a clear
error, a new engine takes over, every wait has a deadline, long requests are admitted against memory,
and a long inspection pass lets decoding streams run between its layers."""

import threading
import time

import pytest

from lifecycle.engine import EngineRequest, EngineTimeout, EngineUnavailable, RequestTooLarge, shared_engine
from lifecycle.engine import scheduler
from lifecycle.engine.layered import layered_forward
from lifecycle.stages.generation import generate
from lifecycle.stages.sampling import SamplingSettings
from tests.sdk_server import api_server, base_url, sdk  # noqa: F401
from tests.test_engine import Paused, chat_ids, hf_greedy

GREEDY = SamplingSettings(temperature=0)


class Crash(BaseException):
    """Not an Exception: what no ``except Exception`` in the scheduler catches (like SystemExit)."""


def greedy_request(ids, max_tokens):
    return EngineRequest(ids, max_tokens, lambda logits: int(logits.argmax()))


def test_a_dying_scheduler_fails_every_held_request_and_a_new_engine_takes_over(loaded, monkeypatch):
    old = shared_engine(loaded)
    ids = chat_ids(loaded, "Name a colour.")

    with Paused(old):
        handles = [old.submit(greedy_request(ids, 8)) for _ in range(3)]
        monkeypatch.setattr(old.stack, "forward", _crash)
    for handle in handles:
        assert handle.done.wait(60)
        assert isinstance(handle.error, EngineUnavailable)
        assert "Crash" in str(handle.error) and "takes over" in str(handle.error)
    assert old.problem() is not None
    with pytest.raises(EngineUnavailable):
        old.submit(greedy_request(ids, 2))
    new = shared_engine(loaded)
    assert new is not old and new.problem() is None
    assert generate(loaded, ids, GREEDY, 6).token_ids == hf_greedy(loaded, ids, 6)


def test_a_generation_waiting_on_a_dead_engine_raises_instead_of_hanging(loaded, monkeypatch):
    engine = shared_engine(loaded)
    monkeypatch.setattr(scheduler, "_take_over", lambda _loaded: None)  # see the dead engine, not its heir
    ids = chat_ids(loaded, "Count to three.")
    errors: list[BaseException] = []

    def consume():
        try:
            list(_generation(loaded, ids))
        except EngineUnavailable as error:
            errors.append(error)

    with Paused(engine):
        monkeypatch.setattr(engine.stack, "forward", _crash)
        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
    consumer.join(60)
    assert not consumer.is_alive() and len(errors) == 1
    assert shared_engine(loaded) is not engine  # the next caller gets a new engine


def _crash(*_args, **_kwargs):
    raise Crash("injected")


def _generation(loaded, ids):
    from lifecycle.stages.generation import generate_steps

    return generate_steps(loaded, ids, GREEDY, 8)


def test_a_hung_job_hits_its_deadline_with_a_clear_error_and_the_engine_goes_on(loaded, monkeypatch):
    engine = shared_engine(loaded)
    monkeypatch.setattr(engine, "wait_seconds", 1.0)
    release, holder = _hold_the_engine(engine)
    started = time.monotonic()
    with pytest.raises(EngineTimeout, match="LIFECYCLE_ENGINE_WAIT_SECONDS"):
        engine.run(lambda model: model.config.num_hidden_layers)
    assert time.monotonic() - started < 10
    release.set()
    holder.join(30)
    assert engine.problem() is None
    # The engine goes on: the next job runs (given a minute: on a busy machine it may take more than a second).
    monkeypatch.setattr(engine, "wait_seconds", 60.0)
    assert engine.run(lambda model: model.config.num_hidden_layers) == loaded.num_layers


def test_a_stuck_engine_fails_its_waiting_requests_and_is_replaced(loaded, monkeypatch):
    engine = shared_engine(loaded)
    monkeypatch.setattr(engine, "stall_seconds", 0.5)
    release, holder = _hold_the_engine(engine)
    ids = chat_ids(loaded, "Say yes.")
    waiting = _generation(loaded, ids)
    with pytest.raises(EngineUnavailable, match="no progress"):
        list(waiting)
    release.set()  # the stuck job lets go of the model, so a new engine can be built
    holder.join(30)
    assert shared_engine(loaded) is not engine
    assert generate(loaded, ids, GREEDY, 4).token_ids == hf_greedy(loaded, ids, 4)


def _hold_the_engine(engine) -> tuple[threading.Event, threading.Thread]:
    """A job that keeps the scheduler thread until the returned event is set."""
    release = threading.Event()
    holder = threading.Thread(target=lambda: _swallow(engine.run, lambda _m: release.wait(30)), daemon=True)
    holder.start()
    return release, holder


def _swallow(call, *args):
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - the holder's own outcome is not what these tests check
        pass


def test_admission_refuses_a_request_whose_cache_can_never_fit(loaded, monkeypatch):
    engine = shared_engine(loaded)
    slot = engine.pool.slot_tokens
    monkeypatch.setattr(engine, "long_kv_bytes", engine.stack.cache_bytes(slot * 2))
    prompt = chat_ids(loaded, "Hello")
    with pytest.raises(RequestTooLarge, match="LIFECYCLE_LONG_KV_MB") as refused:
        engine.submit(greedy_request(prompt, slot * 3))
    assert refused.value.code == "request_too_large" and refused.value.param == "max_tokens"
    assert engine.submit(greedy_request(prompt, 2)).done.wait(60)


def test_long_requests_wait_for_memory_while_short_ones_run(loaded, monkeypatch):
    engine = shared_engine(loaded)
    slot = engine.pool.slot_tokens
    monkeypatch.setattr(engine, "long_kv_bytes", engine.stack.cache_bytes(2 * slot - 1))  # room for one at a time
    prompt = chat_ids(loaded, "Hello")
    tokens = []

    def three_tokens(logits):  # needs the capacity of max_tokens, stops after three
        tokens.append(int(logits.argmax()))
        return tokens[-1] if len(tokens) < 3 else None

    with Paused(engine):
        first = engine.submit(greedy_request(prompt, slot))
        second = engine.submit(EngineRequest(prompt, slot, three_tokens))
        short = engine.submit(greedy_request(prompt, 2))
    assert short.done.wait(60)
    deadline = time.monotonic() + 60
    while first.started_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    state = engine.state()  # the first decodes 512 tokens: it is still running now
    assert first.id in [r.id for r in state.running]
    assert second.id in [w.id for w in state.waiting] and second.started_at is None
    first.cancel()
    assert first.done.wait(60) and second.done.wait(120)
    assert second.error is None and second.started_at >= first.started_at and len(tokens) == 3
    assert engine._long_kv_in_use == 0


def test_a_decoding_stream_takes_a_step_between_every_two_layers_of_a_long_inspection_pass(loaded):
    engine = shared_engine(loaded)
    long_ids = (chat_ids(loaded, "Describe the water cycle in detail.") * 40)[:900]
    events: list[str] = []
    filler = loaded.tokenizer(" the", add_special_tokens=False)["input_ids"][0]  # never the end of the stream

    def step(_logits):
        events.append("step")
        return filler

    def inspection(model):
        slices = layered_forward(model, long_ids)
        while True:
            try:
                next(slices)
            except StopIteration as finished:
                return finished.value
            events.append("layer")
            yield

    stream = engine.submit(EngineRequest(chat_ids(loaded, "Tell me a story."), 400, step))
    deadline = time.monotonic() + 60
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    logits = engine.run_sliced(inspection)
    stream.cancel()
    assert stream.done.wait(60) and stream.error is None
    assert logits.shape == (1, 1, loaded.vocab_size)
    layers = [i for i, event in enumerate(events) if event == "layer"]
    assert len(layers) == loaded.num_layers
    assert all("step" in events[a + 1:b] for a, b in zip(layers, layers[1:])), "two layers ran back to back"


def test_the_api_answers_503_when_the_engine_dies_and_health_recovers(loaded, sdk, base_url, monkeypatch):
    import httpx
    import openai

    client = httpx.Client(timeout=30)
    health = base_url.removesuffix("/v1") + "/health"

    def wait_healthy():
        deadline = time.monotonic() + 60
        while client.get(health).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        return client.get(health).json()["status"]

    assert wait_healthy() == "ready"  # the engine is built (its first job primes the template's head)
    engine = shared_engine(loaded)
    monkeypatch.setattr(scheduler, "_take_over", lambda _loaded: None)  # hold the dead engine in place
    monkeypatch.setattr(engine.stack, "forward", _crash)
    with pytest.raises(openai.InternalServerError) as failed:
        sdk.chat.completions.create(model=loaded.name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert failed.value.status_code == 503
    assert failed.value.body["code"] == "engine_unavailable" and "takes over" in failed.value.body["message"]
    assert failed.value.response.headers["retry-after"] == "5"
    unhealthy = client.get(health)
    assert unhealthy.status_code == 503 and unhealthy.json()["status"] == "unhealthy"
    monkeypatch.undo()  # the real takeover again: health's own check builds the new engine
    assert wait_healthy() == "ready"
    answer = sdk.chat.completions.create(model=loaded.name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert answer.choices[0].finish_reason in ("stop", "length")
