"""The endpoints of the OpenAI-compatible API.

A call goes through the same stages the app shows: the API key (lifecycle.api.gateway), body limits
and JSON parsing with the model's routing (lifecycle.api.body), request validation, the chat template
and context budget (lifecycle.api.budget), the rate limit (the gateway again), admission to the engine
(lifecycle.api.serving), then a worker that generates. Every call with a valid key, refused ones
included, lands in the gateway's call log with its journey. Errors always use OpenAI's envelope and
every response carries ``x-request-id``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lifecycle.errors import LifecycleError
from lifecycle.lessons.words import counted
from lifecycle.model import LoadedModel, shared_model
from lifecycle.stages.request import ChatRequest
from lifecycle.api.body import parse_body, read_body
from lifecycle.api.budget import context_length_error, least_prompt_tokens, prompt_budget
from lifecycle.api.config import ApiConfig
from lifecycle.api.errors import ApiError
from lifecycle.api.exchange import Exchange, new_request_id
from lifecycle.api.gateway import Gateway
from lifecycle.stages.json_fields import shown
from lifecycle.api.response_store import ResponseStore
from lifecycle.api.responses_request import ResponsesRequest, validate_responses_request
from lifecycle.api.responses_worker import ResponsesJob
from lifecycle.api.worker import CancellingStream, GenerationJob
from lifecycle.api.tracing import TRACEPARENT, accepted_traceparent
from lifecycle.api.serving import (LiveCall, QueueFull, engine_load, model_queue, model_status, pages_state,
                                   start_model_loading)

_SAFE_HEADERS = ("content-type", "content-length", "user-agent", "accept", "x-stainless-lang",
                 "x-stainless-package-version", "x-stainless-retry-count")
_log = logging.getLogger(__name__)


class ApiServer:
    """The endpoints, behind one gateway (keys, rate limits, call log) and one Responses store."""

    def __init__(self, config: ApiConfig):
        self.config = config
        self.gateway = Gateway(config)
        self.responses_store = ResponseStore()

    # --- plumbing ------------------------------------------------------------------------------

    def _finish(self, exchange: Exchange, response: Response) -> Response:
        response.headers["x-request-id"] = exchange.id
        traceparent = exchange.journey.get("request", {}).get(TRACEPARENT)
        if traceparent is not None:
            response.headers[TRACEPARENT] = traceparent
        return response

    def _error(self, exchange: Exchange, error: ApiError) -> Response:
        """Answer with the envelope; log the call only if a valid key was presented (else just count it)."""
        exchange.status, exchange.outcome = error.status, error.outcome
        exchange.error = error.body["error"]["message"]
        exchange.journey["response"] = {"status": error.status, "headers": error.headers, "body": error.body}
        self.gateway.refuse(exchange, error)
        return self._finish(exchange, JSONResponse(error.body, error.status, headers=error.headers))

    def _guard(self, endpoint: Callable) -> Callable:
        """Every answer gets an id; any failure becomes an envelope (never a stack trace)."""

        async def guarded(request: Request) -> Response:
            exchange = Exchange(new_request_id())
            exchange.journey["request"] = {"method": request.method, "path": request.url.path}
            traceparent = accepted_traceparent(request.headers.get(TRACEPARENT))
            if traceparent is not None:
                exchange.journey["request"][TRACEPARENT] = traceparent
            try:
                return await endpoint(request, exchange)
            except ApiError as error:
                return self._error(exchange, error)
            except Exception as error:
                _log.exception("unexpected failure in %s", exchange.id)
                return self._error(exchange, ApiError(
                    500, "The server had an error while processing your request.",
                    type="server_error", outcome="error", code=type(error).__name__,
                ))

        return guarded

    # --- endpoints -----------------------------------------------------------------------------

    async def health(self, request: Request, exchange: Exchange) -> Response:
        _only(request, "GET")
        status = model_status()  # a load error's text stays in the server's own log, never here
        body = {"status": status.state, "model": status.name, "pages": pages_state(), "queue": _queue_summary(),
                "engine": engine_load()}
        code = 200 if status.state == "ready" else 503
        headers = {} if code == 200 else {"retry-after": "2"}
        return self._finish(exchange, JSONResponse(body, code, headers=headers))

    async def models(self, request: Request, exchange: Exchange) -> Response:
        _only(request, "GET")
        self._authenticate(request, exchange)
        body = {"object": "list", "data": [_model_object(model_status().name)]}
        return self._finish(exchange, JSONResponse(body))

    async def model(self, request: Request, exchange: Exchange) -> Response:
        """``GET /v1/models/{model}`` (the SDKs' ``models.retrieve``): the served model's object, or
        OpenAI's 404 ``model_not_found`` for any other id."""
        _only(request, "GET")
        self._authenticate(request, exchange)
        wanted, name = request.path_params["model"], model_status().name
        if wanted != name:
            raise ApiError(404, f"The model {shown(wanted)} does not exist or you do not have access to it.",
                           param="model", code="model_not_found")
        return self._finish(exchange, JSONResponse(_model_object(name)))

    async def not_found(self, request: Request, exchange: Exchange) -> Response:
        self._authenticate(request, exchange)
        raise ApiError(404, f"Unknown endpoint: {request.method} {request.url.path}.", code="unknown_url")

    async def chat_completions(self, request: Request, exchange: Exchange) -> Response:
        _only(request, "POST")
        self._authenticate(request, exchange)  # before the body is read: strangers leave nothing behind
        exchange.journey["request"]["headers"] = _shown_headers(request)
        body = await read_body(request, exchange, self.config.max_body_bytes, self.config.body_seconds)
        chat = parse_body(request, body, exchange, [model_status().name])
        return await self._serve(request, exchange, chat, GenerationJob)

    async def responses(self, request: Request, exchange: Exchange) -> Response:
        """``POST /v1/responses``: translated to the chat form (with the stored conversation of
        ``previous_response_id``), generated the same way, answered as a Response."""
        _only(request, "POST")
        self._authenticate(request, exchange)  # before the body is read, as for chat completions
        exchange.journey["request"]["headers"] = _shown_headers(request)
        body = await read_body(request, exchange, self.config.max_body_bytes, self.config.body_seconds)
        wanted = parse_body(request, body, exchange, [model_status().name], validate_responses_request)
        history = self._history(wanted, exchange)
        try:
            chat = wanted.to_chat(history)
        except LifecycleError as error:
            raise ApiError(400, error.message, param=error.param, code=error.code) from error

        def job(*args) -> ResponsesJob:
            return ResponsesJob(*args, request=wanted, store=self.responses_store)

        return await self._serve(request, exchange, chat, job)

    def _history(self, wanted: ResponsesRequest, exchange: Exchange) -> tuple[dict, ...]:
        if wanted.previous_response_id is None:
            return ()
        stored = self.responses_store.get(wanted.previous_response_id, exchange.key_name)
        if stored is None:
            exchange.step("state", "refused", "previous_response_id is not in this server's store.", 400)
            raise ApiError(400, f"Previous response with id {wanted.previous_response_id!r} not found.",
                           param="previous_response_id", code="previous_response_not_found")
        exchange.step("state", "passed", f"Continued from {wanted.previous_response_id}: "
                      f"{counted(len(stored.messages), 'stored message')} prepended.", 200)
        return stored.messages

    async def _serve(self, request: Request, exchange: Exchange, chat: ChatRequest, job_class: Callable) -> Response:
        """Budget, rate limit, queue, then a worker thread that generates and answers."""
        loaded = self._ready_model(exchange)
        least = least_prompt_tokens(chat, loaded)
        # A prompt that can never fit the window is a 400 whatever the key's budget says (a 429 would
        # make the SDKs wait and retry in vain); it is still charged when the budget holds its cost.
        if least > loaded.context_window:  # refused without tokenizing a huge prompt
            limits = self.gateway.charge(exchange, least + (chat.max_tokens or 1))
            raise context_length_error(loaded.context_window, f"at least {least}", chat.max_tokens or 1, limits)
        prompt_ids, max_tokens, budget = await prompt_budget(chat, loaded, exchange)
        cost = len(prompt_ids) + max_tokens * chat.n
        if not budget.fits:
            raise context_length_error(loaded.context_window, budget.prompt_tokens, max_tokens,
                                        self.gateway.charge(exchange, cost))
        limits = self.gateway.rate_limit(exchange, cost)
        call = LiveCall(exchange.id, exchange.key_name, chat.model, chat.stream, len(prompt_ids), max_tokens)
        try:
            model_queue().admit(call)
        except QueueFull as full:
            exchange.step("queue", "refused", str(full), 503)
            raise ApiError(503, str(full), type="server_error", code="queue_full", outcome="error",
                           headers={"retry-after": str(full.retry_after), **limits}) from full
        exchange.step("queue", "admitted", f"Queued behind {counted(len(model_queue().snapshot()) - 1, 'call')}.")
        job = job_class(self.gateway.save, exchange, chat, loaded, call, prompt_ids, max_tokens, asyncio.get_running_loop())
        threading.Thread(target=job.run, name=f"generate-{exchange.id}", daemon=True).start()
        if chat.stream:
            headers = {**limits, "cache-control": "no-cache", "x-accel-buffering": "no"}
            response = CancellingStream(job.frames(), call.cancel, headers=headers, media_type="text/event-stream")
            return self._finish(exchange, response)
        try:
            body = await job.answer(request)
        except ApiError as error:  # the worker has logged this call already
            return self._finish(exchange, JSONResponse(error.body, error.status, headers=error.headers or None))
        return self._finish(exchange, JSONResponse(body, headers=limits))

    # --- before the engine ---------------------------------------------------------------------

    def _authenticate(self, request: Request, exchange: Exchange) -> str:
        address = request.client.host if request.client else "unknown"
        return self.gateway.authenticate(request.headers.get("authorization"), address, exchange)

    def _ready_model(self, exchange: Exchange) -> LoadedModel:
        status = model_status()
        if status.state != "ready":
            start_model_loading()
            message = ("The engine failed and a new one is taking over; retry shortly." if status.state == "unhealthy"
                       else f"The model is {status.state}; " + ("the operator must fix it." if status.error
                                                                 else "retry shortly."))
            raise ApiError(503, message, type="server_error", code="model_not_ready", outcome="error",
                           headers={"retry-after": "2"})
        return shared_model()


def _model_object(name: str) -> dict:
    return {"id": name, "object": "model", "created": 0, "owned_by": "local"}


def _only(request: Request, method: str) -> None:
    if request.method != method:
        raise ApiError(405, f"Method {request.method} is not allowed here; use {method}.", code="method_not_allowed")


def _shown_headers(request: Request) -> dict[str, str]:
    """The request headers worth showing; Authorization only as whether it was there."""
    shown = {name: request.headers[name] for name in _SAFE_HEADERS if name in request.headers}
    shown["authorization"] = "Bearer <redacted>" if "authorization" in request.headers else "<missing>"
    return shown


def _queue_summary() -> dict:
    calls = model_queue().snapshot()
    return {"running": sum(c.state == "running" for c in calls), "waiting": sum(c.state == "queued" for c in calls),
            "capacity": model_queue().capacity}
