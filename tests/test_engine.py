"""The batching engine on the real model: same tokens as the model alone, batched or not, and the
faults a room of users produces (cancellation, failures, bursts, a full queue)."""

import threading
import time

import numpy as np
import pytest
import torch

from lifecycle.stages.context_window import shared_head
from lifecycle.engine import EngineFull, EngineRequest, shared_engine
from lifecycle.engine.scheduler import FEW_ROWS_BUSY_SHARE, ROOM_REQUESTS
from lifecycle.engine.llama import Segment
from lifecycle.stages.generation import end_of_sequence_ids, generate, generate_steps
from lifecycle.stages.sampling import SamplingSettings

GREEDY = SamplingSettings(temperature=0)
QUESTIONS = [
    "What's the capital of India?",
    "Write a haiku about rain.",
    "List three prime numbers.",
    "Why is the sky blue?",
]


def chat_ids(loaded, question: str) -> list[int]:
    with loaded.tokenizer_lock:
        text = loaded.tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                                    tokenize=False)
        return loaded.tokenizer(text, add_special_tokens=False)["input_ids"]


def hf_greedy(loaded, ids: list[int], max_tokens: int) -> list[int]:
    """The reference: plain ``model.generate``, stopping at the same end-of-sequence tokens."""
    def job(model):
        with torch.inference_mode():
            return model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False,
                                  eos_token_id=sorted(end_of_sequence_ids(loaded)))

    return shared_engine(loaded).run(job)[0, len(ids):].tolist()


class Paused:
    """Holds the engine in an exclusive job, so requests submitted meanwhile start in one batch."""

    def __init__(self, engine):
        self.engine, self.release, self.holding = engine, threading.Event(), threading.Event()

    def __enter__(self):
        def hold(_model):
            self.holding.set()
            self.release.wait(60)

        self.thread = threading.Thread(target=self.engine.run, args=(hold,))
        self.thread.start()
        assert self.holding.wait(60)
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join(60)


def run_together(loaded, jobs):
    """Run each job (a no-argument callable) in its own thread while the engine is paused, so their
    requests enter the engine together; return their results in order."""
    results: list = [None] * len(jobs)

    def worker(i, job):
        results[i] = job()

    engine = shared_engine(loaded)
    with Paused(engine):
        threads = [threading.Thread(target=worker, args=(i, job)) for i, job in enumerate(jobs)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while engine.waiting_count() < len(jobs) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.waiting_count() == len(jobs)
    for thread in threads:
        thread.join(120)
    return results


def test_greedy_through_the_engine_equals_model_generate(loaded):
    for question in QUESTIONS[:3]:
        ids = chat_ids(loaded, question)
        assert generate(loaded, ids, GREEDY, 24).token_ids == hf_greedy(loaded, ids, 24), question


def test_batched_results_equal_solo_results_greedy_and_seeded(loaded):
    settings = [GREEDY, SamplingSettings(temperature=0.9, top_p=0.95, seed=7), SamplingSettings(temperature=1.2, seed=3),
                SamplingSettings(temperature=0.7, top_k=20, seed=11)]
    prompts = [chat_ids(loaded, q) for q in QUESTIONS]
    solo = [generate(loaded, ids, s, 16).token_ids for ids, s in zip(prompts, settings)]
    before = time.time()
    batched = run_together(loaded, [lambda ids=ids, s=s: generate(loaded, ids, s, 16).token_ids
                                    for ids, s in zip(prompts, settings)])
    assert batched == solo
    steps = [step for step in shared_engine(loaded).state().steps if step.time >= before]
    assert max(step.batch_size for step in steps) == len(prompts), "the requests never shared a step"


def test_chunked_prefill_equals_one_pass_logits(loaded):
    """The same prompt in chunks of 7 and in one pass: logits within 1e-4 (fp32 summation order),
    and within 1e-3 of the Hugging Face model's own logits."""
    stack = shared_engine(loaded).stack
    ids = chat_ids(loaded, "Explain in two sentences how a transformer reads a sentence.")
    one_pass = stack.forward([Segment(ids, 0, stack.new_cache(len(ids)), True)])[0]
    cache = stack.new_cache(len(ids))
    for start in range(0, len(ids), 7):
        chunk = ids[start:start + 7]
        logits = stack.forward([Segment(chunk, start, cache, start + len(chunk) == len(ids))])
    assert torch.allclose(logits[0], one_pass, atol=1e-4)
    with torch.inference_mode():
        reference = shared_engine(loaded).run(lambda model: model(torch.tensor([ids])).logits[0, -1])
    assert torch.allclose(one_pass, reference, atol=1e-3)
    assert int(one_pass.argmax()) == int(reference.argmax())


def test_batched_decode_attention_in_the_pool_equals_attention_alone(loaded):
    engine = shared_engine(loaded)
    stack, pool = engine.stack, engine.pool
    prompts = [chat_ids(loaded, q) for q in QUESTIONS]

    def prefilled(cache_of):
        caches = [cache_of(len(ids) + 1) for ids in prompts]
        for ids, cache in zip(prompts, caches):
            stack.forward([Segment(ids, 0, cache, False)])
        return caches

    with Paused(engine):  # the pool is the engine's: nothing else may use it meanwhile
        pooled = prefilled(pool.acquire)
        alone = prefilled(stack.new_cache)
        try:
            assert all(cache.slot is not None for cache in pooled)
            step = [Segment([ids[-1]], len(ids), cache, True) for ids, cache in zip(prompts, pooled)]
            batched = stack.forward(step, pool)
            singles = torch.cat([stack.forward([Segment([ids[-1]], len(ids), cache, True)])
                                 for ids, cache in zip(prompts, alone)])
        finally:
            for cache in pooled:
                pool.release(cache)
    assert torch.allclose(batched, singles, atol=1e-4)


def test_a_resent_conversation_prefix_comes_from_the_cache(loaded):
    tokenizer = loaded.tokenizer
    first_turn = [{"role": "user", "content": "Name a large animal that lives in the sea."}]
    with loaded.tokenizer_lock:
        first = tokenizer(tokenizer.apply_chat_template(first_turn, add_generation_prompt=True, tokenize=False),
                          add_special_tokens=False)["input_ids"]
    timings: dict = {}
    answer = list(generate_steps(loaded, first, GREEDY, 20, timings=timings))
    fed = first + [step.token_id for step in answer][:-1]  # the last chosen token is never fed
    second_turn = first_turn + [{"role": "assistant", "content": "".join(s.delta for s in answer)},
                                {"role": "user", "content": "How heavy is it?"}]
    with loaded.tokenizer_lock:
        second = tokenizer(tokenizer.apply_chat_template(second_turn, add_generation_prompt=True, tokenize=False),
                           add_special_tokens=False)["input_ids"]
    common = next((i for i, (a, b) in enumerate(zip(fed, second)) if a != b), min(len(fed), len(second)))
    assert common > len(first), "the second turn should re-send the first turn and its answer"
    timings = {}
    cached = [step.token_id for step in generate_steps(loaded, second, GREEDY, 16, timings=timings)]
    assert timings["cached_tokens"] == common
    assert cached == hf_greedy(loaded, second, 16)


def test_cancelling_one_request_mid_batch_leaves_the_others_untouched(loaded):
    prompts = [chat_ids(loaded, q) for q in QUESTIONS[:3]]
    solo = [generate(loaded, ids, GREEDY, 12).token_ids for ids in prompts]
    stop = threading.Event()

    def cancelled_run():
        steps = []
        for step in generate_steps(loaded, prompts[1], SamplingSettings(temperature=0), 200, cancelled=stop.is_set):
            steps.append(step)
            if len(steps) == 3:
                stop.set()
        return steps

    results = run_together(loaded, [lambda: generate(loaded, prompts[0], GREEDY, 12).token_ids, cancelled_run,
                                    lambda: generate(loaded, prompts[2], GREEDY, 12).token_ids])
    assert results[0] == solo[0] and results[2] == solo[2]
    cancelled = results[1]
    assert cancelled[-1].finished == "cancelled" and 4 <= len(cancelled) <= 8
    # A consumer has its last step the moment the step callable hands it over, a moment before the engine lets the
    # request go: every request has left within a second.
    deadline = time.monotonic() + 1
    while shared_engine(loaded).state().running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not shared_engine(loaded).state().running


def test_a_failing_request_fails_alone(loaded):
    engine = shared_engine(loaded)
    prompts = [chat_ids(loaded, q) for q in QUESTIONS[:2]]
    solo = [generate(loaded, ids, GREEDY, 10).token_ids for ids in prompts]
    calls = []

    def broken(logits: np.ndarray):
        calls.append(logits.shape)
        if len(calls) == 3:
            raise RuntimeError("a grammar mask bug")
        return int(logits.argmax())

    handles = {}
    results = run_together(loaded, [
        lambda: generate(loaded, prompts[0], GREEDY, 10).token_ids,
        lambda: handles.setdefault("broken", engine.submit(EngineRequest(chat_ids(loaded, "Hi"), 10, broken))).done.wait(60),
        lambda: generate(loaded, prompts[1], GREEDY, 10).token_ids,
    ])
    assert results[0] == solo[0] and results[2] == solo[1]
    assert isinstance(handles["broken"].error, RuntimeError) and len(calls) == 3
    assert calls[0] == (loaded.vocab_size,)


def test_a_failing_generation_raises_in_its_consumer(loaded, monkeypatch):
    import lifecycle.stages.generation as generation

    def broken(*_args, **_kwargs):
        raise RuntimeError("sampling exploded")

    monkeypatch.setattr(generation, "apply_sampling", broken)
    with pytest.raises(RuntimeError, match="sampling exploded"):
        list(generate_steps(loaded, chat_ids(loaded, "Hi"), GREEDY, 5))


def test_a_burst_of_thirty_requests_all_complete_batched(loaded):
    engine = shared_engine(loaded)
    before = time.time()
    questions = [f"Give me one fact about the number {n}." for n in range(30)]
    results = run_together(loaded, [lambda q=q: generate(loaded, chat_ids(loaded, q), GREEDY, 6) for q in questions])
    assert all(r.completion_tokens >= 1 and r.finish_reason in ("stop", "length") for r in results)
    steps = [step for step in engine.state().steps if step.time >= before]
    assert max(step.batch_size for step in steps) == 30
    assert engine.state().tokens_per_second > 0


def test_a_class_s_steps_run_on_every_core_and_a_learner_s_on_the_configured_threads(loaded, monkeypatch):
    """A step of more requests than the packed kernels take (a class) runs on the room's threads; a smaller one, and
    the jobs between steps, on the configured count (the app's leaves a core to a browser beside it)."""
    engine = shared_engine(loaded)
    monkeypatch.setattr(engine, "threads", 1)
    monkeypatch.setattr(engine, "room_threads", 2)
    seen: dict[str, set[int]] = {"alone": set(), "class": set()}

    def recording(tag: str):
        def step(logits):
            seen[tag].add(torch.get_num_threads())
            return int(logits.argmax())
        return step

    alone = engine.submit(EngineRequest(chat_ids(loaded, "Hi"), 4, recording("alone")))
    assert alone.done.wait(60) and alone.error is None
    handles = [engine.submit(EngineRequest(chat_ids(loaded, f"One fact about {n}?"), 6, recording("class")))
               for n in range(ROOM_REQUESTS + 4)]
    assert all(handle.done.wait(120) and handle.error is None for handle in handles)
    assert seen["alone"] == {1} and 2 in seen["class"]
    assert engine.run(lambda _model: torch.get_num_threads()) == 1


def test_a_long_prompt_holds_a_short_one_up_for_at_most_one_chunk(loaded):
    engine = shared_engine(loaded)
    long_ids = [int(i) for i in np.random.default_rng(1).integers(100, loaded.vocab_size, 4 * engine.prefill_chunk)]
    short_ids = chat_ids(loaded, "Say hi.")
    events: list[str] = []

    def record(name):
        def step(logits):
            events.append(name)
            return None

        return step

    long_handle = engine.submit(EngineRequest(long_ids, 1, record("long")))
    deadline = time.monotonic() + 60
    while long_handle.started_at is None and time.monotonic() < deadline:
        time.sleep(0.005)
    short_handle = engine.submit(EngineRequest(short_ids, 1, record("short")))
    assert short_handle.done.wait(120) and long_handle.done.wait(120)
    assert events == ["short", "long"]
    assert short_handle.waited_seconds < long_handle.prefill_seconds


def test_a_full_queue_refuses_at_once_with_a_retry_time(loaded, monkeypatch):
    engine = shared_engine(loaded)
    monkeypatch.setattr(engine, "queue_capacity", 2)
    ids = chat_ids(loaded, "Hi")
    with Paused(engine):
        handles = [engine.submit(EngineRequest(ids, 2, lambda logits: int(logits.argmax()), bounded=True))
                   for _ in range(2)]
        state = engine.state()
        assert [w.position for w in state.waiting] == [1, 2]
        with pytest.raises(EngineFull) as full:
            engine.submit(EngineRequest(ids, 2, lambda logits: int(logits.argmax()), bounded=True))
        assert full.value.waiting == 2 and full.value.retry_after >= 1
        page = engine.submit(EngineRequest(ids, 1, lambda logits: None))  # a page's request always gets a place
        assert [w.position for w in engine.state().waiting] == [1, 2, 3]
        handles[1].cancel()
    assert handles[0].done.wait(60) and handles[1].done.wait(60) and page.done.wait(60)
    assert handles[0].error is None and handles[0].generated == 2 and page.error is None
    assert handles[1].cancelled and handles[1].generated == 0


def test_a_job_arriving_while_the_few_rows_are_timed_waits_for_one_product_only(loaded, monkeypatch):
    """The engine times its few-row products one at a time while idle: a job that arrives in the middle runs
    after the product being timed, and the rest are timed after it, with no new work to wake the engine."""
    engine = shared_engine(loaded)
    remaining, log, timing, armed = [5], [], threading.Event(), threading.Event()

    def piece():
        log.append("product")
        if len(log) == 1:
            timing.set()
            deadline = time.monotonic() + 30
            while not engine._jobs and time.monotonic() < deadline:  # the job below arrives during this product
                time.sleep(0.01)
            time.sleep(0.05)  # a product of some length, so the engine, now busy, owes a wait before the next one
        remaining[0] -= 1

    # Armed by a job of this test: the engine thread may still be looping after the previous test's work.
    monkeypatch.setattr(engine.stack, "few_rows_untimed", lambda: armed.is_set() and remaining[0] > 0)
    monkeypatch.setattr(engine.stack, "time_few_rows_product", piece)
    engine.run(lambda model: armed.set())  # once the engine has worked, it times in its idle moments
    assert timing.wait(30)
    engine.run(lambda model: log.append("job"))
    deadline = time.monotonic() + 30
    while remaining[0] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["product", "job", "product", "product", "product", "product"]


def test_a_busy_engine_times_its_few_rows_between_steps_within_its_share(loaded, monkeypatch):
    """A room that keeps the engine busy from the start still gets the few-row products timed: one between two
    steps, each followed by at least (1 / FEW_ROWS_BUSY_SHARE - 1) times its own length of serving."""
    engine = shared_engine(loaded)
    remaining, products = [1000], []
    ids = chat_ids(loaded, QUESTIONS[1])

    def piece():
        started, busy = time.monotonic(), bool(engine._running)
        time.sleep(0.02)
        if busy:
            products.append((started, time.monotonic()))
        remaining[0] -= 1

    monkeypatch.setattr(engine.stack, "few_rows_untimed", lambda: remaining[0] > 0)
    monkeypatch.setattr(engine.stack, "time_few_rows_product", piece)
    steps = list(generate_steps(loaded, ids, GREEDY, 24))
    remaining[0] = 0
    assert len(steps) > 1 and products, "no product was timed while the engine was busy"
    for (began, ended), (following, _) in zip(products, products[1:]):
        assert following - ended >= (ended - began) * (1 / FEW_ROWS_BUSY_SHARE - 1) * 0.99


def test_run_returns_results_and_reraises_errors(loaded):
    engine = shared_engine(loaded)
    assert engine.run(lambda model: model.config.num_hidden_layers) == loaded.num_layers

    def broken(_model):
        raise ValueError("inspection failed")

    with pytest.raises(ValueError, match="inspection failed"):
        engine.run(broken)


def test_a_generation_reports_its_wait_and_cached_prompt_tokens(loaded):
    ids = chat_ids(loaded, "What is the tallest mountain on Earth?")
    first = generate(loaded, ids, GREEDY, 4)
    again = generate(loaded, ids, GREEDY, 4)
    assert again.cached_tokens == len(ids) - 1  # the last prompt token always runs, for its logits
    assert first.cached_tokens < again.cached_tokens
    assert again.waited_seconds >= 0 and again.prefill_seconds > 0
    assert again.token_ids == first.token_ids


def test_a_scheduler_fault_fails_the_batch_and_the_engine_goes_on(loaded, monkeypatch):
    engine = shared_engine(loaded)
    ids = chat_ids(loaded, "Hi")
    plan = engine._plan
    faults = []

    def broken_once():
        if not faults:
            faults.append(1)
            raise RuntimeError("scheduler bug")
        return plan()

    monkeypatch.setattr(engine, "_plan", broken_once)
    first = engine.submit(EngineRequest(ids, 2, lambda logits: int(logits.argmax())))
    assert first.done.wait(60) and isinstance(first.error, RuntimeError)
    assert generate(loaded, ids, GREEDY, 2).completion_tokens == 2


def test_fused_weights_stay_ordinary_parameters_when_built_in_inference_mode(loaded):
    """The engine may start inside inference mode; the layers it fuses must still run with autograd on."""
    from lifecycle.engine.llama import _fuse

    layers = [torch.nn.Linear(loaded.model.config.hidden_size, n) for n in (3, 2)]
    with torch.inference_mode():
        fused, bias = _fuse(layers)
    assert not fused.is_inference() and not bias.is_inference()
    x = torch.ones(1, loaded.model.config.hidden_size, requires_grad=True)
    layers[1](x).sum().backward()  # raised "Inference tensors cannot be saved for backward" before
    assert torch.equal(fused[3:], layers[1].weight) and x.grad is not None
    assert not any(p.is_inference() for p in loaded.model.parameters())


def test_the_engines_matrix_product_equals_f_linear_on_the_models_weights(loaded):
    stack = shared_engine(loaded).stack
    product = stack.linear  # the compiled matrix-vector product for one row, oneDNN for more
    for rows in (1, 2, 30):
        x = torch.randn(rows, stack.hidden, generator=torch.Generator().manual_seed(rows))
        for weight in (stack.blocks[0].qkv, stack.lm_head.detach()):
            expected = torch.nn.functional.linear(x, weight)
            assert torch.allclose(product(x, weight, None), expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


def test_a_primed_prefix_is_computed_once_and_nothing_is_generated(loaded):
    head = shared_head()
    prompts = [chat_ids(loaded, q) for q in ("Which planet has rings?", "Who wrote Hamlet?")]
    assert all(p[:len(head)] == head for p in prompts) and prompts[0][len(head)] != prompts[1][len(head)]
    with loaded.tokenizer_lock:
        primed = head + loaded.tokenizer("Primed 41c7 prefix:", add_special_tokens=False)["input_ids"]
    handle = shared_engine(loaded).prime(primed, label="test")
    assert handle.done.wait(60) and handle.error is None and handle.generated == 0
    prompt = primed + loaded.tokenizer(" name a colour.", add_special_tokens=False)["input_ids"]
    result = generate(loaded, prompt, GREEDY, 6)
    assert result.cached_tokens == len(primed)
    assert result.token_ids == hf_greedy(loaded, prompt, 6)


def test_a_batched_step_reads_only_finite_keys_whatever_memory_the_pool_got(monkeypatch):
    """A batched step reads each request's slot up to the longest request's length (masked, but weight 0 x NaN is
    NaN; on a 2-layer copy of the model, twelve concurrent sampled answers once read NaN logits from recycled
    memory): here the pool's memory is all NaN, and the step must find finite numbers in every position it reads,
    each request's own keys and values untouched, and nothing zeroed beyond what it reads."""
    from lifecycle.engine.llama import KVPool, Segment, _pooled_decode

    monkeypatch.setattr(torch, "empty", lambda shape, **_: torch.full(shape, float("nan")))
    pool = KVPool(2, 3, 3, 16, 8)
    short, long = pool.acquire(16), pool.acquire(16)
    for cache, written in ((short, 3), (long, 7)):  # what each request's earlier steps wrote
        cache.keys[:, :, :written] = torch.randn(2, 3, written, 8)
        cache.values[:, :, :written] = torch.randn(2, 3, written, 8)
    before = short.keys[:, :, :3].clone(), long.keys[:, :, :7].clone()
    step = _pooled_decode([Segment([1], 3, short, True), Segment([2], 7, long, True)], pool)
    assert step.length == 8  # the longer request's 7 keys and its new one (each new key is written as it attends)
    assert torch.isfinite(short.keys[:, :, 4:8]).all() and torch.isfinite(short.values[:, :, 4:8]).all()
    assert torch.isnan(short.keys[:, :, 8:]).all() and torch.isnan(long.keys[:, :, 8:]).all()  # never read
    assert torch.equal(short.keys[:, :, :3], before[0]) and torch.equal(long.keys[:, :, :7], before[1])