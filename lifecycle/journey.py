"""The whole journey: one prompt and its settings carried through every stage, each one timed.

``run_journey`` is what the pages and the command line read. It builds the request, tokenizes
the prompt, renders the chat template and budgets the window, runs one inspection forward pass
(attention, logit lens), then generates for real while producing the SSE stream, and finally
detokenizes and builds the response. Prefill and each decode step are timed apart, so the journey
map shows where the latency lives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lifecycle.context import (
    CONTEXT_WINDOWS,
    ContextBudget,
    Conversation,
    RenderedPrompt,
    context_budget,
    render_prompt,
)
from lifecycle.detokenize import DetokenizedStep, detokenize
from lifecycle.errors import LifecycleError
from lifecycle.forward import ForwardPass, run_forward, token_text
from lifecycle.generate import Generation, generate_steps
from lifecycle.model import LoadedModel, shared_model
from lifecycle.server.chat_request import ChatRequest, chat_request
from lifecycle.server.completion import build_response, new_completion_id
from lifecycle.sampling import (
    NextTokenDistribution,
    SampledDistribution,
    SamplingSettings,
    apply_sampling,
    next_token_distribution,
)
from lifecycle.stream import StreamEvent, StreamMetrics, stream_events, stream_metrics
from lifecycle.tokenize import Tokenization, tokenize

MAX_PROMPT_CHARS = 20_000
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
    window: int = CONTEXT_WINDOWS["model"]

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

    @property
    def total_seconds(self) -> float:
        return sum(t.seconds for t in self.timings)


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


def run_journey(inp: JourneyInput, loaded: LoadedModel | None = None) -> Journey:
    """Carry ``inp`` through every stage on the real model."""
    validate_input(inp)
    loaded = loaded or shared_model()
    clock = _Stopwatch()
    conversation = inp.conversation()
    request = clock.run("request", lambda: journey_request(inp, loaded.name))
    prompt_tokens = clock.run("tokenization", lambda: tokenize(inp.prompt))
    rendered = clock.run("chat template", lambda: render_prompt(conversation, raw=inp.raw))
    budget = context_budget(rendered, inp.window, inp.max_tokens)
    if not budget.fits or len(rendered.ids) + inp.max_tokens > loaded.context_window:
        raise LifecycleError(
            f"The prompt needs {budget.prompt_tokens:,} tokens plus {inp.max_tokens:,} reserved for the answer, "
            f"more than the {min(inp.window, loaded.context_window):,}-token window.",
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
    forward = clock.run(
        "inspection pass",
        lambda: run_forward(loaded, rendered.ids, max_attention_tokens=ATTENTION_TOKENS),
        "one extra forward pass for the attention and logit-lens views",
    )
    next_token = next_token_distribution(forward.last_logits, lambda i: token_text(loaded, i))
    sampled = apply_sampling(forward.last_logits, inp.sampling, previous_ids=rendered.ids, generated_ids=[])
    generation, events = _generate_and_stream(inp, loaded, rendered, clock)
    detokenized = clock.run("detokenization", lambda: detokenize(generation.token_ids, loaded))
    response = build_response(
        completion_id=events[0].data["id"],
        model=loaded.name,
        text=generation.text,
        finish_reason=generation.finish_reason,
        prompt_tokens=len(rendered.ids),
        completion_tokens=generation.completion_tokens,
        created=events[0].data["created"],
    )
    return Journey(
        input=inp,
        model_name=loaded.name,
        request=request,
        prompt_tokens=prompt_tokens,
        rendered=rendered,
        budget=budget,
        forward=forward,
        next_token=next_token,
        sampled=sampled,
        generation=generation,
        stream=events,
        stream_metrics=stream_metrics(events),
        detokenized=detokenized,
        response=response,
        timings=clock.timings,
    )


def journey_request(inp: JourneyInput, model: str | None = None) -> ChatRequest:
    """The streamed chat-completions request a client sends for ``inp`` (what the Request page shows)."""
    s = inp.sampling
    return chat_request(
        inp.prompt,
        system=inp.system or None,
        history=inp.conversation().history,
        model=model,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        min_p=s.min_p,
        repetition_penalty=s.repetition_penalty,
        presence_penalty=s.presence_penalty,
        frequency_penalty=s.frequency_penalty,
        logit_bias=dict(s.logit_bias),
        max_tokens=inp.max_tokens,
        stream=True,
        include_usage=inp.include_usage,
        seed=s.seed,
        stop=inp.stop,
    )


def _generate_and_stream(
    inp: JourneyInput, loaded: LoadedModel, rendered: RenderedPrompt, clock: _Stopwatch
) -> tuple[Generation, list[StreamEvent]]:
    """One real generation, seen both as steps (with alternatives) and as the SSE events it produced."""
    started = time.perf_counter()
    step_timings: dict = {}
    steps = []

    def recorded():
        for step in generate_steps(loaded, rendered.ids, inp.sampling, inp.max_tokens, inp.stop, timings=step_timings):
            steps.append(step)
            yield step

    events = list(
        stream_events(
            recorded(),
            completion_id=new_completion_id(),
            model_name=loaded.name,
            prompt_tokens=len(rendered.ids),
            include_usage=inp.include_usage,
            started=started,
        )
    )
    prefill = step_timings.get("prefill_seconds", 0.0)
    clock.timings.append(StageTiming("prefill", prefill, f"{len(rendered.ids)} prompt tokens in one pass"))
    for step in steps:
        clock.timings.append(StageTiming(f"decode {step.index + 1}", step.seconds, repr(step.text)))
    return Generation.collect(rendered.ids, steps, prefill), events
