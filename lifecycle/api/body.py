"""The body of an API call as the server takes it in: read within a size and a time limit, then
parsed as JSON and checked against the served models (a model not served is the routing's 404)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from starlette.requests import ClientDisconnect, Request

from lifecycle.api.errors import ApiError
from lifecycle.api.exchange import Exchange
from lifecycle.api.model_routing import route
from lifecycle.errors import LifecycleError
from lifecycle.stages.request import validate_request

# The journey keeps at most this much of a raw body (a 1 MiB prompt is counted, not copied).
_JOURNEY_BODY_CHARS = 64 * 1024


async def read_body(request: Request, exchange: Exchange, limit: int, seconds: float) -> bytes:
    """The body, at most ``limit`` bytes, all of it within ``seconds``: 413, 408 or 400 (a client gone) if not."""
    too_large = ApiError(413, f"The request body is larger than the limit of {limit} bytes.",
                         code="request_too_large")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        exchange.journey["request"]["body"] = f"<{declared} bytes, not read>"
        raise too_large
    chunks, size = [], 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                exchange.journey["request"]["body"] = f"<more than {limit} bytes, not read>"
                raise too_large
            chunks.append(chunk)

    try:  # one deadline for the whole body: a client trickling bytes cannot hold a worker
        await asyncio.wait_for(read(), seconds)
    except ClientDisconnect as gone:
        raise ApiError(400, "The client disconnected while sending the body.", code="client_disconnected",
                       outcome="cancelled") from gone
    except TimeoutError as slow:
        exchange.journey["request"]["body"] = f"<{size} bytes received in {seconds:g} s>"
        raise ApiError(408, f"The request body did not arrive within {seconds:g} s.",
                       code="request_timeout", outcome="cancelled") from slow
    body = b"".join(chunks)
    text = body.decode("utf-8", errors="replace")
    exchange.journey["request"]["body"] = text[:_JOURNEY_BODY_CHARS]
    exchange.journey["request"]["body_bytes"] = len(body)
    return body


def parse_body(request: Request, body: bytes, exchange: Exchange, served: list[str],
               validate: Callable = validate_request):
    """A JSON body checked by ``validate``; a model not in ``served`` is the routing's 404."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(400, f"Expected 'Content-Type: application/json', got {media_type or 'none'!r}.",
                       code="invalid_content_type")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as error:
        detail = error.msg if isinstance(error, json.JSONDecodeError) else "not valid JSON"
        raise ApiError(400, f"The request body is not valid JSON: {detail}.", code="invalid_json") from error
    try:
        chat = validate(payload, known_models=served)
    except LifecycleError as error:
        if error.code == "model_not_found":
            decision = route(payload.get("model"), served)
            exchange.step("routing", "refused", decision.message, 404)
            raise ApiError(404, decision.message, param="model", code="model_not_found") from error
        raise ApiError(400, error.message, param=error.param, code=error.code) from error
    exchange.model = chat.model
    exchange.step("routing", "passed", route(chat.model, served).message, 200)
    exchange.journey["request"]["validated"] = chat.to_payload()
    return chat
