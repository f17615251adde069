"""The worker of one Responses call: the chat worker's generation, answered in the Responses shape.

It generates exactly as a chat completion does (same stages, same engine), then answers with a
``response`` object or its typed events, and stores the conversation for ``previous_response_id``
when the request says ``store`` (the default).
"""

from __future__ import annotations

import json
import time

from lifecycle.stages import generation
from lifecycle.api.response_object import finished_response, function_calls, new_id, output_text, response_events
from lifecycle.api.response_store import ResponseStore
from lifecycle.api.responses_request import ResponsesRequest
from lifecycle.api.worker import GenerationJob


class ResponsesJob(GenerationJob):
    """A GenerationJob whose answer is a Response (JSON or typed SSE events), stored when asked."""

    def __init__(self, *args, request: ResponsesRequest, store: ResponseStore):
        super().__init__(*args)
        self.request, self.store = request, store
        self.response_id = new_id("resp")
        self.exchange.journey["completion_id"] = self.response_id

    def _remember(self, response: dict) -> None:
        if not self.request.store or response["status"] not in ("completed", "incomplete"):
            return
        history = self.chat.messages[1:] if self.request.instructions else self.chat.messages
        calls = function_calls(response)
        answer = {"role": "assistant", "content": None, "tool_calls": calls} if calls else \
            {"role": "assistant", "content": output_text(response)}
        self.store.put(self.response_id, self.exchange.key_name, [*history, answer], response)

    def _body(self, results: list[generation.Generation], completion_tokens: int) -> dict:
        result = results[0]
        response = finished_response(self.request, self.response_id, int(time.time()),
                                     result.text, result.finish_reason, result.steps, len(self.prompt_ids),
                                     cached_tokens=self.timings.get("cached_tokens", 0))
        self._remember(response)
        return response

    def _stream(self) -> list[object]:
        """Send each event as it is made; keep the last (``response.completed``) for after the log write."""
        exchange = self.exchange
        frames = exchange.journey.setdefault("frames", [])
        self.timings = {}
        final: list[dict] = []
        events = response_events(self._choice_steps()[0], self.request, self.response_id, len(self.prompt_ids),
                                 exchange.started, final, self.timings)
        exchange.status, exchange.outcome = 200, "ok"
        held = None
        try:
            for event in events:
                at = round(event.at, 6)
                frames.append({"at": at, "sse": event.sse})
                if event.data["type"] in ("response.output_text.delta", "response.function_call_arguments.delta"):
                    self.call.completion_tokens += 1
                    exchange.ttft = exchange.ttft if exchange.ttft is not None else at
                if event.data["type"] == "error":
                    exchange.outcome, exchange.error = "error", event.data["message"]
                if held is not None:
                    self._emit(held)
                held = event.sse
        finally:
            self._stream_timings(frames)
        if final:
            response = final[0]
            usage = response["usage"]
            self._usage({"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"],
                         "total_tokens": usage["total_tokens"], "prompt_tokens_details": {
                             "cached_tokens": usage["input_tokens_details"]["cached_tokens"]}})
            exchange.finish_reason = response["status"]
            self._remember(response)
        elif self.call.cancel.is_set():
            exchange.status, exchange.outcome, exchange.finish_reason = 499, "cancelled", "cancelled"
        return [held] if held is not None else []

    def _failure_frames(self, error: Exception) -> list[str]:
        data = {"type": "error", "sequence_number": 0, "code": "generation_failed",
                "message": f"Generation failed: {type(error).__name__}.", "param": None}
        return [f"event: error\ndata: {json.dumps(data)}\n\n"]
