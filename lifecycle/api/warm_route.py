"""``POST /lifecycle/warm``: fill the pages' caches with a list of prompts (see lifecycle.api.warm).

It sits next to the API routes and takes the same API keys. Each prompt becomes exactly the
input a page builds from the sidebar: app.py hands the route the pages' own recipe
(``ui.settings.page_journey_input``), so this module needs nothing of Streamlit. Every stage runs
through the process-wide ``lifecycle.results`` the pages read; then the work pages do of their own
(the Agents page's loop, the KV cache page's turns, ...: ``ui.warm_pages.prepare_pages``, also handed
over by app.py) runs into the same shared cache, so a warmed prompt opens every page at once.
Prompts run ``WARM_CONCURRENCY`` at a time: the engine batches them, and the class (or anyone
already on a page) still gets its turn between them. The pages' own work runs one prompt at a time: it
holds measurements (the KV cache page's prefill and decode timings) that other prompts' work beside
them would spoil, and side by side it took no less (3 prompts: 142 s either way, on 2 cores).
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from lifecycle.errors import LifecycleError
from lifecycle.journey import JourneyInput
from lifecycle.model import shared_model
from lifecycle.results import JourneyResults, shared_results
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.errors import error_envelope
from lifecycle.api.keys import bearer_token, check_api_key
from lifecycle.api.serving import model_status, start_model_loading
from lifecycle.api.warm import WARM_PATH, parse_prompts, parse_settings

WARM_CONCURRENCY = 8
MAX_BODY_BYTES = 4 * 1024 * 1024
_workers = ThreadPoolExecutor(max_workers=WARM_CONCURRENCY, thread_name_prefix="warm")
_pages_lock = threading.Lock()  # the pages' own work: one prompt at a time (see above)
# The body's settings (the sidebar's names) and a prompt -> the journey input a page would build.
PageInput = Callable[[Mapping[str, object], str], JourneyInput]
# The same -> the pages' own work for that prompt, done; returns the URL paths of the pages it prepared.
PagePrep = Callable[[Mapping[str, object], str], list[str]]


def warm_routes(server: ApiServer, page_input: PageInput, prepare_pages: PagePrep | None = None) -> list[BaseRoute]:
    """The warm route, authenticated with ``server``'s API keys; ``page_input`` builds each prompt's input, and
    ``prepare_pages`` (when given) runs the pages' own work after each prompt's journey."""

    async def endpoint(request: Request) -> Response:
        try:
            return await _warm(request, server, page_input, prepare_pages)
        except LifecycleError as error:
            status = 401 if error.code == "invalid_api_key" else 503 if error.code == "model_not_ready" else 400
            headers = {"retry-after": "2"} if status == 503 else {}
            return JSONResponse(error_envelope(error.message, param=error.param, code=error.code), status,
                                headers=headers)

    return [Route(WARM_PATH, endpoint, methods=["POST"])]


async def _warm(request: Request, server: ApiServer, page_input: PageInput,
                prepare_pages: PagePrep | None) -> Response:
    decision = check_api_key(bearer_token(request.headers.get("authorization")), server.config.keys)
    if not decision.allowed:
        raise LifecycleError(decision.message, code="invalid_api_key")
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise LifecycleError(f"The body is larger than {MAX_BODY_BYTES:,} bytes.", code="request_too_large")
    try:
        payload = json.loads(body)
    except ValueError as error:
        raise LifecycleError("The body is not valid JSON.", code="invalid_json") from error
    if not isinstance(payload, dict):
        raise LifecycleError("The body must be a JSON object with 'prompts'.", code="invalid_json")
    prompts = parse_prompts(payload.get("prompts"))
    settings = parse_settings(payload.get("settings"))
    inputs = [page_input(settings, prompt) for prompt in prompts]
    with_pages = payload.get("pages", True)
    if not isinstance(with_pages, bool):
        raise LifecycleError("'pages' must be true or false.", param="pages")
    prepare = prepare_pages if with_pages and prepare_pages is not None else None
    pages = [functools.partial(prepare, settings, prompt) if prepare else _no_pages for prompt in prompts]
    status = model_status()
    if status.state != "ready":
        start_model_loading()
        raise LifecycleError(f"The model is {status.state}; retry shortly.", code="model_not_ready")
    results = shared_results(shared_model())
    return StreamingResponse(_report(results, inputs, pages), media_type="application/x-ndjson")


async def _report(results: JourneyResults, inputs: list, pages: list[Callable[[], list[str]]]) -> object:
    """One JSON line per prompt as soon as it is ready (in finishing order), then a summary line."""
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    tasks = [loop.run_in_executor(_workers, _warm_one, results, index, inp, prepare)
             for index, (inp, prepare) in enumerate(zip(inputs, pages))]
    ready = failed = 0
    for next_done in asyncio.as_completed(tasks):
        line = await next_done
        ready += line["status"] == "ready"
        failed += line["status"] == "error"
        yield json.dumps(line) + "\n"
    yield json.dumps({"done": True, "ready": ready, "failed": failed,
                      "seconds": round(time.perf_counter() - started, 3)}) + "\n"


def _no_pages() -> list[str]:
    """The pages' own work left out (``"pages": false``, or no ``prepare_pages`` given): none prepared."""
    return []


def _warm_one(results: JourneyResults, index: int, inp, prepare_pages: Callable[[], list[str]]) -> dict:
    started = time.perf_counter()
    try:
        pending = results.peek_answer(inp)
        cached = pending is not None and pending.done() and pending.exception() is None
        journey = results.warm(inp)
        journey_seconds = time.perf_counter() - started
        with _pages_lock:
            pages = prepare_pages()
    except LifecycleError as error:
        return {"index": index, "status": "error", "error": error.message}
    return {
        "index": index,
        "status": "ready",
        "already_cached": cached,
        "seconds": round(time.perf_counter() - started, 3),
        "journey_seconds": round(journey_seconds, 3),
        "pages": pages,
        "prompt_tokens": len(journey.rendered.ids),
        "completion_tokens": journey.generation.completion_tokens,
    }
