"""The journey's stage results as the pages ask for them, each page waiting only for what it shows.

The results live in the process-wide ``lifecycle.results.JourneyResults`` (one cache bounded in
bytes by ``LIFECYCLE_CACHE_MB``, shared by every session and the warm endpoint). Request,
Tokenization and Context window need no model run and compute on their own; the others fetch
here, with something on screen while the model works:

- ``prefilled_prompt(settings)``: the prepared prompt and the next-token distribution from the
  engine's prefill (Next token, Sampling), with this prompt's place in line while it waits.
- ``inspected_prompt(settings)``: the prepared prompt and the inspection pass (Embeddings,
  Attention), with a spinner.
- ``answered_prompt(settings)``: the prepared prompt and its generation; the tokens appear as
  they are generated (Generation, Streaming, Detokenization, the Request page's response).
- ``cached_journey(settings)``: every stage (the journey map, Gateway).

Results are shared by every session asking with equal settings, so treat them as read-only.
``per_prompt_cache`` memoises a page's own per-prompt function in the same byte-bounded cache.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lifecycle.engine import shared_engine
from lifecycle.stages.generation import GenerationStep
from lifecycle.journey import Answer, Inspection, Journey, Prefill, PreparedPrompt
from lifecycle.features.remote_gap import remote_first_step_gap
from lifecycle.stages.vocabulary import token_bytes
from lifecycle.result_cache import Pending, shared_cache
from lifecycle.results import JourneyResults, engine_tag, shared_results
from ui.frame import loaded_model, show_text
from ui.text import literal
from ui.settings import JourneySettings

POLL_SECONDS = 0.5  # 30 sessions redrawing progress share one Python process with the engine
PROGRESS_CHARS = 2000

Result = TypeVar("Result")


def journey_results() -> JourneyResults:
    """The process-wide stage results of the loaded model (loading it first, with a spinner)."""
    return shared_results(loaded_model())


def prepared_prompt(settings: JourneySettings) -> PreparedPrompt:
    """Request, tokenization, template and budget of these settings (no model run)."""
    return journey_results().prepared(settings.journey_input())


def prefilled_prompt(settings: JourneySettings) -> tuple[PreparedPrompt, Prefill]:
    """The prepared prompt and the engine's prefill of it (the next-token distribution only)."""
    results = journey_results()
    inp = settings.journey_input()
    prepared = results.prepared(inp)
    pending = results.start_prefill(inp)
    box = st.empty()  # made whether or not it waits (see _answer)
    if not pending.done():
        _show_waiting(pending, engine_tag(results.prefill_key(inp)), box)
    return prepared, pending.result()


def inspected_prompt(settings: JourneySettings) -> tuple[PreparedPrompt, Inspection]:
    """The prepared prompt and its inspection pass; a spinner shows while the pass runs."""
    results = journey_results()
    inp = settings.journey_input()
    return results.prepared(inp), _inspection(results.start_inspection(inp))


def answered_prompt(settings: JourneySettings) -> tuple[PreparedPrompt, Answer]:
    """The prepared prompt and its generation; while it runs, the tokens show as they arrive."""
    results = journey_results()
    inp = settings.journey_input()
    prepared = results.prepared(inp)
    answer = _answer(results.answer(inp), inp)
    _say_remote_gap(settings, prepared, answer)
    return prepared, answer


def finished_answer(settings: JourneySettings) -> Answer | None:
    """This prompt's generation if it has already finished, without starting or waiting for it."""
    pending = journey_results().peek_answer(settings.journey_input())
    if pending is None or not pending.done() or pending.exception() is not None:
        return None
    return pending.result()


def cached_journey(settings: JourneySettings) -> Journey:
    """Every stage's result for these settings; the generation shows its tokens as they arrive.

    Raises LifecycleError for input the journey cannot take (empty or too long prompt, ...).
    """
    results = journey_results()
    inp = settings.journey_input()
    prepared = results.prepared(inp)
    generation = results.answer(inp)
    inspection = results.start_inspection(inp)  # once the generation has finished: it never delays it
    answer = _answer(generation, inp)  # its tokens show as they arrive, then the pass's spinner
    _say_remote_gap(settings, prepared, answer)
    return Journey.of(prepared, _inspection(inspection), answer)


def _say_remote_gap(settings: JourneySettings, prepared: PreparedPrompt, answer: Answer) -> None:
    """On every page showing a remote engine's tokens: how its first step compares with the local
    prefill the Next token and Sampling pages show (lifecycle.features.remote_gap), with the measured gap."""
    steps = answer.generation.steps
    if answer.remote is None or not steps:
        return
    _, prefill = prefilled_prompt(settings)
    gap = remote_first_step_gap(steps[0].top_logprobs, prefill.next_token.probs, token_bytes(loaded_model()).table,
                                local_prompt_tokens=len(prepared.rendered.ids),
                                remote_prompt_tokens=answer.remote_prompt_tokens)
    if gap is None:
        return
    text = literal(f"Remote engine {answer.remote}: {gap.sentence()}", limit=1000)
    (st.warning if gap.beyond_rounding else st.info)(text, icon=":material/dns:")


def _inspection(pending: Pending) -> Inspection:
    if not pending.done():
        with st.spinner("Running the prompt through the model once (the inspection pass)…", show_time=True):
            return pending.result()
    return pending.result()


def _answer(pending: Pending, inp) -> Answer:
    # The progress box is made whether or not the page waits: had only a run that waited made it, every element
    # after it would move one place in the next run, and Streamlit would start them anew (a tab picked after
    # the page had waited sprang back to the first at the next click).
    box = st.empty()
    if not pending.done():
        _show_progress(pending, inp.max_tokens, engine_tag(journey_results().answer_key(inp)), box)
    return pending.result()


def _show_progress(pending: Pending, max_tokens: int, tag: str, box: DeltaGenerator) -> None:
    """The generation's tokens so far, redrawn until it finishes (then the box goes away).

    Before the first token it says where this prompt is: in line for the engine (its place), or
    having its prompt read (prefill) in the engine's running batch.
    """
    while not (pending.done() or pending.overdue):  # past its deadline, result() raises ResultTimeout
        steps = [item for item in list(pending.progress) if isinstance(item, GenerationStep)]
        seconds = time.monotonic() - pending.started
        with box.container(border=True):
            if steps:
                st.caption(f"Generating on the model: {len(steps)} of at most {max_tokens} tokens so far "
                           f"({seconds:,.1f} s).")
                show_text("".join(step.delta for step in steps) or "…", limit=PROGRESS_CHARS)
            else:
                st.caption(_waiting_line(pending, tag, seconds))
        futures.wait([pending], timeout=POLL_SECONDS)  # back at once when it is done
    box.empty()


def _show_waiting(pending: Pending, tag: str, box: DeltaGenerator) -> None:
    """Where this prompt is (in line, or being read by the model), redrawn in ``box`` until ``pending`` is done."""
    while not (pending.done() or pending.overdue):  # past its deadline, result() raises ResultTimeout
        box.caption(_waiting_line(pending, tag, time.monotonic() - pending.started))
        futures.wait([pending], timeout=POLL_SECONDS)  # back at once when it is done
    box.empty()


def _waiting_line(pending: Pending, tag: str, seconds: float) -> str:
    """Where this prompt's generation is before its first token, from the engine's live state."""
    state = shared_engine(loaded_model()).state()
    waiting = next((w for w in state.waiting if w.tag == tag), None)
    running = next((r for r in state.running if r.tag == tag), None)
    if running is not None:
        return (f"The model is reading this prompt ({running.prompt_tokens} tokens, prefill) in a batch of "
                f"{len(state.running)} requests… ({seconds:,.1f} s)")
    if waiting is not None:
        return (f"In line for the model: place {waiting.position} of {len(state.waiting)} waiting; "
                f"{len(state.running)} requests are in the running batch. ({seconds:,.1f} s)")
    return f"Handing this prompt to the model… ({seconds:,.1f} s)"


def per_prompt_cache(function: Callable[..., Result]) -> Callable[..., Result]:
    """``function`` memoised by its arguments for all sessions, in the byte-bounded results cache.

    Arguments must be hashable; a parameter named with a leading underscore (``_loaded``) is
    left out of the key. ``function.start(...)`` starts the same result in the background and
    returns its ``Pending`` at once.
    """
    name = f"{function.__code__.co_filename}:{function.__qualname__}"  # pages all run as __main__
    parameters = tuple(inspect.signature(function).parameters)

    def key(args, kwargs) -> tuple:
        shown = tuple(a for a, p in zip(args, parameters) if not p.startswith("_"))
        return name, shown, tuple(sorted((k, v) for k, v in kwargs.items() if not k.startswith("_")))

    @functools.wraps(function)
    def cached(*args, **kwargs):
        return shared_cache().get(key(args, kwargs), lambda _report: function(*args, **kwargs))

    def start(*args, **kwargs) -> Pending:
        """The same result started in the background (returns at once), for a page that draws first."""
        return shared_cache().start(key(args, kwargs), lambda _report: function(*args, **kwargs))

    cached.start = start
    return cached
