"""The Responses API answer: the ``response`` object and its typed stream events.

Where chat completions return ``choices[0].message.content``, a Response returns a list of
``output`` items (here one assistant ``message`` holding one ``output_text`` part, or one
``function_call`` item when the request gave ``tools`` and the model called one), ``status``
("completed", or "incomplete" with the reason when ``max_output_tokens`` ran out) and usage as
``input_tokens`` / ``output_tokens``. Streamed, it is a sequence of named events
(``event: response.output_text.delta`` ...), each with a ``sequence_number``, and no ``[DONE]``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Iterator

from lifecycle.features.guardrail import FINISH_REASON as GUARDRAIL_FINISH
from lifecycle.stages.logprobs import content_steps, token_logprob
from lifecycle.api.responses_request import ResponsesRequest
from lifecycle.stages.streaming import StreamEvent
from lifecycle.features.tools import ToolCall, ToolCallStream, read_output


def new_id(prefix: str) -> str:
    """An id in OpenAI's style: ``resp_`` / ``msg_`` and 48 hex digits."""
    return f"{prefix}_{secrets.token_hex(24)}"


def _message(item_id: str, text: str, status: str, logprobs: list[dict] | None) -> dict:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": [part]}


def _function_call(item_id: str, call: ToolCall, status: str) -> dict:
    return {"type": "function_call", "id": item_id, "call_id": call.id, "name": call.name,
            "arguments": call.arguments, "status": status}


def _tool_echo(tool: dict) -> dict:
    """A function tool as the response echoes it (every field present; ``strict`` defaults to true, as at OpenAI)."""
    return {"type": "function", "name": tool["name"], "description": tool.get("description"),
            "parameters": tool.get("parameters"), "strict": tool.get("strict", True)}


def response_object(
    request: ResponsesRequest, response_id: str, created_at: int, *, status: str = "completed",
    output: list[dict] | None = None, usage: dict | None = None, incomplete: str | None = None,
    cached_tokens: int = 0,
) -> dict:
    """The ``response`` object as it stands (``in_progress`` with no output and no usage while streaming)."""
    body = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "completed_at": int(time.time()) if status in ("completed", "incomplete") else None,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "output": output or [],
        "parallel_tool_calls": request.parallel_tool_calls,
        "previous_response_id": request.previous_response_id,
        "temperature": request.temperature,
        "text": {"format": request.text_format or {"type": "text"}},
        "tool_choice": request.tool_choice or ("auto" if request.tools else "none"),
        "tools": [_tool_echo(tool) for tool in request.tools],
        "top_logprobs": request.top_logprobs,
        "top_p": request.top_p,
        "truncation": "disabled",
        "metadata": request.metadata,
        **request.recorded,  # user, safety_identifier, prompt_cache_key: echoed only when sent
    }
    if usage is not None:
        body["usage"] = {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        }
    return body


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


def _ending(finish_reason: str | None) -> tuple[str, str | None]:
    """(status, incomplete reason) for how the generation ended."""
    if finish_reason == "length":
        return "incomplete", "max_output_tokens"
    if finish_reason == GUARDRAIL_FINISH:  # the guardrail withheld the rest, as OpenAI's content filter does
        return "incomplete", "content_filter"
    return ("completed", None) if finish_reason == "stop" else ("cancelled", None)


def finished_response(
    request: ResponsesRequest, response_id: str, created_at: int, text: str, finish_reason: str, steps: list,
    prompt_tokens: int, call_id: str | None = None, cached_tokens: int = 0,
) -> dict:
    """The final ``response`` object of one generation (its steps give logprobs and the token count);
    a function call read out of the text (``read_output``) is its one ``function_call`` item.
    ``cached_tokens``: the prompt tokens the prefix cache served (``usage.input_tokens_details``)."""
    status, reason = _ending(finish_reason)
    item_status = "completed" if status != "incomplete" else "incomplete"
    calls = read_output(text)[1] if request.may_call else []
    if calls:
        call = ToolCall(call_id or calls[0].id, calls[0].name, calls[0].arguments)
        return response_object(request, response_id, created_at, status=status,
                               output=[_function_call(new_id("fc"), call, item_status)],
                               usage=_usage(prompt_tokens, len(steps)), incomplete=reason,
                               cached_tokens=cached_tokens)
    logprobs = None if request.top_logprobs is None else [token_logprob(s, request.top_logprobs)
                                                          for s in content_steps(steps)]
    item = _message(new_id("msg"), text, item_status, logprobs)
    return response_object(request, response_id, created_at, status=status, output=[item],
                           usage=_usage(prompt_tokens, len(steps)), incomplete=reason, cached_tokens=cached_tokens)


def function_calls(response: dict) -> list[dict]:
    """A response's function calls in chat's ``tool_calls`` form (how the conversation stores them)."""
    return [{"id": item["call_id"], "type": "function",
             "function": {"name": item["name"], "arguments": item["arguments"]}}
            for item in response["output"] if item["type"] == "function_call"]


def output_text(response: dict) -> str:
    """The text of a response's message items, joined (what the SDK's ``response.output_text`` gives)."""
    return "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"] if part["type"] == "output_text")


def _without_bytes(entries: list[dict]) -> list[dict]:
    """Logprobs as the stream events carry them (OpenAI's ResponseLogProb): no ``bytes``."""
    return [
        {"token": e["token"], "logprob": e["logprob"],
         "top_logprobs": [{"token": t["token"], "logprob": t["logprob"]} for t in e["top_logprobs"]]}
        for e in entries
    ]


class _Sequencer:
    """Numbers the events of one stream and gives each its wire form: ``event:`` then ``data:``."""

    def __init__(self, started: float):
        self.started, self.number = started, 0

    def __call__(self, kind: str, **fields) -> StreamEvent:
        data = {"type": kind, "sequence_number": self.number, **fields}
        self.number += 1
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return StreamEvent(data, f"event: {kind}\ndata: {line}\n\n", time.perf_counter() - self.started)


def _message_start(event: _Sequencer, item_id: str) -> Iterator[StreamEvent]:
    yield event("response.output_item.added", output_index=0, item={**_message(item_id, "", "in_progress", None),
                                                                    "content": []})
    yield event("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})


def _call_events(event: _Sequencer, item_id: str, delta: dict) -> Iterator[StreamEvent]:
    """The events for one ``ToolCallStream`` tool-call delta: the item's start, or an arguments fragment."""
    call = delta["tool_calls"][0]
    if "id" in call:
        item = _function_call(item_id, ToolCall(call["id"], call["function"]["name"], ""), "in_progress")
        yield event("response.output_item.added", output_index=0, item=item)
    else:
        yield event("response.function_call_arguments.delta", item_id=item_id, output_index=0,
                    delta=call["function"]["arguments"])


def response_events(
    steps: Iterable, request: ResponsesRequest, response_id: str, prompt_tokens: int, started: float,
    final: list[dict], timings: dict | None = None,
) -> Iterator[StreamEvent]:
    """The typed events of one generation as it runs; the finished ``response`` is appended to ``final``.
    ``timings`` is the dict the steps fill (its ``cached_tokens`` goes in the final usage).

    Without tools the message item opens at once. With tools the first characters decide: a call
    opens a ``function_call`` item whose arguments stream as ``function_call_arguments.delta``,
    any other text opens the message item. A failure after the first event ends the stream with
    ``error`` then ``response.failed``."""
    event = _Sequencer(started)
    created_at = int(time.time())
    message_id, call_item_id = new_id("msg"), new_id("fc")
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    skeleton = response_object(request, response_id, created_at, status="in_progress")
    yield event("response.created", response=skeleton)
    yield event("response.in_progress", response=skeleton)
    reader = ToolCallStream() if request.may_call else None
    opened = reader is None
    if opened:
        yield from _message_start(event, message_id)
    collected, parts, pending = [], [], []
    try:
        for step in steps:
            collected.append(step)
            if request.top_logprobs is not None and not step.end_of_sequence:
                pending.append(token_logprob(step, request.top_logprobs))
            if not step.delta:
                continue
            parts.append(step.delta)
            for delta in reader.feed(step.delta) if reader is not None else [{"content": step.delta}]:
                if "tool_calls" in delta:
                    yield from _call_events(event, call_item_id, delta)
                    continue
                if not opened:
                    yield from _message_start(event, message_id)
                    opened = True
                yield event("response.output_text.delta", **where, delta=delta["content"],
                            logprobs=_without_bytes(pending))
                pending = []
    except Exception as error:  # noqa: BLE001 - the stream has started: report in-band
        yield event("error", code="generation_failed", message=f"Generation failed: {type(error).__name__}.", param=None)
        yield event("response.failed", response={**skeleton, "status": "failed", "error": {
            "code": "server_error", "message": f"Generation failed: {type(error).__name__}."}})
        return
    text = "".join(parts)
    finish_reason = collected[-1].finished if collected else "cancelled"
    response = finished_response(request, response_id, created_at, text, finish_reason, collected, prompt_tokens,
                                 reader.call_id if reader is not None else None,
                                 cached_tokens=(timings or {}).get("cached_tokens", 0))
    item = response["output"][0]
    if item["type"] == "function_call":
        item["id"] = call_item_id
        yield event("response.function_call_arguments.done", item_id=call_item_id, name=item["name"],
                    output_index=0, arguments=item["arguments"])
    else:
        item["id"] = message_id
        if not opened:  # a call that never got as far as its name: its text is the message
            yield from _message_start(event, message_id)
            if text:
                yield event("response.output_text.delta", **where, delta=text, logprobs=[])
        logprobs = item["content"][0]["logprobs"]
        yield event("response.output_text.done", **where, text=text, logprobs=_without_bytes(logprobs))
        yield event("response.content_part.done", item_id=message_id, output_index=0, content_index=0,
                    part=item["content"][0])
    yield event("response.output_item.done", output_index=0, item=item)
    final.append(response)
    kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(response["status"])
    if kind:
        yield event(kind, response=response)
