"""The worker of one admitted call: generation in its own thread, results handed to the event loop.

It waits its turn in the model queue, generates (a JSON answer or SSE frames as they are made),
writes the call-log row, then hands over the end of the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import asdict
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import StreamingResponse

from lifecycle import generate as generation
from lifecycle import stream as streaming
from lifecycle.model import LoadedModel
from lifecycle.server.chat_request import ChatRequest
from lifecycle.server.completion import build_response, new_completion_id
from lifecycle.sampling import SamplingSettings
from lifecycle.server.errors import ApiError, error_envelope
from lifecycle.server.exchange import Exchange
from lifecycle.tools import read_output
from lifecycle.serving import LiveCall, model_queue

if TYPE_CHECKING:
    from lifecycle.server.endpoints import ApiServer

_log = logging.getLogger(__name__)


def sampling_settings(chat: ChatRequest) -> SamplingSettings:
    seed = None if chat.seed is None else chat.seed % 2**63  # the API allows negative seeds
    return SamplingSettings(temperature=chat.temperature, top_p=chat.top_p, top_k=chat.top_k, min_p=chat.min_p,
                            repetition_penalty=chat.repetition_penalty, seed=seed)


_DONE = object()


class GenerationJob:
    """One admitted call: generation in its own worker thread, results handed to the event loop."""

    def __init__(self, server: ApiServer, exchange: Exchange, chat: ChatRequest, loaded: LoadedModel,
                 call: LiveCall, prompt_ids: list[int], max_tokens: int, loop: asyncio.AbstractEventLoop):
        self.server, self.exchange, self.chat, self.loaded, self.call = server, exchange, chat, loaded, call
        self.prompt_ids, self.max_tokens, self.loop = prompt_ids, max_tokens, loop
        self.completion_id = new_completion_id()
        self.items: asyncio.Queue = asyncio.Queue()
        exchange.journey["completion_id"] = self.completion_id
        exchange.journey["settings"] = asdict(sampling_settings(chat)) | {"max_tokens": max_tokens, "stop": chat.stop}

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
            exchange.outcome, exchange.status = "error", exchange.status or 500
            exchange.error = f"Generation failed: {type(error).__name__}."
            tail = [_error_frame(error), "data: [DONE]\n\n"] if self.chat.stream else [error]
            exchange.journey.setdefault("frames", []).extend(
                {"at": round(exchange.elapsed(), 6), "sse": frame} for frame in tail if self.chat.stream
            )
        finally:
            self.server._save(exchange)
            for item in tail:
                self._emit(item)
            self._emit(_DONE)

    def _generate(self) -> list[object]:
        exchange = self.exchange
        output = self.chat.output
        result = generation.generate(self.loaded, self.prompt_ids, sampling_settings(self.chat), self.max_tokens,
                                     stop=self.chat.stop, cancelled=self.call.cancel.is_set,
                                     constraint=output.constraint(self.loaded))
        content, calls = read_output(result.text) if output.may_call else (result.text, [])
        finish_reason = "tool_calls" if calls and result.finish_reason == "stop" else result.finish_reason
        exchange.finish_reason = finish_reason
        exchange.completion_tokens = result.completion_tokens
        exchange.ttft = round(self.call.waited_seconds + result.prefill_seconds, 6)
        decode = result.decode_seconds
        exchange.journey["timings"] = {
            "queue_seconds": round(self.call.waited_seconds, 6), "prefill_seconds": result.prefill_seconds,
            "decode_seconds": decode, "ttft": exchange.ttft,
            "tokens_per_second": result.completion_tokens / decode if decode > 0 else None,
        }
        if result.finish_reason == "cancelled":
            exchange.status, exchange.outcome = 499, "cancelled"
            return []
        body = build_response(self.completion_id, self.chat.model, content, finish_reason,
                              len(self.prompt_ids), result.completion_tokens,
                              tool_calls=[call.wire() for call in calls] or None)
        exchange.status, exchange.outcome = 200, "ok"
        exchange.journey["response"] = {"status": 200, "body": body}
        return [body]

    def _stream(self) -> list[object]:
        """Send each frame as it is made; keep ``data: [DONE]`` back for after the log write.

        Usage is always computed (the log needs it); the usage chunk and the ``usage: null`` fields
        go on the wire only when the client asked with ``stream_options.include_usage``.
        """
        exchange = self.exchange
        frames = exchange.journey.setdefault("frames", [])
        events = streaming.stream_completion(
            self.loaded, self.prompt_ids, sampling_settings(self.chat), self.max_tokens, self.chat.model,
            self.completion_id, True, stop=self.chat.stop, cancelled=self.call.cancel.is_set,
            started=exchange.started, output=self.chat.output,
        )
        exchange.status, exchange.outcome = 200, "ok"
        tail = []
        try:
            for event in events:
                data, sse = event.data, event.sse
                if data is not None and "usage" in data:
                    if data["usage"]:
                        self._usage(data["usage"])
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
            raise ApiError(500, "The server had an error while generating the answer.", type="server_error",
                           outcome="error")

    async def frames(self):
        """SSE frames as the worker produces them, until it is done."""
        while (item := await self.items.get()) is not _DONE:
            if isinstance(item, str):
                yield item




def _error_frame(error: Exception) -> str:
    body = error_envelope(f"Generation failed: {type(error).__name__}.", type="server_error", code="generation_failed")
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
