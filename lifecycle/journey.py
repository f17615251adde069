"""The whole journey: one prompt and its settings carried through every stage, each one timed.

The journey is three stage functions, so a page waits only for the stages it shows:

- ``prepare``: the request, the tokenization, the chat template and the window budget. No model run.
- ``prefill``: the prompt read by the engine, batched with everyone's work, for the next-token
  distribution alone. The Next token and Sampling pages need only this.
- ``inspect_prompt``: one inspection forward pass (embeddings, attention, logit lens) and the
  next-token distribution. The Embeddings and Attention pages need this.
- ``answer``: the real generation, produced as the SSE stream, then detokenized into the response.
  ``on_step`` sees every generated token as it arrives, so a page can show progress.

``run_journey`` runs all three for the command line and the tests; ``Journey.of`` joins results
computed apart (lifecycle.results caches each one separately). Prefill and each decode step are
timed apart, so the journey map shows where the latency lives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lifecycle.features.call_timeline import Span, call_spans
from lifecycle.stages.context_window import (
    ContextBudget,
    Conversation,
    RenderedPrompt,
    context_budget,
    render_prompt,
)
from lifecycle.stages.detokenization import DetokenizedStep, detokenize
from lifecycle.engine import EngineRequest, current_origin, shared_engine
from lifecycle.engine.remote import remote_engine
from lifecycle.errors import LifecycleError
from lifecycle.stages.forward_pass import ForwardPass, run_forward, token_text
from lifecycle.stages.generation import Generation, GenerationStep, generate_steps
from lifecycle.model import LoadedModel, shared_model
from lifecycle.stages.request import ChatRequest, chat_request
from lifecycle.stages.completion import build_response, new_completion_id
from lifecycle.stages.sampling import (
    NextTokenDistribution,
    SampledDistribution,
    SamplingSettings,
    apply_sampling,
    next_token_distribution,
)
from lifecycle.stages.streaming import StreamEvent, StreamMetrics, stream_events, stream_metrics
from lifecycle.stages.tokenization import Tokenization, tokenize
from lifecycle.stages.vocabulary import show_token

# The longest prompt the journey takes, in characters: the sidebar's box, a link's prompt and the pages all use this
# one value (the API has no character limit of its own: its body is capped in bytes, its prompt by the window).
MAX_PROMPT_CHARS = 20_000
INSPECTION_STAGE = "inspection pass"  # the app's extra pass for its pages, not part of the call
# Eager attention on a 2-core CPU: ~4.5 s per pass at 1,024 tokens, ~25 s at 2,048. The journey
# runs two passes (inspection and prefill), so longer prompts are refused rather than left to hang.
MAX_JOURNEY_TOKENS = 1024
# One inspection pass keeps every layer's attention for up to this many prompt tokens.
ATTENTION_TOKENS = 128


@dataclass(frozen=True)
class JourneyInput:
    """Everything a user sets: the prompt, the conversation around it and the sampling settings."""

    prompt: str
    system: str | None = None
    history: tuple[tuple[str, str], ...] = ()  # (role, content) turns before the prompt
    raw: bool = False  # a plain completion of the prompt, without the chat template
    sampling: SamplingSettings = SamplingSettings()
    max_tokens: int = 48
    stop: tuple[str, ...] = ()
    include_usage: bool = True
    window: int | None = None  # a smaller window for a demo; None: the model's own

    def conversation(self) -> Conversation:
        history = [{"role": role, "content": content} for role, content in self.history]
        return Conversation(new_message=self.prompt, system=self.system or None, history=history)


@dataclass(frozen=True)
class StageTiming:
    """Wall time of one stage (or one decode step) of this run."""

    stage: str
    seconds: float
    detail: str = ""


@dataclass
class PreparedPrompt:
    """The journey before the model runs: the request, the prompt's tokens, the template and the budget."""

    input: JourneyInput
    model_name: str
    request: ChatRequest
    prompt_tokens: Tokenization
    rendered: RenderedPrompt
    budget: ContextBudget
    timings: list[StageTiming]


@dataclass
class Prefill:
    """The prompt read once by the engine, batched with everyone's work: the next-token distribution.

    The Next token and Sampling pages need only this; the engine keeps the prompt's keys and
    values in its prefix cache, so the generation that may follow starts from them.
    """

    next_token: NextTokenDistribution
    seconds: float  # asking to answer, waiting included
    waited_seconds: float  # in the engine's queue
    cached_tokens: int  # prompt tokens already in the engine's prefix cache


@dataclass
class Inspection:
    """The inspection pass over the rendered prompt and the next-token distribution it ends in.

    ``waited_seconds`` is the time between asking for the pass and the model starting it (the
    engine was busy with other work); ``seconds`` is the whole stage's wall time.
    """

    forward: ForwardPass
    next_token: NextTokenDistribution
    seconds: float
    waited_seconds: float


@dataclass
class Answer:
    """The generation of one prepared prompt: its steps, the SSE stream it became and the response."""

    generation: Generation
    stream: list[StreamEvent]
    stream_metrics: StreamMetrics
    detokenized: list[DetokenizedStep]
    response: dict
    timings: list[StageTiming]
    waited_seconds: float = 0.0
    cached_tokens: int = 0
    call: list[Span] = field(default_factory=list)  # where the call's time went, on the stream's clock
    ahead: tuple[str, ...] = ()  # labels of the engine requests already there when it arrived
    jobs_ahead: int = 0  # exclusive engine jobs (inspection passes, measurements) queued when it arrived
    remote: str | None = None  # the remote engine's base URL when the tokens came from one
    remote_prompt_tokens: int | None = None  # the prompt tokens the remote's usage counted


@dataclass
class Journey:
    """Every stage's result for one prompt, and how long each took."""

    input: JourneyInput
    model_name: str
    request: ChatRequest
    prompt_tokens: Tokenization
    rendered: RenderedPrompt
    budget: ContextBudget
    forward: ForwardPass
    next_token: NextTokenDistribution
    sampled: SampledDistribution
    generation: Generation
    stream: list[StreamEvent]
    stream_metrics: StreamMetrics
    detokenized: list[DetokenizedStep]
    response: dict
    timings: list[StageTiming] = field(default_factory=list)
    waited_seconds: float = 0.0  # the generation's time in the engine's queue, as an API call of it would wait
    call: list[Span] = field(default_factory=list)  # the generation's spans (lifecycle.features.call_timeline)
    ahead: tuple[str, ...] = ()  # what the engine held when the generation arrived
    jobs_ahead: int = 0

    @property
    def total_seconds(self) -> float:
        """The stages an API call of this request goes through (the app's inspection pass left out)."""
        return sum(t.seconds for t in self.timings if t.stage != INSPECTION_STAGE)

    @property
    def inspection_seconds(self) -> float:
        """The app's own extra forward pass for its pages, which a plain API call never runs."""
        return sum(t.seconds for t in self.timings if t.stage == INSPECTION_STAGE)

    @classmethod
    def of(cls, prepared: PreparedPrompt, inspection: Inspection, answer: Answer) -> Journey:
        """The whole journey from its three stages (each possibly computed apart and cached)."""
        inspection_timing = StageTiming(
            INSPECTION_STAGE, inspection.seconds, "one extra forward pass for the attention and logit-lens views"
        )
        return cls(
            input=prepared.input,
            model_name=prepared.model_name,
            request=prepared.request,
            prompt_tokens=prepared.prompt_tokens,
            rendered=prepared.rendered,
            budget=prepared.budget,
            forward=inspection.forward,
            next_token=inspection.next_token,
            sampled=sampled_next_token(prepared, inspection),
            generation=answer.generation,
            stream=answer.stream,
            stream_metrics=answer.stream_metrics,
            detokenized=answer.detokenized,
            response=answer.response,
            timings=[*prepared.timings, inspection_timing, *answer.timings],
            waited_seconds=answer.waited_seconds,
            call=answer.call,
            ahead=answer.ahead,
            jobs_ahead=answer.jobs_ahead,
        )


def validate_input(inp: JourneyInput) -> None:
    """Raise LifecycleError for input no stage can take (named after the parameter)."""
    if not isinstance(inp.prompt, str) or not inp.prompt.strip():
        raise LifecycleError("The prompt is empty: type a message to send.", param="prompt")
    if len(inp.prompt) > MAX_PROMPT_CHARS:
        raise LifecycleError(
            f"The prompt has {len(inp.prompt):,} characters; this app takes at most {MAX_PROMPT_CHARS:,}.",
            param="prompt",
        )
    if isinstance(inp.max_tokens, bool) or not isinstance(inp.max_tokens, int) or inp.max_tokens < 1:
        raise LifecycleError(f"max_tokens must be an integer >= 1, got {inp.max_tokens!r}", param="max_tokens")
    inp.sampling.validate()


class _Stopwatch:
    def __init__(self) -> None:
        self.timings: list[StageTiming] = []

    def run(self, stage: str, work: Callable[[], object], detail: str = "") -> object:
        started = time.perf_counter()
        result = work()
        self.timings.append(StageTiming(stage, time.perf_counter() - started, detail))
        return result


def prepare(inp: JourneyInput, model_name: str, model_window: int) -> PreparedPrompt:
    """The stages before the model: request, tokenization, chat template and window budget (in
    ``inp.window``, else the model's own ``model_window``).

    Raises LifecycleError for input no stage can take; a prompt too long to run is still prepared
    (the Tokenization and Context window pages show it), ``check_runnable`` refuses it.
    """
    validate_input(inp)
    clock = _Stopwatch()
    request = clock.run("request", lambda: journey_request(inp, model_name))
    prompt_tokens = clock.run("tokenization", lambda: tokenize(inp.prompt))
    rendered = clock.run("chat template", lambda: render_prompt(inp.conversation(), raw=inp.raw))
    budget = context_budget(rendered, inp.window or model_window, inp.max_tokens)
    return PreparedPrompt(inp, model_name, request, prompt_tokens, rendered, budget, clock.timings)


def check_runnable(prepared: PreparedPrompt, loaded: LoadedModel) -> None:
    """Raise LifecycleError when the prompt and its answer do not fit, or are too long for this CPU."""
    inp, rendered, budget = prepared.input, prepared.rendered, prepared.budget
    if not budget.fits or len(rendered.ids) + inp.max_tokens > loaded.context_window:
        raise LifecycleError(
            f"The prompt needs {budget.prompt_tokens:,} tokens plus {inp.max_tokens:,} reserved for the answer, "
            f"more than the {min(budget.window, loaded.context_window):,}-token window.",
            param="messages",
            code="context_length_exceeded",
        )
    if len(rendered.ids) > MAX_JOURNEY_TOKENS:
        raise LifecycleError(
            f"The prompt renders to {len(rendered.ids):,} tokens; on this CPU the full journey runs prompts of up "
            f"to {MAX_JOURNEY_TOKENS:,} tokens (the window allows {loaded.context_window:,}). "
            "The Tokenization and Context window pages still show all of it.",
            param="prompt",
        )


def prefill(prepared: PreparedPrompt, loaded: LoadedModel) -> Prefill:
    """Run the prompt through the engine for its next-token logits alone (no attention, no generation).

    Raises EngineFull when the request is bounded (``origin``) and the engine's queue is full.
    """
    check_runnable(prepared, loaded)
    captured: list[np.ndarray] = []

    def keep(logits: np.ndarray) -> None:
        captured.append(logits)
        return None  # no token: the request ends after its prompt

    origin = current_origin()
    started = time.perf_counter()
    handle = shared_engine(loaded).submit(EngineRequest(
        prompt_ids=list(prepared.rendered.ids), max_tokens=1, step=keep, label=origin.label, tag=origin.tag,
        bounded=origin.bounded,
    ))
    handle.wait()
    if handle.error is not None:
        raise handle.error
    logits = captured[0]
    next_token = next_token_distribution(logits, lambda i: token_text(loaded, i))
    return Prefill(next_token, time.perf_counter() - started, handle.waited_seconds, handle.cached_tokens)


def inspect_prompt(prepared: PreparedPrompt, loaded: LoadedModel) -> Inspection:
    """The inspection pass (attention, logit lens, embeddings) and the next-token distribution."""
    check_runnable(prepared, loaded)
    started = time.perf_counter()
    forward = run_forward(loaded, prepared.rendered.ids, max_attention_tokens=ATTENTION_TOKENS)
    next_token = next_token_distribution(forward.last_logits, lambda i: token_text(loaded, i))
    seconds = time.perf_counter() - started
    # What the stage took beyond the model's own pass is time spent waiting for the model.
    return Inspection(forward, next_token, seconds, waited_seconds=max(0.0, seconds - forward.seconds))


def sampled_next_token(prepared: PreparedPrompt, inspection: Inspection) -> SampledDistribution:
    """The next-token distribution after this run's sampling settings (no model run)."""
    return apply_sampling(inspection.forward.last_logits, prepared.input.sampling, previous_ids=prepared.rendered.ids,
                          generated_ids=[])


def answer(
    prepared: PreparedPrompt,
    loaded: LoadedModel,
    on_step: Callable[[GenerationStep], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Answer:
    """Generate for real while producing the SSE stream, then detokenize and build the response.

    ``on_step`` is called with each generated token as soon as it exists. With
    ``LIFECYCLE_ENGINE_URL`` set the tokens come from that remote engine (lifecycle.engine.remote).
    """
    check_runnable(prepared, loaded)
    inp, rendered = prepared.input, prepared.rendered
    started = time.perf_counter()
    step_timings: dict = {}
    steps: list[GenerationStep] = []

    remote = None if inp.raw else remote_engine()  # a chat API cannot take a raw completion of token ids
    if remote is not None:
        source = remote.generate_steps(loaded, prepared.request.to_payload(), cancelled, step_timings)
    else:
        source = generate_steps(loaded, rendered.ids, inp.sampling, inp.max_tokens, inp.stop,
                                cancelled=cancelled, timings=step_timings)

    def recorded():
        for step in source:
            steps.append(step)
            if on_step is not None:
                on_step(step)
            yield step

    events = list(
        stream_events(
            recorded(),
            completion_id=new_completion_id(),
            model_name=prepared.model_name,
            prompt_tokens=len(rendered.ids),
            include_usage=inp.include_usage,
            started=started,
        )
    )
    prefill = step_timings.get("prefill_seconds", 0.0)
    where = f" on the remote engine {remote.base_url}" if remote is not None else ""
    timings = [StageTiming("prefill", prefill, f"{len(rendered.ids):,} prompt tokens in one pass{where}")]
    timings += [StageTiming(f"decode {step.index + 1}", step.seconds, show_token(step.text)) for step in steps]
    generation = Generation.collect(rendered.ids, steps, prefill)
    clock = _Stopwatch()
    detokenized = clock.run("detokenization", lambda: detokenize(generation.token_ids, loaded))
    response = build_response(
        completion_id=events[0].data["id"],
        model=prepared.model_name,
        text=generation.text,
        finish_reason=generation.finish_reason,
        prompt_tokens=len(rendered.ids),
        completion_tokens=generation.completion_tokens,
        created=events[0].data["created"],
    )
    return Answer(
        generation=generation,
        stream=events,
        stream_metrics=stream_metrics(events),
        detokenized=detokenized,
        response=response,
        timings=timings + clock.timings,
        waited_seconds=float(step_timings.get("waited_seconds", 0.0)),
        cached_tokens=int(step_timings.get("cached_tokens", 0)),
        call=call_spans(started, step_timings.get("submitted_at", started), step_timings.get("started_at", started),
                        prefill, steps, events[-1].at),
        ahead=tuple(step_timings.get("ahead", ())),
        jobs_ahead=int(step_timings.get("jobs_ahead", 0)),
        remote=remote.base_url if remote is not None else None,
        remote_prompt_tokens=step_timings.get("prompt_tokens") if remote is not None else None,
    )


def run_journey(inp: JourneyInput, loaded: LoadedModel | None = None) -> Journey:
    """Carry ``inp`` through every stage on the real model."""
    loaded = loaded or shared_model()
    prepared = prepare(inp, loaded.name, loaded.context_window)
    check_runnable(prepared, loaded)
    generated = answer(prepared, loaded)  # first, so the inspection pass never delays it
    return Journey.of(prepared, inspect_prompt(prepared, loaded), generated)


def journey_request(inp: JourneyInput, model: str | None = None) -> ChatRequest:
    """The streamed chat-completions request a client sends for ``inp`` (what the Request page shows)."""
    return chat_request(
        inp.prompt,
        system=inp.system or None,
        history=inp.conversation().history,
        model=model,
        sampling=inp.sampling,
        max_tokens=inp.max_tokens,
        stream=True,
        include_usage=inp.include_usage,
        stop=inp.stop,
    )
