"""Generation: the autoregressive loop, one token at a time, on the real model with its KV cache.

The prompt is run once (prefill) and its keys and values kept in the cache; every later step
feeds only the newest token. Each step turns the last logits into a sampled distribution
(lifecycle.stages.sampling), chooses a token, and records it with its probability, the top
alternatives and its wall time. Generation ends at an end-of-sequence token or a stop sequence
(finish_reason "stop"), at max_tokens ("length"), or when the caller cancels ("cancelled").
Any step can be forced to another token, so a page can branch from an alternative. A grammar
constraint (lifecycle.features.grammar) masks each step's distribution to the tokens that keep the output
valid, and ends the generation ("stop") as soon as the grammar is complete.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lifecycle.stages.detokenization import IncrementalDetokenizer
from lifecycle.engine import EngineRequest, current_origin, shared_engine
from lifecycle.stages.vocabulary import token_bytes, token_display
from lifecycle.errors import LifecycleError
from lifecycle.features.guardrail import FINISH_REASON as GUARDRAIL_FINISH, Guardrail
from lifecycle.stages.sampling import (
    SampledDistribution,
    SamplingSettings,
    TokenCandidate,
    apply_sampling,
    choose_token,
    top_ids,
)

ALTERNATIVES = 5
TOP_LOGPROBS = 20  # OpenAI's maximum top_logprobs; every step keeps this many of the model's best
# How often a consumer waiting for the next step re-checks whether the engine dropped the request.
_POLL_SECONDS = 0.05
END_OF_TEXT_TOKENS = ("<|endoftext|>", "<|im_end|>")


@dataclass(frozen=True)
class TokenLogprob:
    """A token and its log-probability under the model's own distribution (before sampling moved
    or removed anything, as OpenAI-compatible servers report ``logprobs``)."""

    token_id: int
    token_bytes: bytes
    logprob: float


@dataclass
class GenerationStep:
    """One generated token. ``delta`` is the content text this step released to the reader (held
    back while a UTF-8 character or a possible stop sequence is incomplete); ``held`` is the bytes
    of an unfinished character after this step; ``seconds`` is the step's own wall time (model
    call + sampling), not the time a consumer spent between steps. ``end_of_sequence`` marks the
    model's end-of-sequence token: it ends the generation and counts as a completion token (as in
    vLLM), but it is not part of the content, so no logprobs entry shows it."""

    index: int
    token_id: int
    text: str
    probability: float
    alternatives: list[TokenCandidate]
    seconds: float
    forced: bool
    finished: str | None = None
    delta: str = ""
    token_bytes: bytes = b""
    held: bytes = b""
    base_probability: float = 0.0
    grammar_allowed: int | None = None
    logprob: float = 0.0
    top_logprobs: list[TokenLogprob] = field(default_factory=list)
    made_at: float = 0.0  # time.perf_counter() when its token was chosen (set by whoever makes the step)
    end_of_sequence: bool = False


@dataclass
class Generation:
    """A finished generation: every step, the content text, and prefill and decode time kept apart.
    ``waited_seconds`` is the time it waited for the engine; ``cached_tokens`` the prompt tokens the
    prefix cache served (OpenAI's ``usage.prompt_tokens_details.cached_tokens``)."""

    prompt_ids: list[int]
    steps: list[GenerationStep]
    finish_reason: str
    text: str
    prefill_seconds: float
    decode_seconds: float
    waited_seconds: float = 0.0
    cached_tokens: int = 0

    @property
    def token_ids(self) -> list[int]:
        return [step.token_id for step in self.steps]

    @property
    def completion_tokens(self) -> int:
        return len(self.steps)

    @classmethod
    def collect(cls, prompt_ids: Sequence[int], steps: list[GenerationStep], prefill_seconds: float,
                waited_seconds: float = 0.0, cached_tokens: int = 0) -> Generation:
        """The finished generation of ``steps`` (as ``generate_steps`` yielded them)."""
        return cls(
            prompt_ids=[int(i) for i in prompt_ids],
            steps=steps,
            finish_reason=steps[-1].finished if steps else "cancelled",
            text="".join(step.delta for step in steps),
            prefill_seconds=prefill_seconds,
            decode_seconds=sum(step.seconds for step in steps),
            waited_seconds=waited_seconds,
            cached_tokens=cached_tokens,
        )


def end_of_sequence_ids(loaded) -> frozenset[int]:
    """Token ids that end a generation: the tokenizer's and generation config's EOS, plus the end-of-text markers."""
    tokenizer = loaded.tokenizer
    ids = {loaded.eos_token_id}
    configured = loaded.generation_eos
    ids |= set(configured) if isinstance(configured, (list, tuple)) else {configured}
    # One look-up per marker: building the whole vocabulary (get_vocab) took ~90 ms of every request's TTFT.
    for marker in END_OF_TEXT_TOKENS:
        found = tokenizer.convert_tokens_to_ids(marker)
        if found is not None and (found != tokenizer.unk_token_id or marker == tokenizer.unk_token):
            ids.add(found)
    return frozenset(int(i) for i in ids if i is not None)


@dataclass
class _StopText:
    """Releases generated text, holding back any tail that could still grow into a stop sequence
    or a phrase the guardrail blocks."""

    stops: tuple[str, ...]
    guardrail: Guardrail | None = None
    pending: str = ""
    released: list[str] = field(default_factory=list)

    def feed(self, text: str) -> tuple[str, str | None]:
        """Add text; return (what may be released now, "stop" or "content_filter" if that ends it)."""
        self.pending += text
        hits = [(i, "stop") for i in (self.pending.find(stop) for stop in self.stops) if i >= 0]
        blocked = self.guardrail.first_match(self.pending) if self.guardrail else None
        hits += [(blocked, GUARDRAIL_FINISH)] if blocked is not None else []
        if hits:
            end, reason = min(hits)
            return self._release(end), reason
        hold = max((k for stop in self.stops for k in range(1, len(stop)) if self.pending.endswith(stop[:k])), default=0)
        hold = max(hold, self.guardrail.held(self.pending) if self.guardrail else 0)
        return self._release(len(self.pending) - hold), None

    def finish(self, text: str) -> str:
        """End of generation without a stop sequence: everything pending is content."""
        self.pending += text
        return self._release(len(self.pending))

    def _release(self, end: int) -> str:
        out, self.pending = self.pending[:end], self.pending[end:]
        self.released.append(out)
        return out


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_request(loaded, prompt_ids, settings, max_tokens, stop, forced) -> tuple[list[int], tuple[str, ...]]:
    settings.validate()
    vocab = loaded.vocab_size
    ids = [int(i) for i in prompt_ids]
    if not ids:
        raise LifecycleError("the prompt has no tokens", param="messages")
    if min(ids) < 0 or max(ids) >= vocab:
        raise LifecycleError(f"prompt token ids must be in [0, {vocab})", param="messages")
    if not _is_int(max_tokens) or max_tokens < 1:
        raise LifecycleError(f"max_tokens must be an integer >= 1, got {max_tokens!r}", param="max_tokens")
    if len(ids) + max_tokens > loaded.context_window:
        raise LifecycleError(
            f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the context window ({loaded.context_window})",
            param="messages",
            code="context_length_exceeded",
        )
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    if not all(isinstance(s, str) and s for s in stops):
        raise LifecycleError("stop must be a string or a list of non-empty strings", param="stop")
    for index, token_id in (forced or {}).items():
        if not (_is_int(index) and _is_int(token_id) and index >= 0 and 0 <= token_id < vocab):
            raise LifecycleError(f"forced token {token_id!r} at step {index!r} is not a valid step/token id", param="forced")
    return ids, stops


def generate_steps(
    loaded,
    prompt_ids: Sequence[int],
    settings: SamplingSettings,
    max_tokens: int,
    stop: Sequence[str] = (),
    forced: Mapping[int, int] | None = None,
    cancelled: Callable[[], bool] | None = None,
    timings: dict | None = None,
    constraint=None,
    guardrail: Guardrail | None = None,
) -> Iterator[GenerationStep]:
    """Validate now (LifecycleError before any model work), then yield steps as they are generated.

    The request runs in the shared engine (lifecycle.engine), batched with everyone else's; the
    sampling, stop strings and forced tokens run in its step callable. The last step carries
    ``finished``. ``cancelled`` is checked between prefill chunks and after every token; if it is
    already true before the prefill nothing is yielded. Closing the generator cancels the request.
    ``timings`` (optional) receives "prefill_seconds", "waited_seconds" (in the engine's queue),
    "cached_tokens" (prompt tokens served by the prefix cache), "submitted_at" and "started_at" (perf_counter
    when the engine got it and when its prefill began), "ahead" (labels of the requests in
    the engine when it arrived) and "jobs_ahead" (exclusive jobs queued then) once the prompt has run.
    ``constraint`` (a lifecycle.features.grammar.GrammarConstraint, fresh for this generation) restricts
    every step to the tokens its grammar allows. ``guardrail`` (lifecycle.features.guardrail) ends the
    generation with "content_filter" where a blocked phrase starts, withholding it.
    """
    ids, stops = _check_request(loaded, prompt_ids, settings, max_tokens, stop, forced)
    return _steps(loaded, ids, settings, max_tokens, stops, dict(forced or {}), cancelled or (lambda: False), timings,
                  constraint, guardrail)


def _steps(loaded, ids, settings, max_tokens, stops, forced, cancelled, timings, constraint,
           guardrail=None) -> Iterator[GenerationStep]:
    """Submit to the engine a step callable that samples, records and decides; yield its records."""
    vocabulary = token_bytes(loaded)
    detokenizer = IncrementalDetokenizer(vocabulary)
    stop_text = _StopText(stops, guardrail)
    eos = end_of_sequence_ids(loaded)
    rng = np.random.default_rng(settings.seed)
    history = list(ids)
    records: queue.SimpleQueue[GenerationStep] = queue.SimpleQueue()
    closed = threading.Event()
    clock = {"index": 0, "last": None}

    def choose(logits: np.ndarray) -> int | None:
        # A step's seconds: from the end of this request's previous step (so the batch's model call
        # is included) to the end of its sampling; the first step's prefill is timed apart.
        index, started = clock["index"], clock["last"] or time.perf_counter()
        allowed = constraint.allowed() if constraint is not None else None
        distribution = apply_sampling(logits, settings, history, history[len(ids):], allowed)
        token_id = int(forced[index]) if index in forced else choose_token(distribution, rng)
        history.append(token_id)
        delta, finished = _advance(detokenizer, stop_text, token_id, eos)
        if constraint is not None and token_id not in eos:
            constraint.accept(token_id)
            finished = finished or ("stop" if constraint.complete else None)
        if finished is None and (index == max_tokens - 1 or cancelled()):
            finished = "length" if index == max_tokens - 1 else "cancelled"
        if finished in ("length", "cancelled") or token_id in eos or (constraint is not None and constraint.complete):
            # Bytes of a character the model never finished are dropped, not shown as U+FFFD;
            # the step's ``held`` still records them.
            delta += stop_text.finish("")
        step = _record(index, token_id, distribution, vocabulary, index in forced, finished, delta, detokenizer.held, started)
        step.end_of_sequence = token_id in eos
        step.grammar_allowed = int(np.count_nonzero(allowed)) if allowed is not None else None
        records.put(step)
        clock["index"], clock["last"] = index + 1, step.made_at  # the next step's time starts where this one ended
        return None if finished else token_id

    if cancelled():
        return
    origin = current_origin()
    handle = shared_engine(loaded).submit(EngineRequest(
        prompt_ids=ids,
        max_tokens=max_tokens,
        step=choose,
        # Once decoding, the step callable notices cancellation itself and ends with a "cancelled" step.
        cancelled=lambda: closed.is_set() or (clock["index"] == 0 and cancelled()),
        label=origin.label,
        tag=origin.tag,
        started=origin.started,
        bounded=origin.bounded,
    ))
    try:
        yield from _drain(records, handle, timings)
    finally:
        closed.set()
        handle.cancel()


def _drain(records: queue.SimpleQueue, handle, timings: dict | None) -> Iterator[GenerationStep]:
    """Yield the step callable's records until the last one (or the engine ends the request)."""
    first = True
    while True:
        try:
            record = records.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            if handle.done.is_set() and records.empty():
                break
            handle.check()  # a failed or stuck engine ends the wait with EngineUnavailable
            continue
        if first:
            _fill_timings(timings, handle)
            first = False
        yield record
        if record.finished is not None:
            return
    _fill_timings(timings, handle)
    if handle.error is not None:
        raise handle.error


def _fill_timings(timings: dict | None, handle) -> None:
    if timings is not None:
        timings["prefill_seconds"] = handle.prefill_seconds
        timings["waited_seconds"] = handle.waited_seconds
        timings["cached_tokens"] = handle.cached_tokens
        timings["submitted_at"] = handle.submitted_at
        timings["started_at"] = handle.started_at if handle.started_at is not None else handle.submitted_at
        timings["ahead"] = handle.ahead
        timings["jobs_ahead"] = handle.jobs_ahead


def _advance(detokenizer: IncrementalDetokenizer, stop_text: _StopText, token_id: int, eos) -> tuple[str, str | None]:
    """Push one token; return the releasable text and "stop" or "content_filter" if it ended the generation."""
    if token_id in eos:
        detokenizer.push(token_id)
        return "", "stop"
    return stop_text.feed(detokenizer.push(token_id))


def _record(index, token_id, distribution, vocabulary, forced, finished, delta, held, started) -> GenerationStep:
    data = vocabulary.of(token_id)
    best = top_ids(distribution.base_probs, TOP_LOGPROBS)  # one ranking for the logprobs and the alternatives
    step = GenerationStep(
        index=index,
        token_id=token_id,
        text=token_display(data),
        probability=float(distribution.final_probs[token_id]),
        alternatives=alternatives(distribution, token_id, lambda i: token_display(vocabulary.of(i)), base_best=best),
        seconds=time.perf_counter() - started,
        forced=forced,
        finished=finished,
        delta=delta,
        token_bytes=data,
        held=held,
        base_probability=float(distribution.base_probs[token_id]),
        logprob=_logprob(distribution.base_probs[token_id]),
        top_logprobs=top_logprobs(distribution.base_probs, vocabulary, ranked=best),
    )
    step.made_at = started + step.seconds
    return step


def _logprob(probability: float) -> float:
    return math.log(probability) if probability > 0 else -math.inf


def top_logprobs(base_probs: np.ndarray, vocabulary, k: int = TOP_LOGPROBS,
                 ranked: np.ndarray | None = None) -> list[TokenLogprob]:
    """The model's k most likely tokens with their log-probabilities, most likely first (``ranked``: those ids
    already found, as ``top_ids`` gives them)."""
    ranked = top_ids(base_probs, k) if ranked is None else ranked[:k]
    return [TokenLogprob(int(i), vocabulary.of(int(i)), _logprob(base_probs[i])) for i in ranked]


def alternatives(
    distribution: SampledDistribution, chosen: int, token_text: Callable[[int], str], k: int = ALTERNATIVES,
    base_best: np.ndarray | None = None,
) -> list[TokenCandidate]:
    """The k best tokens by final probability, ties (e.g. every token greedy decoding removed) broken
    by the model's base probability; the chosen token is always included (replacing the k-th).
    ``base_best``: the base distribution's best ids already found (``top_ids``, at least k of them)."""
    final, base = distribution.final_probs, distribution.base_probs
    base_best = top_ids(base, k) if base_best is None else base_best[:k]
    pool = np.unique(np.concatenate([top_ids(final, k), base_best]))
    ranked = [int(i) for i in pool[np.lexsort((pool, -base[pool], -final[pool]))][:k]]
    if chosen not in ranked:
        ranked[-1] = chosen
    ranks = _ranks(final, base, np.array(ranked))
    return [
        TokenCandidate(i, token_text(i), float(final[i]), math.log(final[i]) if final[i] > 0 else -math.inf, rank)
        for i, rank in zip(ranked, ranks)
    ]


def _ranks(final: np.ndarray, base: np.ndarray, ids: np.ndarray) -> list[int]:
    """Each id's rank by final probability, ties broken by base probability (1 + the tokens ahead of it)."""
    f, b = final[ids], base[ids]
    # Only tokens at or above the lowest of these final probabilities can be ahead of any of them.
    near = np.flatnonzero(final >= f.min())
    near_f, near_b = final[near], base[near]
    ahead = (near_f > f[:, None]) | ((near_f == f[:, None]) & (near_b > b[:, None]))
    return [1 + int(n) for n in np.count_nonzero(ahead, axis=1)]


def generate(
    loaded,
    prompt_ids: Sequence[int],
    settings: SamplingSettings,
    max_tokens: int,
    stop: Sequence[str] = (),
    forced: Mapping[int, int] | None = None,
    cancelled: Callable[[], bool] | None = None,
    constraint=None,
) -> Generation:
    """Run the whole loop and collect it; ``text`` is exactly what a stream of the same run delivers."""
    timings: dict = {}
    steps = list(generate_steps(loaded, prompt_ids, settings, max_tokens, stop, forced, cancelled, timings, constraint))
    return Generation.collect(prompt_ids, steps, timings.get("prefill_seconds", 0.0),
                              timings.get("waited_seconds", 0.0), timings.get("cached_tokens", 0))
