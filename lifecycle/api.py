"""The real wire: an OpenAI-compatible HTTP API served from the app's own process and model.

``api_routes()`` gives Starlette routes for ``POST /v1/chat/completions`` (JSON or SSE stream),
``GET /v1/models`` and ``GET /health``; Streamlit serves them next to the pages
(``st.App("app.py", routes=api_routes())``). A call goes through the same stages the app shows:
body limits and JSON parsing, the gateway (API key, rate limit, routing), request validation,
the chat template and context budget, the one-at-a-time model queue, generation, and SSE
streaming. Every call, refused ones included, lands in the SQLite call log with its journey:
the raw request as received, each gateway decision, the prompt's tokens and budget, the SSE
frames with timestamps, TTFT, tokens/s and the response. Errors always use OpenAI's envelope
``{"error": {"message", "type", "param", "code"}}`` and every response carries ``x-request-id``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from lifecycle import generate as generation
from lifecycle import stream as streaming
from lifecycle.context import context_budget, render_messages
from lifecycle.errors import LifecycleError
from lifecycle.gateway import (
    KEYS_ENV,
    CallLog,
    CallRecord,
    RateLimiter,
    bearer_token,
    check_api_key,
    default_call_log_path,
    error_envelope,
    new_api_key,
    parse_api_keys,
    route,
)
from lifecycle.model import LoadedModel, shared_model
from lifecycle.request import DEFAULT_MAX_TOKENS, ChatRequest, build_response, new_completion_id, validate_request
from lifecycle.sampling import SamplingSettings
from lifecycle.serving import LiveCall, QueueFull, model_queue, model_status, start_model_loading

MAX_BODY_BYTES = 1024 * 1024
DEFAULT_REQUESTS_PER_MINUTE = 60
DEFAULT_TOKENS_PER_MINUTE = 40_000
# The journey keeps at most this much of a raw body (a 1 MiB prompt is counted, not copied).
_JOURNEY_BODY_CHARS = 64 * 1024
_SAFE_HEADERS = ("content-type", "content-length", "user-agent", "accept", "x-stainless-lang",
                 "x-stainless-package-version", "x-stainless-retry-count")
_log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answer of the HTTP API: a status and OpenAI's error envelope (plus headers)."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: Mapping[str, str] | None = None,
                 outcome: str = "invalid_request"):
        super().__init__(message)
        self.status = status
        self.body = error_envelope(message, type=type, param=param, code=code)
        self.headers = dict(headers or {})
        self.outcome = outcome


@dataclass
class ApiConfig:
    """What the API serves with. ``keys`` maps key names to secrets; only names are ever logged."""

    keys: dict[str, str]
    requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE
    tokens_per_minute: int = DEFAULT_TOKENS_PER_MINUTE
    max_body_bytes: int = MAX_BODY_BYTES
    call_log: Path = field(default_factory=default_call_log_path)
    development_key: bool = False  # True when no key was configured and one was generated


def api_config(secrets_: Mapping | None = None, environ: Mapping[str, str] = os.environ) -> ApiConfig:
    """Configuration from ``LIFECYCLE_API_KEYS`` (or the same name in Streamlit secrets, given as a
    mapping: a "name:key,..." string or a table of name = key) and ``LIFECYCLE_RPM`` /
    ``LIFECYCLE_TPM``. With no key anywhere, a development key is generated for this process."""
    configured = environ.get(KEYS_ENV) or (secrets_ or {}).get(KEYS_ENV)
    if isinstance(configured, Mapping):
        keys = parse_api_keys(",".join(f"{name}:{key}" for name, key in configured.items()))
    else:
        keys = parse_api_keys(configured if isinstance(configured, str) else None)
    development = not keys
    if development:
        keys = {"dev": new_api_key()}
    return ApiConfig(
        keys=keys,
        requests_per_minute=int(environ.get("LIFECYCLE_RPM", DEFAULT_REQUESTS_PER_MINUTE)),
        tokens_per_minute=int(environ.get("LIFECYCLE_TPM", DEFAULT_TOKENS_PER_MINUTE)),
        development_key=development,
    )


def new_request_id() -> str:
    return "req_" + secrets.token_hex(16)


@dataclass
class Exchange(CallRecord):
    """One call while it is handled: its log record, filled in as the call goes, and its start."""

    journey: dict = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def step(self, name: str, outcome: str, detail: str, status: int | None = None) -> None:
        """One gateway/serving decision, in order, with the time it was taken."""
        self.journey.setdefault("gateway", []).append(
            {"step": name, "outcome": outcome, "detail": detail, "status": status, "at": round(self.elapsed(), 6)}
        )

    def record(self) -> CallRecord:
        """The row for the call log, as the call stands now."""
        counted = None not in (self.prompt_tokens, self.completion_tokens)
        return replace(
            CallRecord(**{f.name: getattr(self, f.name) for f in fields(CallRecord)}),
            total_tokens=self.prompt_tokens + self.completion_tokens if counted else None,
            duration=round(self.elapsed(), 6),
        )


class ApiServer:
    """The endpoints, with their gateway state (keys, rate limiter, call log)."""

    def __init__(self, config: ApiConfig):
        self.config = config
        self.limiter = RateLimiter(config.requests_per_minute, config.tokens_per_minute)
        self.log = CallLog(config.call_log, redact=config.keys.values())

    # --- plumbing ------------------------------------------------------------------------------

    def _finish(self, exchange: Exchange, response: Response) -> Response:
        response.headers["x-request-id"] = exchange.id
        return response

    def _save(self, exchange: Exchange) -> None:
        try:
            self.log.record(exchange.record())
        except Exception as error:  # the log must never turn an answer into a crash
            _log.error("call log write failed for %s: %s", exchange.id, type(error).__name__)

    def _error(self, exchange: Exchange, error: ApiError) -> Response:
        exchange.status, exchange.outcome = error.status, error.outcome
        exchange.error = error.body["error"]["message"]
        exchange.journey["response"] = {"status": error.status, "headers": error.headers, "body": error.body}
        self._save(exchange)
        return self._finish(exchange, JSONResponse(error.body, error.status, headers=error.headers))

    def _guard(self, endpoint: Callable) -> Callable:
        """Every answer gets an id; any failure becomes an envelope (never a stack trace)."""

        async def guarded(request: Request) -> Response:
            exchange = Exchange(new_request_id())
            exchange.journey["request"] = {"method": request.method, "path": request.url.path}
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
        status = model_status()
        body = {"status": status.state, "model": status.name, "queue": _queue_summary()}
        if status.error:
            body["error"] = status.error
        code = 200 if status.state == "ready" else 503
        headers = {} if code == 200 else {"retry-after": "2"}
        return self._finish(exchange, JSONResponse(body, code, headers=headers))

    async def models(self, request: Request, exchange: Exchange) -> Response:
        _only(request, "GET")
        self._authenticate(request, exchange)
        status = model_status()
        body = {"object": "list", "data": [
            {"id": status.name, "object": "model", "created": 0, "owned_by": "local"}
        ]}
        return self._finish(exchange, JSONResponse(body))

    async def not_found(self, request: Request, exchange: Exchange) -> Response:
        raise ApiError(404, f"Unknown endpoint: {request.method} {request.url.path}.", code="unknown_url")

    async def chat_completions(self, request: Request, exchange: Exchange) -> Response:
        _only(request, "POST")
        exchange.journey["request"]["headers"] = _shown_headers(request)
        body = await self._read_body(request, exchange)
        exchange.key_name = self._authenticate(request, exchange)
        chat = self._parse(request, body, exchange)
        loaded = self._ready_model(exchange)
        prompt_ids, max_tokens = await self._budget(chat, loaded, exchange)
        limits = self._rate_limit(exchange, len(prompt_ids) + max_tokens)
        call = LiveCall(exchange.id, exchange.key_name, chat.model, chat.stream, len(prompt_ids), max_tokens)
        try:
            model_queue().admit(call)
        except QueueFull as full:
            exchange.step("queue", "refused", str(full), 503)
            raise ApiError(503, str(full), type="server_error", code="queue_full", outcome="error",
                           headers={"retry-after": str(full.retry_after), **limits}) from full
        exchange.step("queue", "admitted", f"Queued behind {len(model_queue().snapshot()) - 1} call(s).")
        job = _Job(self, exchange, chat, loaded, call, prompt_ids, max_tokens, asyncio.get_running_loop())
        threading.Thread(target=job.run, name=f"generate-{exchange.id}", daemon=True).start()
        if chat.stream:
            headers = {**limits, "cache-control": "no-cache", "x-accel-buffering": "no"}
            response = _CancellingStream(job.frames(), call.cancel, headers=headers, media_type="text/event-stream")
            return self._finish(exchange, response)
        try:
            body = await job.answer(request)
        except ApiError as error:  # the worker has logged this call already
            return self._finish(exchange, JSONResponse(error.body, error.status))
        return self._finish(exchange, JSONResponse(body, headers=limits))

    # --- stages --------------------------------------------------------------------------------

    async def _read_body(self, request: Request, exchange: Exchange) -> bytes:
        limit = self.config.max_body_bytes
        too_large = ApiError(413, f"The request body is larger than the limit of {limit} bytes.",
                             code="request_too_large")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            exchange.journey["request"]["body"] = f"<{declared} bytes, not read>"
            raise too_large
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    exchange.journey["request"]["body"] = f"<more than {limit} bytes, not read>"
                    raise too_large
                chunks.append(chunk)
        except ClientDisconnect as gone:
            raise ApiError(400, "The client disconnected while sending the body.", code="client_disconnected",
                           outcome="cancelled") from gone
        body = b"".join(chunks)
        text = body.decode("utf-8", errors="replace")
        exchange.journey["request"]["body"] = text[:_JOURNEY_BODY_CHARS]
        exchange.journey["request"]["body_bytes"] = len(body)
        return body

    def _authenticate(self, request: Request, exchange: Exchange) -> str:
        decision = check_api_key(bearer_token(request.headers.get("authorization")), self.config.keys)
        exchange.key_name = decision.key_name
        exchange.step("auth", "passed" if decision.allowed else "refused", decision.message, decision.status)
        if not decision.allowed:
            raise ApiError(401, decision.message, code="invalid_api_key", outcome="unauthorized")
        return decision.key_name

    def _parse(self, request: Request, body: bytes, exchange: Exchange) -> ChatRequest:
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise ApiError(400, f"Expected 'Content-Type: application/json', got {media_type or 'none'!r}.",
                           code="invalid_content_type")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError) as error:
            detail = error.msg if isinstance(error, json.JSONDecodeError) else "not valid JSON"
            raise ApiError(400, f"The request body is not valid JSON: {detail}.", code="invalid_json") from error
        status = model_status()
        try:
            chat = validate_request(payload, known_models=[status.name])
        except LifecycleError as error:
            if error.code == "model_not_found":
                decision = route(payload.get("model"), [status.name])
                exchange.step("routing", "refused", decision.message, 404)
                raise ApiError(404, decision.message, param="model", code="model_not_found") from error
            raise ApiError(400, error.message, param=error.param, code=error.code) from error
        exchange.model = chat.model
        exchange.step("routing", "passed", route(chat.model, [status.name]).message, 200)
        exchange.journey["request"]["validated"] = chat.to_payload()
        return chat

    def _ready_model(self, exchange: Exchange) -> LoadedModel:
        status = model_status()
        if status.state != "ready":
            start_model_loading()
            message = f"The model is {status.state}" + (f": {status.error}" if status.error else "; retry shortly.")
            raise ApiError(503, message, type="server_error", code="model_not_ready", outcome="error",
                           headers={"retry-after": "2"})
        return shared_model()

    async def _budget(self, chat: ChatRequest, loaded: LoadedModel, exchange: Exchange) -> tuple[list[int], int]:
        try:
            prompt = await asyncio.to_thread(render_messages, chat.messages)
        except LifecycleError as error:
            raise ApiError(400, error.message, param=error.param, code=error.code) from error
        window = loaded.context_window
        free = window - len(prompt.ids)
        max_tokens = chat.max_tokens or max(1, min(DEFAULT_MAX_TOKENS, free))
        budget = context_budget(prompt, window, max_tokens)
        exchange.prompt_tokens = budget.prompt_tokens
        exchange.journey["tokens"] = {"prompt_tokens": budget.prompt_tokens, "ids": prompt.ids[:2048],
                                      "special_positions": prompt.special_positions[:512]}
        exchange.journey["context"] = {**asdict(budget), "max_tokens_defaulted": chat.max_tokens is None}
        if not budget.fits:
            raise ApiError(
                400,
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{budget.prompt_tokens + max_tokens} tokens ({budget.prompt_tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or completion.",
                param="messages", code="context_length_exceeded",
            )
        return prompt.ids, max_tokens

    def _rate_limit(self, exchange: Exchange, tokens: int) -> dict[str, str]:
        decision = self.limiter.decide(exchange.key_name, tokens)
        exchange.step("rate limit", "passed" if decision.allowed else "refused", decision.message, decision.status)
        if not decision.allowed:
            error = decision.error()["error"]
            raise ApiError(429, error["message"], type=error["type"], code=error["code"],
                           headers=decision.headers, outcome="rate_limited")
        return dict(decision.headers)


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


def _sampling(chat: ChatRequest) -> SamplingSettings:
    seed = None if chat.seed is None else chat.seed % 2**63  # the API allows negative seeds
    return SamplingSettings(temperature=chat.temperature, top_p=chat.top_p, top_k=chat.top_k, min_p=chat.min_p,
                            repetition_penalty=chat.repetition_penalty, seed=seed)


_DONE = object()


class _Job:
    """One admitted call: generation in its own worker thread, results handed to the event loop."""

    def __init__(self, server: ApiServer, exchange: Exchange, chat: ChatRequest, loaded: LoadedModel,
                 call: LiveCall, prompt_ids: list[int], max_tokens: int, loop: asyncio.AbstractEventLoop):
        self.server, self.exchange, self.chat, self.loaded, self.call = server, exchange, chat, loaded, call
        self.prompt_ids, self.max_tokens, self.loop = prompt_ids, max_tokens, loop
        self.completion_id = new_completion_id()
        self.items: asyncio.Queue = asyncio.Queue()
        exchange.journey["completion_id"] = self.completion_id
        exchange.journey["settings"] = asdict(_sampling(chat)) | {"max_tokens": max_tokens, "stop": chat.stop}

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
            exchange.error = f"{type(error).__name__}: {error}"
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
        result = generation.generate(self.loaded, self.prompt_ids, _sampling(self.chat), self.max_tokens,
                                     stop=self.chat.stop, cancelled=self.call.cancel.is_set)
        exchange.finish_reason = result.finish_reason
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
        body = build_response(self.completion_id, self.chat.model, result.text, result.finish_reason,
                              len(self.prompt_ids), result.completion_tokens)
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
            self.loaded, self.prompt_ids, _sampling(self.chat), self.max_tokens, self.chat.model,
            self.completion_id, True, stop=self.chat.stop, cancelled=self.call.cancel.is_set,
            started=exchange.started,
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
                if event.error is not None:
                    exchange.outcome, exchange.error = "error", data["error"]["message"]
                at = round(event.at, 6)
                frames.append({"at": at, "sse": sse})
                if streaming.delta_content(data):
                    self.call.completion_tokens += 1
                    exchange.ttft = exchange.ttft if exchange.ttft is not None else at
                for choice in (data or {}).get("choices") or []:
                    exchange.finish_reason = choice.get("finish_reason") or exchange.finish_reason
                if data is None:
                    tail.append(sse)
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


class _CancellingStream(StreamingResponse):
    """An SSE response that cancels its generation however the response ends (client gone included)."""

    def __init__(self, content, cancel: threading.Event, **kwargs):
        super().__init__(content, **kwargs)
        self._cancel = cancel

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._cancel.set()


_default_server: ApiServer | None = None
_default_lock = threading.Lock()


def default_server(secrets_: Mapping | None = None) -> ApiServer:
    """The process's API server, configured once from the environment / secrets. When no key is
    configured, the generated development key is printed once (to stdout, never to the log)."""
    global _default_server
    with _default_lock:
        if _default_server is None:
            config = api_config(secrets_)
            _default_server = ApiServer(config)
            if config.development_key:
                print(f"LLM Request Lifecycle API: no {KEYS_ENV} set; development key for this run: "
                      f"{config.keys['dev']}", flush=True)
        return _default_server


def api_routes(secrets_: Mapping | None = None, server: ApiServer | None = None) -> list[BaseRoute]:
    """The API's routes for ``st.App(..., routes=api_routes())`` or a plain Starlette app.

    Starts loading the model in the background, so ``/health`` turns 200 without any request.
    """
    server = server or default_server(secrets_)
    start_model_loading()
    return [
        Route(path, _Endpoint(server._guard(handler)))
        for path, handler in (
            ("/health", server.health),
            ("/v1/models", server.models),
            ("/v1/chat/completions", server.chat_completions),
            ("/v1/{rest:path}", server.not_found),
        )
    ]


class _Endpoint:
    """An ASGI endpoint: Starlette then routes every method to it, so a wrong method gets our 405."""

    def __init__(self, handler: Callable):
        self.handler = handler

    async def __call__(self, scope, receive, send) -> None:
        response = await self.handler(Request(scope, receive))
        await response(scope, receive, send)
