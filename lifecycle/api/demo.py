"""A gateway of one's own: the real API with a demo key, its own rate-limit buckets and its own
in-memory call log, called over a real (in-process) HTTP request.

The Gateway page sends a visitor's request here, so every decision it shows is the real gateway's
on a request that was really made, while no configured key's budget is spent and no row lands in
the server's call log.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import httpx
from starlette.applications import Starlette

from lifecycle.api.config import ApiConfig
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.keys import new_api_key
from lifecycle.api.routes import api_routes

DEMO_KEY_NAME = "demo"
DEMO_REQUESTS_PER_MINUTE = 5
DEMO_TOKENS_PER_MINUTE = 20_000


@dataclass(frozen=True)
class DemoAnswer:
    """The demo gateway's HTTP answer and, when the call was logged, its journey's decisions."""

    status: int
    headers: list[tuple[str, str]]
    body: object
    steps: list[dict]
    logged: bool


class DemoGateway:
    """One visitor's gateway: the real ``ApiServer`` with a fresh demo key and tiny, private limits."""

    def __init__(self, requests_per_minute: int = DEMO_REQUESTS_PER_MINUTE,
                 tokens_per_minute: int = DEMO_TOKENS_PER_MINUTE):
        self.key = new_api_key()
        self.server = ApiServer(ApiConfig(
            keys={DEMO_KEY_NAME: self.key}, requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute, call_log=":memory:", log_max_rows=50,
            admin_keys=frozenset(), unauthenticated_per_minute=requests_per_minute,
        ))
        self._app = Starlette(routes=api_routes(server=self.server))

    @property
    def app(self) -> Starlette:
        """This gateway's ASGI app, for a server put in front of it (the Failures page's faulty gateway)."""
        return self._app

    def send(self, payload: dict, presented_key: str | None) -> DemoAnswer:
        """POST ``payload`` to /v1/chat/completions as a client presenting ``presented_key``."""
        headers = {"content-type": "application/json"}
        if presented_key is not None:
            headers["authorization"] = f"Bearer {presented_key}"
        response = asyncio.run(self._post(json.dumps(payload, ensure_ascii=False).encode(), headers))
        try:
            body = response.json()
        except ValueError:
            body = response.text
        record = self.server.gateway.log.get(response.headers.get("x-request-id", ""))
        steps = (record.journey or {}).get("gateway", []) if record is not None else []
        return DemoAnswer(response.status_code, list(response.headers.multi_items()), body, steps, record is not None)

    async def _post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        transport = httpx.ASGITransport(app=self._app, client=("203.0.113.7", 50_000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway-demo") as client:
            return await client.post("/v1/chat/completions", content=body, headers=headers, timeout=300)
