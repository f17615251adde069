"""The journey's stage results, cached apart on the real model: each page waits only for its own stage."""

import threading

import numpy as np
import pytest

from lifecycle.journey import JourneyInput, run_journey
from lifecycle.result_cache import ResultCache
from lifecycle.results import JourneyResults
from lifecycle.stages.sampling import SamplingSettings
from tests.engine_idle import until_idle

GREEDY = SamplingSettings(temperature=0.0)
MB = 2**20


def _results(loaded) -> JourneyResults:
    return JourneyResults(loaded, ResultCache(budget=256 * MB))


def test_preparing_runs_no_model_and_the_inspection_runs_no_generation(loaded):
    results = _results(loaded)
    inp = JourneyInput("Name a colour.", sampling=GREEDY, max_tokens=4)
    prepared = results.prepared(inp)
    assert prepared.rendered.ids and results.cache.computations["inspect"] == 0
    inspection = results.inspection(inp)
    assert inspection.forward.ids == prepared.rendered.ids
    assert results.cache.computations["answer"] == 0 and results.peek_answer(inp) is None


def test_the_same_prompt_from_thirty_sessions_runs_the_inspection_once(loaded):
    results = _results(loaded)
    inp = JourneyInput("Thirty people ask the same thing.", sampling=GREEDY, max_tokens=4)
    seen = [None] * 30
    threads = [threading.Thread(target=lambda i=i: seen.__setitem__(i, results.inspection(inp))) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert results.cache.computations["inspect"] == 1
    assert all(s is seen[0] for s in seen)


def test_other_sampling_settings_reuse_the_inspection_pass(loaded):
    results = _results(loaded)
    cold = JourneyInput("Pick a number.", sampling=GREEDY, max_tokens=3)
    warm = JourneyInput("Pick a number.", sampling=SamplingSettings(temperature=1.2, seed=3), max_tokens=3)
    assert results.inspection(cold) is results.inspection(warm)
    assert results.cache.computations["inspect"] == 1 and results.cache.computations["prepare"] == 2


def test_the_generation_reports_every_token_as_it_arrives_and_matches_the_whole_journey(loaded):
    results = _results(loaded)
    inp = JourneyInput("Name one primary colour.", sampling=GREEDY, max_tokens=8)
    pending = results.answer(inp)
    answer = pending.result(120)
    assert [s.token_id for s in pending.progress] == answer.generation.token_ids
    assert results.answer(inp) is pending and results.cache.computations["answer"] == 1
    whole = run_journey(inp, loaded)
    assert answer.generation.token_ids == whole.generation.token_ids
    journey = results.journey(inp)
    assert journey.generation is answer.generation
    assert journey.generation.steps[0].token_id == int(np.argmax(journey.next_token.probs))
    stages = [t.stage for t in journey.timings]
    assert stages[:4] == ["request", "tokenization", "chat template", "inspection pass"] and "prefill" in stages


def test_the_engines_prefill_gives_the_inspection_pass_distribution_and_warms_the_generation(loaded):
    results = _results(loaded)
    inp = JourneyInput("What is a prefix cache?", sampling=GREEDY, max_tokens=3)
    seen = [None] * 30
    threads = [threading.Thread(target=lambda i=i: seen.__setitem__(i, results.start_prefill(inp).result(120)))
               for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert results.cache.computations["prefill"] == 1 and all(s is seen[0] for s in seen)
    assert results.cache.computations["inspect"] == 0 and results.peek_answer(inp) is None
    prefill = seen[0]
    inspection = results.inspection(inp)
    np.testing.assert_allclose(prefill.next_token.probs, inspection.next_token.probs, atol=1e-5)
    assert prefill.next_token.top(1)[0].id == inspection.next_token.top(1)[0].id
    answer = results.answer(inp).result(120)
    assert answer.cached_tokens == len(results.prepared(inp).rendered.ids) - 1  # the prompt was already read


def test_the_journeys_generation_never_waits_behind_its_inspection_pass(loaded):
    from lifecycle.engine import shared_engine

    results = _results(loaded)
    inp = JourneyInput("Why do cats purr?", sampling=GREEDY, max_tokens=6)
    engine = shared_engine(loaded)
    until_idle(engine, 30)  # an earlier test's request may still be leaving the batch after its answer arrived
    jobs_seen = []
    original = engine.run_sliced

    def watched(work):
        answer = results.peek_answer(inp)
        jobs_seen.append(answer is not None and answer.done())  # was the generation over when the pass asked?
        return original(work)

    engine.run_sliced = watched
    try:
        journey = results.journey(inp)
    finally:
        del engine.run_sliced
    assert jobs_seen == [True]
    assert journey.jobs_ahead == 0 and journey.ahead == ()
    assert journey.call[-1].end == journey.stream[-1].at
    assert sum(span.seconds for span in journey.call) == pytest.approx(journey.stream[-1].at)
