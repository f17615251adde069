"""The API's routes: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (JSON or SSE),
``GET /v1/models``, ``GET /v1/models/{model}`` and ``GET /health``.

Streamlit serves them next to the pages (``st.App("app.py", routes=api_routes())``); a plain
Starlette app can serve them too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from lifecycle.api.config import api_config
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.keys import KEYS_ENV
from lifecycle.api.nodelay import nagle_off_for_uvicorn
from lifecycle.api.serving import start_model_loading

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

    Starts loading the model in the background, so ``/health`` turns 200 without any request, and turns
    Nagle's algorithm off on the connections uvicorn accepts (lifecycle/api/nodelay.py).
    """
    server = server or default_server(secrets_)
    start_model_loading()
    nagle_off_for_uvicorn()
    return [
        Route(path, _Endpoint(server._guard(handler)))
        for path, handler in (
            ("/health", server.health),
            ("/v1/models", server.models),
            ("/v1/models/{model:path}", server.model),  # a Hub id holds a "/"
            ("/v1/chat/completions", server.chat_completions),
            ("/v1/responses", server.responses),
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
