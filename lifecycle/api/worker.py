"""The worker of one admitted call: generation in its own thread, results handed to the event loop.

It waits its turn in the model queue, generates (a JSON answer or SSE frames as they are made),
writes the call-log row (through the ``save_call`` it is given, so it needs nothing of the server),
then hands over the end of the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict

from starlette.requests import Request
from starlette.responses import StreamingResponse

from lifecycle.stages import generation
from lifecycle.stages import streaming
from lifecycle.engine import EngineUnavailable
from lifecycle.errors import LifecycleError
from lifecycle.stages.logprobs import logprobs_content
from lifecycle.model import LoadedModel
from lifecycle.stages.request import ChatRequest, sampling_settings
from lifecycle.stages.completion import Choice, cached_details, completion_body, new_completion_id
from lifecycle.api.errors import ApiError, error_envelope
from lifecycle.api.exchange import Exchange
from lifecycle.features.tools import read_output
from lifecycle.api.serving import LiveCall, model_queue

_log = logging.getLogger(__name__)


_DONE = object()


class GenerationJob:
    """One admitted call: generation in its own worker thread, results handed to the event loop."""

    def __init__(self, save_call: Callable[[Exchange], None], exchange: Exchange, chat: ChatRequest,
                 loaded: LoadedModel, call: LiveCall, prompt_ids: list[int], max_tokens: int,
                 loop: asyncio.AbstractEventLoop):
        self.save_call, self.exchange, self.chat, self.loaded, self.call = save_call, exchange, chat, loaded, call
        self.prompt_ids, self.max_tokens, self.loop = prompt_ids, max_tokens, loop
        self.completion_id = new_completion_id()
        self.items: asyncio.Queue = asyncio.Queue()
        exchange.journey["completion_id"] = self.completion_id
        exchange.journey["settings"] = asdict(sampling_settings(chat)) | {
            "max_tokens": max_tokens, "stop": chat.stop, "n": chat.n, "logprobs": chat.logprobs_count,
        }
        if chat.metadata:
            exchange.journey["metadata"] = chat.metadata

    def _emit(self, item: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:  # the event loop is gone (server shutting down)
            self.call.cancel.set()

    def run(self) -> None:
        """Worker thread: wait for the model, generate, write the call log row, then hand over the
        end of the answer (so a client that has its answer can already find the row)."""
        exchange = self.exchange
        tail: list[object] = []
        try:
            with model_queue().turn(self.call, self.loaded) as holding:
                if not holding:
                    exchange.step("queue", "cancelled", "The client left while the call was waiting.")
                    exchange.status, exchange.outcome, exchange.finish_reason = 499, "cancelled", "cancelled"
                elif self.chat.stream:
                    tail = self._stream()
                else:
                    tail = self._generate()
                exchange.journey["queue_seconds"] = round(self.call.waited_seconds, 6)
        except Exception as error:
            _log.exception("generation failed for %s", exchange.id)
            exchange.outcome, exchange.status = "error", exchange.status or failure_error(error).status
            exchange.error = f"Generation failed: {type(error).__name__}."
            tail = self._failure_frames(error) if self.chat.stream else [error]
            exchange.journey.setdefault("frames", []).extend(
                {"at": round(exchange.elapsed(), 6), "sse": frame} for frame in tail if self.chat.stream
            )
        finally:
            self.save_call(exchange)
            for item in tail:
                self._emit(item)
            self._emit(_DONE)

    def _choice_steps(self) -> list:
        """One generation per choice (n), each with its own seed; validated before any model work."""
        return [
            generation.generate_steps(self.loaded, self.prompt_ids, sampling_settings(self.chat, index),
                                      self.max_tokens, self.chat.stop, cancelled=self.call.cancel.is_set,
                                      timings=self.timings if index == 0 else None,
                                      constraint=self.chat.output.constraint(self.loaded),
                                      guardrail=self.chat.guardrail)
            for index in range(self.chat.n)
        ]

    def _generations(self) -> list[generation.Generation]:
        """Every choice generated side by side (one step of each in turn), collected in index order."""
        self.timings: dict = {}
        sources = self._choice_steps()
        collected: list[list] = [[] for _ in sources]
        for index, step in streaming.interleave(sources):
            collected[index].append(step)
        prefill = self.timings.get("prefill_seconds", 0.0)
        return [generation.Generation.collect(self.prompt_ids, choice, prefill) for choice in collected]

    def _generate(self) -> list[object]:
        exchange = self.exchange
        results = self._generations()
        completion_tokens = sum(result.completion_tokens for result in results)
        exchange.finish_reason = results[0].finish_reason
        exchange.completion_tokens = completion_tokens
        exchange.ttft = round(self.call.waited_seconds + results[0].prefill_seconds, 6)
        decode = max(result.decode_seconds for result in results)
        exchange.journey["timings"] = {
            "queue_seconds": round(self.call.waited_seconds, 6), "prefill_seconds": results[0].prefill_seconds,
            "decode_seconds": decode, "ttft": exchange.ttft,
            "tokens_per_second": completion_tokens / decode if decode > 0 else None,
        }
        if self.call.cancel.is_set() or any(result.finish_reason == "cancelled" for result in results):
            exchange.status, exchange.outcome, exchange.finish_reason = 499, "cancelled", "cancelled"
            return []
        body = self._body(results, completion_tokens)
        exchange.status, exchange.outcome = 200, "ok"
        exchange.journey["response"] = {"status": 200, "body": body}
        return [body]

    def _body(self, results: list[generation.Generation], completion_tokens: int) -> dict:
        choices = [self._choice(result) for result in results]
        self.exchange.finish_reason = choices[0].finish_reason
        return completion_body(self.completion_id, self.chat.model, choices, len(self.prompt_ids), completion_tokens,
                               cached_tokens=self.timings.get("cached_tokens", 0))

    def _choice(self, result: generation.Generation) -> Choice:
        """One choice: its text, or the tool call read out of it (finish_reason "tool_calls")."""
        content, calls = read_output(result.text) if self.chat.output.may_call else (result.text, [])
        finish_reason = "tool_calls" if calls and result.finish_reason == "stop" else result.finish_reason
        return Choice(content, finish_reason, logprobs_content(result.steps, self.chat.logprobs_count),
                      [call.wire() for call in calls] or None)

    def _stream(self) -> list[object]:
        """Send each frame as it is made; keep ``data: [DONE]`` back for after the log write.

        Usage is always computed (the log needs it); the usage chunk and the ``usage: null`` fields
        go on the wire only when the client asked with ``stream_options.include_usage``.
        """
        exchange = self.exchange
        frames = exchange.journey.setdefault("frames", [])
        self.timings = {}
        events = streaming.stream_choice_events(
            self._choice_steps(), self.completion_id, self.chat.model, len(self.prompt_ids), True,
            started=exchange.started, logprobs=self.chat.logprobs_count, tool_calls=self.chat.output.may_call,
        )
        exchange.status, exchange.outcome = 200, "ok"
        tail = []
        try:
            for event in events:
                data, sse = event.data, event.sse
                if data is not None and "usage" in data:
                    if data["usage"]:
                        usage = {**data["usage"], "prompt_tokens_details": cached_details(self.timings.get("cached_tokens", 0))}
                        data = {**data, "usage": usage}
                        sse = streaming.sse_line(data)
                        self._usage(usage)
                    if not self.chat.include_usage:
                        if not data.get("choices"):
                            continue
                        data = {k: v for k, v in data.items() if k != "usage"}
                        sse = streaming.sse_line(data)
                if event.error is not None:  # the exception's own text stays out of the wire and the log
                    data = error_envelope(f"Generation failed: {type(event.error).__name__}.", type="server_error",
                                          code="generation_failed")
                    sse = streaming.sse_line(data)
                    exchange.outcome, exchange.error = "error", data["error"]["message"]
                at = round(event.at, 6)
                frames.append({"at": at, "sse": sse})
                if streaming.delta_content(data):
                    self.call.completion_tokens += 1
                    exchange.ttft = exchange.ttft if exchange.ttft is not None else at
                for choice in (data or {}).get("choices") or []:
                    exchange.finish_reason = choice.get("finish_reason") or exchange.finish_reason
                if data is None or event.error is not None:  # after the log write: a client that has the
                    tail.append(sse)                          # error (or [DONE]) can already find the row
                else:
                    self._emit(sse)
        finally:
            self._stream_timings(frames)
        if self.call.cancel.is_set() and exchange.finish_reason in (None, "cancelled"):
            exchange.status, exchange.outcome, exchange.finish_reason = 499, "cancelled", "cancelled"
        return tail

    def _failure_frames(self, error: Exception) -> list[str]:
        """What a stream that failed after its headers ends with."""
        return [_error_frame(error), "data: [DONE]\n\n"]

    def _usage(self, usage: dict) -> None:
        self.exchange.prompt_tokens = usage.get("prompt_tokens", self.exchange.prompt_tokens)
        self.exchange.completion_tokens = usage.get("completion_tokens")
        self.exchange.journey["usage"] = usage

    def _stream_timings(self, frames: list[dict]) -> None:
        exchange = self.exchange
        content_at = [f["at"] for f in frames if streaming.delta_content(streaming.event_data(f["sse"]))]
        span = content_at[-1] - content_at[0] if len(content_at) > 1 else 0.0
        exchange.journey["timings"] = {
            "queue_seconds": round(self.call.waited_seconds, 6), "ttft": exchange.ttft,
            "inter_token": [round(b - a, 6) for a, b in zip(content_at, content_at[1:])],
            "tokens_per_second": (len(content_at) - 1) / span if span > 0 else None,
        }

    async def answer(self, request: Request) -> dict:
        """The JSON body of a non-streamed call; a client that leaves cancels the generation."""
        while True:
            try:
                item = await asyncio.wait_for(self.items.get(), timeout=0.25)
            except TimeoutError:
                if await request.is_disconnected():
                    self.call.cancel.set()
                continue
            if isinstance(item, dict):
                return item
            if item is _DONE and self.call.cancel.is_set():
                raise ApiError(499, "The client closed the request.", code="client_closed", outcome="cancelled")
            if isinstance(item, Exception):
                raise failure_error(item)
            raise ApiError(500, "The server had an error while generating the answer.", type="server_error",
                           outcome="error")

    async def frames(self):
        """SSE frames as the worker produces them, until it is done."""
        while (item := await self.items.get()) is not _DONE:
            if isinstance(item, str):
                yield item




def failure_error(error: Exception) -> ApiError:
    """The API's answer to a generation that failed: 503 when the engine could not serve it (our own
    message, with a retry time), 400 for a request it can never take, else 500 without details."""
    if isinstance(error, EngineUnavailable):
        return ApiError(503, str(error), type="server_error", code="engine_unavailable", outcome="error",
                        headers={"retry-after": "5"})
    if isinstance(error, LifecycleError):
        return ApiError(400, error.message, param=error.param, code=error.code)
    return ApiError(500, "The server had an error while generating the answer.", type="server_error",
                    outcome="error")


def _error_frame(error: Exception) -> str:
    if isinstance(error, (EngineUnavailable, LifecycleError)):
        body = failure_error(error).body
    else:
        body = error_envelope(f"Generation failed: {type(error).__name__}.", type="server_error",
                              code="generation_failed")
    return f"data: {json.dumps(body)}\n\n"


class CancellingStream(StreamingResponse):
    """An SSE response that cancels its generation however the response ends (client gone included)."""

    def __init__(self, content, cancel: threading.Event, **kwargs):
        super().__init__(content, **kwargs)
        self._cancel = cancel

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._cancel.set()
