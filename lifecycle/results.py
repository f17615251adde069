"""The journey's stage results for every prompt asked in this process, each stage cached apart.

Pages, the warm endpoint and anything else in the server process share one ``JourneyResults``
(``shared_results()``), so a prompt the teacher warmed, or that another session opened, is ready:

- ``prepared(inp)``: request, tokens, template, budget (no model run), keyed by the whole input;
- ``start_prefill(inp)``: the engine's prefill for the next-token distribution (Next token,
  Sampling), batched with everyone's work; keyed by the rendered prompt's ids alone;
- ``inspection(inp)``: the inspection pass (attention, logit lens), keyed by the rendered prompt's
  ids alone, so changing the temperature does not run it again. It is an extra of this app, so it
  starts only once this prompt's generation (if one is running) has finished: the generation's
  times are what a plain API call of the same request gets;
- ``answer(inp)``: the generation, started in the background and returned at once as a ``Pending``
  whose ``progress`` lists the tokens generated so far; keyed by the ids and the generation
  settings;
- ``branch(...)``: a generation with some steps forced (the Generation page's alternatives).

All of them live in the process's one ``ResultCache`` bounded in bytes (``LIFECYCLE_CACHE_MB``),
with the pages' own per-prompt results.
"""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent import futures
from collections.abc import Hashable

from lifecycle.engine import origin

from lifecycle.stages.generation import Generation, generate
from lifecycle.journey import (
    Inspection,
    Journey,
    JourneyInput,
    Prefill,
    PreparedPrompt,
    answer,
    check_runnable,
    inspect_prompt,
    prefill,
    prepare,
)
from lifecycle.model import LoadedModel
from lifecycle.result_cache import Pending, ResultCache, shared_cache
from lifecycle.stages.sampling import SamplingSettings


def engine_tag(key: Hashable) -> str:
    """The short name a prompt's engine requests carry (on Live calls), never the prompt itself."""
    return "prompt-" + hashlib.sha1(repr(key).encode()).hexdigest()[:6]


class JourneyResults:
    """Stage results of one model's journeys, shared by every session of the process."""

    def __init__(self, loaded: LoadedModel, cache: ResultCache | None = None) -> None:
        self.loaded = loaded
        self.cache = cache if cache is not None else shared_cache()

    def prepared(self, inp: JourneyInput) -> PreparedPrompt:
        """Request, tokenization, template and budget for ``inp`` (LifecycleError for bad input)."""
        loaded = self.loaded
        return self.cache.get(("prepare", loaded.name, inp),
                              lambda _report: prepare(inp, loaded.name, loaded.context_window))

    def prefill_key(self, inp: JourneyInput) -> Hashable:
        return ("prefill", self.loaded.name, tuple(self.prepared(inp).rendered.ids))

    def start_prefill(self, inp: JourneyInput, label: str = "page") -> Pending:
        """The engine's prefill of ``inp`` (next-token distribution), started in the background unless there."""
        prepared = self.prepared(inp)
        check_runnable(prepared, self.loaded)
        key = self.prefill_key(inp)

        def compute(_report) -> Prefill:
            with origin(label, engine_tag(key)):
                return prefill(prepared, self.loaded)

        return self.cache.start(key, compute)

    def start_inspection(self, inp: JourneyInput) -> Pending:
        """The inspection pass for ``inp``, started in the background unless already there; after this
        prompt's generation when one is running, so the pass never delays it."""
        prepared = self.prepared(inp)
        check_runnable(prepared, self.loaded)
        key = ("inspect", self.loaded.name, tuple(prepared.rendered.ids))
        generation = self.peek_answer(inp)

        def compute(_report) -> Inspection:
            if generation is not None:
                futures.wait([generation], timeout=max(0.0, generation.deadline - time.monotonic()))
            return inspect_prompt(prepared, self.loaded)

        return self.cache.start(key, compute)

    def inspection(self, inp: JourneyInput) -> Inspection:
        return self.start_inspection(inp).result()

    def answer_key(self, inp: JourneyInput) -> Hashable:
        ids = tuple(self.prepared(inp).rendered.ids)
        return ("answer", self.loaded.name, ids, inp.sampling, inp.max_tokens, inp.stop, inp.include_usage)

    def answer(self, inp: JourneyInput, label: str = "page") -> Pending:
        """The generation for ``inp``: started in the background unless already there, returned at once.

        ``pending.progress`` holds each GenerationStep as it arrives; ``pending.result()`` the Answer. ``label`` names the engine request on
        Live calls ("page", "warm"); its tag is ``engine_tag(answer_key)``.
        """
        prepared = self.prepared(inp)
        check_runnable(prepared, self.loaded)
        key = self.answer_key(inp)

        def compute(report):
            with origin(label, engine_tag(key)):
                return answer(prepared, self.loaded, on_step=report)

        return self.cache.start(key, compute)

    def peek_answer(self, inp: JourneyInput) -> Pending | None:
        """The generation for ``inp`` if anyone started it, without starting it."""
        return self.cache.peek(self.answer_key(inp))

    def journey(self, inp: JourneyInput, label: str = "page") -> Journey:
        """Every stage for ``inp``: the generation first, the inspection pass once it has finished."""
        prepared = self.prepared(inp)
        generation = self.answer(inp, label)
        inspection = self.start_inspection(inp)
        return Journey.of(prepared, inspection.result(), generation.result())

    def warm(self, inp: JourneyInput) -> Journey:
        """Compute (or find) every stage for ``inp``, so the pages open it at once."""
        journey = self.journey(inp, label="warm")
        self.start_prefill(inp, label="warm").result()  # after the generation: from the prefix cache
        return journey

    def branch(self, prompt_ids: tuple[int, ...], sampling: SamplingSettings, max_tokens: int,
               stop: tuple[str, ...], forced: tuple[tuple[int, int], ...]) -> Generation:
        """A generation with the steps in ``forced`` (index, token id) fixed: one branch of the loop."""
        key = ("branch", self.loaded.name, prompt_ids, sampling, max_tokens, stop, forced)
        return self.cache.get(key, lambda _report: generate(self.loaded, prompt_ids, sampling, max_tokens, stop,
                                                            forced=dict(forced)))


_shared: dict[str, JourneyResults] = {}
_shared_lock = threading.Lock()


def shared_results(loaded: LoadedModel) -> JourneyResults:
    """The process-wide results of ``loaded``'s journeys (pages and the warm endpoint share them)."""
    with _shared_lock:
        results = _shared.get(loaded.name)
        if results is None or results.loaded is not loaded:
            results = _shared[loaded.name] = JourneyResults(loaded)
        return results
