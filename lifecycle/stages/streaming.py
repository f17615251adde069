"""Streaming: the generation delivered as OpenAI-style server-sent events, token by token.

A streamed chat completion is a sequence of ``data: {json}`` events, each a
``chat.completion.chunk`` with the same id, created time and model: first a role-only delta,
then content deltas as the text becomes available (a character split across tokens arrives in
one delta once complete), then one chunk with an empty delta and the finish_reason, optionally
a usage chunk with empty choices, and finally ``data: [DONE]``. Asked for, each content delta
carries its tokens' log-probabilities. Several choices (``n`` > 1) are generated at once and
their chunks interleave, each naming its choice's ``index``. Every event carries the real
time it was produced, so time to first token and inter-token latencies are measured, not
simulated. ``parse_sse`` and ``assemble`` read such a stream back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from lifecycle.errors import LifecycleError
from lifecycle.stages.generation import generate_steps
from lifecycle.features.guardrail import Guardrail
from lifecycle.stages.logprobs import token_logprob
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.features.tools import OutputRules, ToolCallStream

DONE = "[DONE]"


@dataclass(frozen=True)
class StreamEvent:
    """One SSE event: the chunk (None for ``[DONE]``), its wire form, and when it was produced
    (seconds since the request started). ``error`` keeps the exception behind an error event."""

    data: dict | None
    sse: str
    at: float
    error: BaseException | None = None


def sse_line(data: dict | None) -> str:
    """The wire form of one event: one ``data:`` line of single-line JSON, then a blank line."""
    payload = DONE if data is None else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n"


def _event(data: dict | None, started: float, error: BaseException | None = None) -> StreamEvent:
    return StreamEvent(data, sse_line(data), time.perf_counter() - started, error)


def error_events(
    message: str, started: float, error_type: str = "server_error", code: str | None = None,
    error: BaseException | None = None,
) -> list[StreamEvent]:
    """The end of a stream that failed after its headers were sent: an error event, then ``[DONE]``."""
    envelope = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return [_event(envelope, started, error), _event(None, started)]


def stream_completion(
    loaded,
    prompt_ids: Sequence[int],
    settings: SamplingSettings,
    max_tokens: int,
    model_name: str,
    completion_id: str,
    include_usage: bool,
    stop: Sequence[str] = (),
    cancelled: Callable[[], bool] | None = None,
    started: float | None = None,
    created: int | None = None,
    logprobs: int | None = None,
    output: OutputRules | None = None,
    guardrail: Guardrail | None = None,
) -> Iterator[StreamEvent]:
    """Validate now (LifecycleError before any SSE byte), then stream the real generation.

    ``started`` is the request's ``time.perf_counter()`` at arrival (default: now). A failure
    during generation ends the stream with an error event and ``[DONE]`` instead of raising.
    A cancelled generation ends with finish_reason "cancelled" (a client that left sees nothing).
    ``logprobs`` (None: off) is how many alternatives each token's logprobs list. ``output``
    (lifecycle.features.tools.OutputRules) constrains the answer to its grammar and, when it may call a
    tool, streams a call as OpenAI does: id, type and name first, then argument fragments.
    ``guardrail`` (lifecycle.features.guardrail) ends the stream with "content_filter" before a blocked phrase.
    """
    output = output or OutputRules()
    steps = generate_steps(loaded, prompt_ids, settings, max_tokens, stop, cancelled=cancelled,
                           constraint=output.constraint(loaded), guardrail=guardrail)
    return stream_events(steps, completion_id, model_name, len(prompt_ids), include_usage, started, created, logprobs,
                         tool_calls=output.may_call)


def stream_events(
    steps: Iterable,
    completion_id: str,
    model_name: str,
    prompt_tokens: int,
    include_usage: bool,
    started: float | None = None,
    created: int | None = None,
    logprobs: int | None = None,
    tool_calls: bool = False,
) -> Iterator[StreamEvent]:
    """The SSE events of generation steps as they arrive, for a caller that also keeps the steps."""
    return stream_choice_events([steps], completion_id, model_name, prompt_tokens, include_usage, started, created,
                                logprobs, tool_calls)


def stream_choice_events(
    choice_steps: Sequence[Iterable],
    completion_id: str,
    model_name: str,
    prompt_tokens: int,
    include_usage: bool,
    started: float | None = None,
    created: int | None = None,
    logprobs: int | None = None,
    tool_calls: bool = False,
) -> Iterator[StreamEvent]:
    """The SSE events of one or more choices (choice i from ``choice_steps[i]``): several choices'
    chunks interleave, one step of each in turn; usage counts the tokens of all of them. With ``tool_calls`` each
    choice's text is read as a possible tool call (lifecycle.features.tools.ToolCallStream)."""
    started = time.perf_counter() if started is None else started
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": int(created or time.time()), "model": model_name}
    return _events(choice_steps, head, prompt_tokens, include_usage, started, logprobs, tool_calls)


def _choice(index: int, delta: dict, logprobs: list[dict] | None, finish_reason: str | None = None) -> dict:
    shown = {"content": logprobs, "refusal": None} if logprobs else None
    return {"index": index, "delta": delta, "logprobs": shown, "finish_reason": finish_reason}


def _choice_deltas(steps: Iterable, index: int, logprobs: int | None, counted: list[int],
                   tool_calls: bool = False) -> Iterator[dict]:
    """One choice's chunk choices after its role chunk: content (or tool-call) deltas, each
    carrying the logprobs of the tokens it releases, then the finish. ``counted[index]`` counts
    the tokens."""
    pending: list[dict] = []
    finish_reason = None
    reader = ToolCallStream() if tool_calls else None
    for step in steps:
        counted[index] += 1
        finish_reason = step.finished
        if logprobs is not None and not step.end_of_sequence:
            pending.append(token_logprob(step, logprobs))
        for delta in reader.feed(step.delta) if reader else ([{"content": step.delta}] if step.delta else []):
            yield _choice(index, delta, pending)
            pending = []
    if reader and reader.call and finish_reason == "stop":
        finish_reason = "tool_calls"
    yield _choice(index, {}, pending, finish_reason or "cancelled")


def _events(choice_steps, head: dict, prompt_tokens: int, include_usage: bool, started: float,
            logprobs: int | None, tool_calls: bool = False) -> Iterator[StreamEvent]:
    def chunk(choices: list[dict], usage: dict | None = None) -> dict:
        return {**head, "choices": choices, **({"usage": usage} if include_usage else {})}

    for index in range(len(choice_steps)):
        yield _event(chunk([_choice(index, {"role": "assistant", "content": ""}, None)]), started)
    counted = [0] * len(choice_steps)
    sources = [_choice_deltas(steps, index, logprobs, counted, tool_calls) for index, steps in enumerate(choice_steps)]
    try:
        for _, choice in interleave(sources):
            yield _event(chunk([choice]), started)
    except Exception as error:  # noqa: BLE001 - headers are sent: the only way left to report is an error event
        yield from error_events(f"Generation failed: {type(error).__name__}: {error}".splitlines()[0], started, error=error)
        return
    if include_usage:
        completion_tokens = sum(counted)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        yield _event(chunk([], usage), started)
    yield _event(None, started)


def interleave(sources: Sequence[Iterator]) -> Iterator[tuple[int, object]]:
    """(index, item) of several iterators taken in turn, one item from each while any is left.
    Each choice's generation is its own engine request, so while one waits for its next token
    the others' are produced in the same decode steps."""
    active = list(enumerate(sources))
    while active:
        for entry in list(active):
            item = next(entry[1], None)
            if item is None:
                active.remove(entry)
            else:
                yield entry[0], item


@dataclass(frozen=True)
class StreamMetrics:
    """What a client measures. ``ttft``: seconds to the first content delta. ``inter_token``: gaps
    between consecutive content deltas. ``tokens_per_second``: content deltas per second after the
    first (1 / mean gap; a delta is one token except when a split character arrives whole)."""

    ttft: float
    inter_token: list[float]
    tokens_per_second: float
    total_seconds: float


def delta_content(data: dict | None) -> str:
    """The text in choice 0's delta of one chunk: its content, or the tool-call name or arguments
    fragment it carries ("" for role-only, finish, usage and error chunks)."""
    try:
        delta = data["choices"][0]["delta"]
        calls = delta.get("tool_calls") or [{}]
        function = calls[0].get("function") or {}
        return delta.get("content") or function.get("name") or function.get("arguments") or ""
    except (TypeError, KeyError, IndexError, AttributeError):
        return ""


def event_data(sse: str) -> dict | None:
    """The JSON object one ``data: {...}`` event carries (None for ``[DONE]`` or anything not an object)."""
    text = sse.strip().removeprefix("data:").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def frame_kind(sse: str) -> str:
    """What one frame is: role (the first delta), content, finish, usage, done, error or other."""
    if sse.strip().removeprefix("data:").strip() == "[DONE]":
        return "done"
    data = event_data(sse)
    if data is None:
        return "other"
    if "error" in data:
        return "error"
    choices = data.get("choices")
    if not choices:
        return "usage" if data.get("usage") else "other"
    choice = choices[0] if isinstance(choices[0], dict) else {}
    delta = choice.get("delta") or {}
    if choice.get("finish_reason"):
        return "finish"
    if delta_content(data):
        return "content"
    return "role" if "role" in delta else "other"


def stream_metrics(events: Iterable[StreamEvent]) -> StreamMetrics:
    """Latency figures from the events' own timestamps (zeros when there was no content)."""
    events = list(events)
    times = [event.at for event in events if delta_content(event.data)]
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    rate = len(gaps) / sum(gaps) if gaps and sum(gaps) > 0 else 0.0
    return StreamMetrics(times[0] if times else 0.0, gaps, rate, events[-1].at if events else 0.0)


def parse_sse(text: str) -> list[dict]:
    """The JSON chunks of a raw SSE body, in order; ``[DONE]``, comments and other fields are skipped.

    Accepts ``\\n``, ``\\r\\n`` or ``\\r`` line ends and multi-line data; raises LifecycleError on an
    event whose data is not JSON.
    """
    chunks = []
    for block in text.replace("\r\n", "\n").replace("\r", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line.startswith("data:")]
        payload = "\n".join(line[5:].removeprefix(" ") for line in lines)
        if not lines or payload.strip() == DONE:
            continue
        try:
            chunks.append(json.loads(payload))
        except json.JSONDecodeError as error:
            raise LifecycleError(f"SSE event is not JSON: {payload[:80]!r}", param="stream") from error
    return chunks


def assemble(chunks: Iterable[dict], index: int = 0) -> tuple[str, str | None, dict | None]:
    """Reassemble choice ``index``'s text, its finish_reason and the usage; an error event raises
    LifecycleError."""
    parts, finish_reason, usage = [], None, None
    for chunk in chunks:
        if "error" in chunk:
            error = chunk["error"] or {}
            raise LifecycleError(f"stream error: {error.get('message')}", code=error.get("code"))
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) == index:
                parts.append((choice.get("delta") or {}).get("content") or "")
                finish_reason = choice.get("finish_reason") or finish_reason
        usage = chunk.get("usage") or usage
    return "".join(parts), finish_reason, usage


def stream_problems(chunks: Sequence[dict]) -> list[str]:
    """Where a parsed stream breaks the chat-completions streaming rules (empty list: none)."""
    problems = []
    if len({c.get("id") for c in chunks}) > 1:
        problems.append("id is not constant")
    indexes = sorted({choice.get("index", 0) for c in chunks for choice in c.get("choices") or []}) or [0]
    for index in indexes:
        own = [choice for c in chunks for choice in c.get("choices") or [] if choice.get("index", 0) == index]
        if not own or own[0].get("delta") != {"role": "assistant", "content": ""}:
            problems.append("first delta is not role-only")
        finishing = [i for i, choice in enumerate(own) if choice.get("finish_reason")]
        if len(finishing) != 1 or finishing[0] != len(own) - 1:
            problems.append("finish_reason is not set exactly once, in the last choice chunk")
    with_usage = [c for c in chunks if c.get("usage")]
    if with_usage:
        usage = with_usage[-1]["usage"]
        if len(with_usage) > 1 or chunks[-1] is not with_usage[-1] or chunks[-1].get("choices") != []:
            problems.append("usage is not only in a final chunk with empty choices")
        if usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) != usage.get("total_tokens"):
            problems.append("usage tokens do not add up")
        if any("usage" not in c for c in chunks):
            problems.append("a chunk lacks usage: null")
    return problems
