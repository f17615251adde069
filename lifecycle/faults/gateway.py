"""A faulty gateway: a real HTTP server on a loopback port, in front of each visitor's demo gateway.

Every request must carry a registered fault plan's id in the ``x-fault-plan`` header. The plan says
which attempts meet its fault (a 429 with ``retry-after``, a 500 or 503, a reset connection, a slow
first byte, a stream cut after N tokens); every other attempt is forwarded to the plan's own
``DemoGateway``, so it is answered by the real API code with the visitor's own key, buckets and
in-memory log. A request without a known plan id gets a 404 and reaches no gateway at all: faults
never touch another visitor, a configured key or the server's call log.

The gateway records every attempt it receives: when it arrived, what it was answered, the
``x-request-id`` of that answer and the client's ``traceparent`` and retry-count headers.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lifecycle.faults.plan import PLAN_LIFETIME, Fault, FaultPlan
from lifecycle.api.demo import DemoGateway
from lifecycle.api.errors import error_envelope
from lifecycle.api.exchange import new_request_id
from lifecycle.lessons.words import counted

PLAN_HEADER = "x-fault-plan"
CHAT_PATH = "/v1/chat/completions"
MAX_PLANS = 256  # plans registered at once; the oldest are dropped first
MAX_BODY = 1_000_000  # bytes a request body may have
FORWARDED_HEADERS = ("authorization", "content-type", "traceparent", "tracestate")
HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive"}
DEMO_CLIENT = ("203.0.113.7", 50_000)  # the address the demo gateway sees (a documentation range)
POLL = 0.05  # seconds between checks that a slow attempt's client is still there


@dataclass(frozen=True)
class Attempt:
    """One request as the gateway received it, and what it answered.

    ``arrived`` and ``answered`` are ``time.monotonic()`` readings; ``status`` is None when no HTTP
    status line was sent (a reset, or a client that gave up first).
    """

    number: int
    arrived: float
    answered: float | None = None
    status: int | None = None
    answer: str = ""
    faulted: bool = False
    request_id: str | None = None
    retry_count: str | None = None  # the SDK's x-stainless-retry-count header
    traceparent: str | None = None
    tokens_sent: int | None = None  # content chunks of a streamed answer that left the gateway


@dataclass
class _Entry:
    plan: FaultPlan
    demo: DemoGateway
    expires: float
    attempts: list[Attempt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, headers) -> Attempt:
        with self.lock:
            attempt = Attempt(len(self.attempts) + 1, time.monotonic(), retry_count=headers.get("x-stainless-retry-count"),
                              traceparent=headers.get("traceparent"))
            self.attempts.append(attempt)
            return attempt

    def finish(self, attempt: Attempt, **changes) -> None:
        with self.lock:
            self.attempts[attempt.number - 1] = replace(attempt, answered=time.monotonic(), **changes)


class FaultyGateway:
    """The loopback server and its registry of fault plans (one plan per client run)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self._plans: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self._server.gateway = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-gateway", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL clients call (append /v1)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def register(self, plan: FaultPlan, demo: DemoGateway) -> None:
        """Serve ``plan``'s faults, and forward its other attempts to ``demo``, until it expires."""
        now = time.monotonic()
        with self._lock:
            for plan_id in [i for i, e in self._plans.items() if e.expires < now]:
                del self._plans[plan_id]
            while len(self._plans) >= MAX_PLANS:
                del self._plans[next(iter(self._plans))]
            self._plans[plan.id] = _Entry(plan, demo, now + PLAN_LIFETIME)

    @contextmanager
    def serving(self, plans: list[tuple[FaultPlan, DemoGateway]]) -> Iterator[None]:
        """Serve these plans for the length of a ``with`` block."""
        for plan, demo in plans:
            self.register(plan, demo)
        try:
            yield
        finally:
            for plan, _ in plans:
                self.forget(plan.id)

    def attempts(self, plan_id: str, settle: float = 0.0) -> list[Attempt]:
        """The attempts received under ``plan_id``, first first, after waiting up to ``settle``
        seconds for those still being answered (one whose client gave up ends soon after)."""
        entry = self._plans.get(plan_id)
        if entry is None:
            return []
        deadline = time.monotonic() + settle
        while any(a.answered is None for a in entry.attempts) and time.monotonic() < deadline:
            time.sleep(POLL)
        with entry.lock:
            return list(entry.attempts)

    def forget(self, plan_id: str) -> None:
        """Stop serving ``plan_id``: later requests carrying it get a 404."""
        with self._lock:
            self._plans.pop(plan_id, None)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _entry(self, plan_id: str | None) -> _Entry | None:
        with self._lock:
            entry = self._plans.get(plan_id or "")
            return entry if entry is not None and entry.expires >= time.monotonic() else None

    # --- answering one request ---------------------------------------------------------------

    def handle(self, handler: _Handler, body: bytes) -> None:
        entry = self._entry(handler.headers.get(PLAN_HEADER))
        if entry is None or handler.path != CHAT_PATH:
            _send_json(handler, 404, error_envelope(
                f"No fault plan here: send POST {CHAT_PATH} with a registered {PLAN_HEADER} header.",
                code="unknown_fault_plan"), {"x-request-id": new_request_id()})
            return
        attempt = entry.begin(handler.headers)
        plan = entry.plan
        if not plan.faults_attempt(attempt.number):
            self._forward(handler, entry, attempt, body)
        elif plan.fault in _STATUS_FAULTS:
            status, message, kind = _STATUS_FAULTS[plan.fault]
            request_id = new_request_id()
            headers = {"x-request-id": request_id}
            if plan.fault is Fault.RATE_LIMIT:
                headers["retry-after"] = f"{plan.retry_after:g}"
            _send_json(handler, status, error_envelope(message, type=kind, code=plan.fault.value), headers)
            answer = f"{status}" + (f", retry-after: {headers['retry-after']}" if "retry-after" in headers else "")
            entry.finish(attempt, status=status, answer=answer, faulted=True, request_id=request_id)
        elif plan.fault is Fault.RESET:
            _reset(handler)
            entry.finish(attempt, answer="connection reset, no answer", faulted=True)
        elif plan.fault is Fault.SLOW_FIRST_BYTE:
            waited = _wait_while_connected(handler, plan.delay)
            if waited < plan.delay:
                handler.close_connection = True
                entry.finish(attempt, answer=f"client gave up after {waited:.2f} s, before the first byte", faulted=True)
            else:
                self._forward(handler, entry, attempt, body, faulted=True, note=f"first byte after {plan.delay:g} s")
        else:  # Fault.STREAM_CUT
            self._forward(handler, entry, attempt, body, faulted=True, cut_after=plan.cut_after)

    def _forward(self, handler: _Handler, entry: _Entry, attempt: Attempt, body: bytes, *, faulted: bool = False,
                 note: str = "", cut_after: int | None = None) -> None:
        headers = [(name, handler.headers[name]) for name in FORWARDED_HEADERS if handler.headers.get(name)]
        relay = _Relay(handler, cut_after)
        asyncio.run(relay.run(entry.demo.app, body, headers))
        if relay.cut:
            answer = f"{relay.status}, stream cut after {counted(relay.tokens, 'token')}"
        elif relay.client_gone:
            answer = f"{relay.status} from the demo gateway, but the client had hung up"
        else:
            answer = f"{relay.status} from the demo gateway" + (f" ({note})" if note else "")
        entry.finish(attempt, status=relay.status, answer=answer, faulted=faulted or relay.cut,
                     request_id=relay.request_id, tokens_sent=relay.tokens if relay.streamed else None)


class _Relay:
    """Runs the demo gateway's ASGI app for one request and relays its answer to the socket as it is
    produced (chunked), event by event for a stream; resets the connection after ``cut_after`` tokens.
    A client that hangs up, or a cut, is told to the app as a disconnect, so generation stops."""

    def __init__(self, handler: BaseHTTPRequestHandler, cut_after: int | None):
        self.handler, self.cut_after = handler, cut_after
        self.status: int | None = None
        self.request_id: str | None = None
        self.streamed = self.cut = self.client_gone = False
        self.tokens = 0
        self._pending = b""
        self._body_sent = False

    async def run(self, app, body: bytes, headers: list[tuple[str, str]]) -> None:
        self._gone = asyncio.Event()
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": CHAT_PATH, "raw_path": CHAT_PATH.encode(), "query_string": b"",
                 "root_path": "", "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
                 + [(b"content-length", str(len(body)).encode())],
                 "client": DEMO_CLIENT, "server": ("gateway-demo", 80)}

        async def receive() -> dict:
            if not self._body_sent:
                self._body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await self._gone.wait()
            return {"type": "http.disconnect"}

        watcher = asyncio.create_task(self._watch())
        try:
            await app(scope, receive, self._send)
        finally:
            self._gone.set()
            watcher.cancel()

    async def _watch(self) -> None:
        """Tell the app when the client hangs up (a timeout), so the gateway stops generating for nobody."""
        while not self._gone.is_set():
            if await asyncio.to_thread(_hung_up, self.handler, POLL):
                self._hung_up()
                return

    async def _send(self, message: dict) -> None:
        if self._gone.is_set():
            return
        if message["type"] == "http.response.start":
            self.status = message["status"]
            kept = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
            kept = [(k, v) for k, v in kept if k.lower() not in HOP_HEADERS]
            self.request_id = next((v for k, v in kept if k.lower() == "x-request-id"), None)
            self.streamed = any(k.lower() == "content-type" and v.startswith("text/event-stream") for k, v in kept)
            self._write_head(kept)
        elif message["type"] == "http.response.body":
            self._relay(message.get("body", b""))
            if not message.get("more_body", False) and not self._gone.is_set():
                self._write(self._pending, final=True)
                self._gone.set()

    def _write_head(self, headers: list[tuple[str, str]]) -> None:
        try:
            self.handler.send_response(self.status)
            for name, value in headers:
                self.handler.send_header(name, value)
            self.handler.send_header("transfer-encoding", "chunked")
            self.handler.end_headers()
        except OSError:
            self._hung_up()

    def _relay(self, data: bytes) -> None:
        if not self.streamed:
            self._write(data)
            return
        self._pending += data
        while b"\n\n" in self._pending and not self._gone.is_set():
            event, self._pending = self._pending.split(b"\n\n", 1)
            if self.cut_after is not None and self.status == 200 and self.tokens >= self.cut_after:
                self.cut = True
                _reset(self.handler)
                self._gone.set()
                return
            self._write(event + b"\n\n")
            self.tokens += _carries_text(event)

    def _write(self, data: bytes, final: bool = False) -> None:
        try:
            if data:
                self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            if final:
                self.handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            self._hung_up()

    def _hung_up(self) -> None:
        self.client_gone = True
        self.handler.close_connection = True
        self._gone.set()


_STATUS_FAULTS = {
    Fault.RATE_LIMIT: (429, "Rate limit reached (an injected fault).", "requests"),
    Fault.SERVER_ERROR: (500, "The server had an error while processing your request (an injected fault).",
                         "server_error"),
    Fault.UNAVAILABLE: (503, "The server is overloaded or not ready yet (an injected fault).", "server_error"),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the SDK's client expects

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            _send_json(self, 413, error_envelope(f"A request body needs a content-length of at most {MAX_BODY:,} bytes."),
                       {})
            self.close_connection = True
            return
        self.server.gateway.handle(self, self.rfile.read(length))

    def do_GET(self) -> None:  # noqa: N802
        _send_json(self, 404, error_envelope(f"Only POST {CHAT_PATH} is served here."), {})

    def log_message(self, format, *args) -> None:  # the attempts are recorded; no stderr line per request
        pass


def _send_json(handler: BaseHTTPRequestHandler, status: int, body: dict, headers: dict[str, str]) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Drop the connection with a TCP reset (SO_LINGER 0), as a crashed proxy or a broken network does."""
    handler.close_connection = True
    connection = handler.connection
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.rfile.close()  # the file holds a reference; the socket closes only once it is released
    connection.close()


def _hung_up(handler: BaseHTTPRequestHandler, seconds: float) -> bool:
    """True if the client closes its side of the connection within ``seconds``."""
    try:
        readable, _, _ = select.select([handler.connection], [], [], seconds)
        return bool(readable) and handler.connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):  # a closed socket: the client is gone too
        return True


def _wait_while_connected(handler: BaseHTTPRequestHandler, seconds: float) -> float:
    """Hold the attempt for ``seconds``; return early (with the time waited) if the client hangs up."""
    start = time.monotonic()
    while (waited := time.monotonic() - start) < seconds:
        if _hung_up(handler, min(POLL, seconds - waited)):
            return time.monotonic() - start
    return seconds


def _carries_text(event: bytes) -> bool:
    """True for an SSE chunk whose delta carries some answer text."""
    data = event.removeprefix(b"data: ").strip()
    if data == b"[DONE]":
        return False
    try:
        chunk = json.loads(data)
    except ValueError:
        return False
    return any((choice.get("delta") or {}).get("content") for choice in chunk.get("choices") or [])


_shared: FaultyGateway | None = None
_shared_lock = threading.Lock()


def shared_fault_gateway() -> FaultyGateway:
    """The process's one faulty gateway, started on a free loopback port at first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FaultyGateway()
        return _shared
