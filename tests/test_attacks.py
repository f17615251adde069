"""Hostile inputs, each with the refusal it must get: what a stranger on the open internet would try.

Outbound requests (SSRF), Markdown/HTML smuggled into paths, headers, prompts, model names and
errors (checked in the DOM of a real browser), a flood of unauthenticated requests, a slow-loris
upload, a never-ending SSE line from a remote server, and sessions reading each other's calls.
The DOM checks live beside the other browser tests (tests/browser/test_attacks_in_the_browser.py).
"""

from __future__ import annotations

import gc
import ipaddress
import json
import socket
import threading
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from lifecycle.errors import LifecycleError
from lifecycle.api.config import ApiConfig
from lifecycle.api import serving
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.outbound import MAX_LINE_BYTES, OutboundPolicy, send_chat_completion
from tests.pages.harness import run_page
from tests.test_api import KEY, serve

HELLO = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0}
LOOPBACK = OutboundPolicy.from_setting("127.0.0.0/8", local_only=False)
EVIL = "https://evil.example"
HOSTILE = f"[click me]({EVIL}/link) ![img]({EVIL}/pixel.png) <img src={EVIL}/tag.png> <script>alert(1)</script>"


# --- outbound requests (SSRF) ------------------------------------------------------------------


@contextmanager
def listener(reply: bytes | None = None, trickle: bytes | None = None, hold: bool = False):
    """A raw TCP server on loopback that records whether anyone connected; yields (port, connections)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    connections: list[bytes] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                connections.append(conn.recv(65536))
                try:
                    if reply:
                        conn.sendall(reply)
                    while trickle and not stop.is_set():
                        conn.sendall(trickle)
                        time.sleep(0.001)
                    while hold and not stop.is_set():  # keep the connection open, sending nothing
                        time.sleep(0.05)
                except OSError:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], connections
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.mark.parametrize("host, reason", [
    ("127.0.0.1", "127.0.0.1 is a loopback address"),
    ("10.0.0.1", "10.0.0.1 is a private address"),
    ("169.254.169.254", "169.254.169.254 is a link-local address"),
    ("[::1]", "::1 is a loopback address"),
    ("localhost", "localhost resolves to"),  # a name that resolves to loopback
    ("[::ffff:127.0.0.1]", "a loopback address"),
    ("0.0.0.0", "not a unicast host address"),
])
def test_private_and_metadata_targets_are_refused_before_connecting(host, reason):
    with listener() as (port, connections):
        with pytest.raises(LifecycleError) as refused:
            send_chat_completion(f"http://{host}:{port}/v1", HELLO, api_key="sk-visitor", policy=OutboundPolicy())
        time.sleep(0.3)
    message = refused.value.message
    assert refused.value.code == "outbound_refused" and reason in message
    assert "\n" not in message and message.startswith("Refused: ")
    assert connections == []


def test_metadata_addresses_stay_refused_even_when_the_operator_allows_everything_private():
    generous = OutboundPolicy.from_setting("0.0.0.0/0,::/0", local_only=True)
    for address in ("169.254.169.254", "fe80::1", "fd00:ec2::254", "100.100.100.200"):
        assert generous.refusal(ipaddress.ip_address(address), 80) is not None, address
    assert OutboundPolicy.from_setting("", local_only=True).refusal(ipaddress.ip_address("127.0.0.1"), 80) is None
    assert OutboundPolicy.from_setting("", local_only=False).refusal(ipaddress.ip_address("127.0.0.1"), 80)


def test_every_resolved_address_is_checked_and_the_checked_one_is_used():
    """A name with one public and one loopback address is refused; an allowed name is resolved once and
    the connection goes to the address that was checked, with the name only in the Host header."""
    public_and_loopback = lambda host, port, **_: [  # noqa: E731
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
    ]
    with pytest.raises(LifecycleError, match="rebind.example resolves to 127.0.0.1, a loopback address"):
        send_chat_completion("http://rebind.example/v1", HELLO, policy=OutboundPolicy(), resolve=public_and_loopback)

    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    with listener(reply) as (port, connections):
        lookups = []

        def to_loopback(host, port_, **_):
            lookups.append(host)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port_))]

        exchange = send_chat_completion(f"http://api.example.test:{port}/v1", HELLO, policy=LOOPBACK, resolve=to_loopback)
    assert exchange.status == 200 and exchange.address == "127.0.0.1" and lookups == ["api.example.test"]
    assert f"host: api.example.test:{port}".encode() in connections[0].lower()


def test_a_redirect_to_loopback_is_not_followed():
    with listener() as (target, reached):
        redirect = (f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{target}/v1/chat/completions\r\n"
                    "Content-Length: 0\r\n\r\n").encode()
        with listener(redirect) as (port, _):
            exchange = send_chat_completion(f"http://127.0.0.1:{port}/v1", HELLO, policy=LOOPBACK)
        time.sleep(0.3)
    assert exchange.status == 302 and "redirects are not followed" in exchange.stopped
    assert reached == []


def test_a_never_ending_sse_line_is_cut_at_the_line_cap():
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: "
    with listener(head, trickle=b"x" * 8192) as (port, _):
        started = time.monotonic()
        exchange = send_chat_completion(f"http://127.0.0.1:{port}/v1", HELLO, policy=LOOPBACK, deadline=20)
    assert time.monotonic() - started < 10
    assert exchange.stopped.startswith(f"A line passed {MAX_LINE_BYTES // 1024} KiB") and exchange.frames == []


def test_a_server_that_never_finishes_is_cut_at_the_deadline():
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    with listener(head, hold=True) as (port, _):  # one byte of the body, then nothing: the read blocks
        started = time.monotonic()
        exchange = send_chat_completion(f"http://127.0.0.1:{port}/v1", HELLO, policy=LOOPBACK, deadline=2)
        elapsed = time.monotonic() - started
    assert 1.9 < elapsed < 5 and "took longer than 2 s" in exchange.stopped


# --- nothing stored before the key is checked --------------------------------------------------


@pytest.fixture
def strangers_server(tmp_path, loaded):
    server = ApiServer(ApiConfig(keys={"tester": KEY}, call_log=tmp_path / "calls.sqlite3",
                                 unauthenticated_per_minute=30, body_seconds=2))
    with serve(server) as url:
        yield server, url


def _disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def test_a_thousand_unauthenticated_requests_leave_only_a_counter(strangers_server):
    server, url = strangers_server
    body = json.dumps({"model": "x", "messages": [{"role": "user", "content": "A" * 60_000}]})
    # The server builds the engine and the pages' hooked model in a background thread after /health is
    # ready; run alone, that build would fall inside the measured window, so it ends first.
    for thread in threading.enumerate():
        if thread.name == serving.LOADER_THREAD:
            thread.join(300)
    with httpx.Client(base_url=url) as client:
        client.post("/v1/chat/completions", content=body, headers={"Authorization": "Bearer warm-up"})
        gc.collect()
        disk_before = _disk(server.gateway.log.path)
        tracemalloc.start()
        before, _ = tracemalloc.get_traced_memory()
        statuses = [client.post("/v1/chat/completions", content=body,
                                headers={"Authorization": f"Bearer guess-{n}", "content-type": "application/json"}
                                ).status_code for n in range(1000)]
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert set(statuses[:29]) == {401} and set(statuses) == {401, 429}  # 30 a minute per address, then 429
    assert statuses.count(429) >= 900
    assert _disk(server.gateway.log.path) == disk_before and server.gateway.log.count() == 0
    assert sum(server.gateway.refused.values()) == 1001
    assert after - before < 2 * 1024 * 1024, f"{(after - before) / 1024:.0f} KiB kept after 1,000 refusals"
    assert len(server.gateway.strangers) == 1  # one bucket for the one address


def test_a_slow_loris_upload_is_cut_at_the_body_deadline(strangers_server):
    server, url = strangers_server
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{").encode())
        started = time.monotonic()
        answer = b""
        try:
            while b"did not arrive" not in answer and time.monotonic() - started < 10:
                sock.sendall(b" ")
                try:
                    sock.settimeout(0.5)
                    answer += sock.recv(4096)
                except TimeoutError:
                    continue
        except (BrokenPipeError, ConnectionResetError):
            pass
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 2 s" in answer
    assert elapsed < 6


def test_an_unauthenticated_upload_is_refused_before_its_body_is_read(strangers_server):
    server, url = strangers_server
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000\r\n\r\n{")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 401") and server.gateway.log.count() == 0


def test_an_oversized_prompt_is_refused_before_tokenizing_and_still_pays(strangers_server, loaded, monkeypatch):
    server, url = strangers_server
    tokenized = []
    import lifecycle.api.budget as budget

    monkeypatch.setattr(budget, "render_messages", lambda messages: tokenized.append(1))
    huge = {"model": loaded.name, "messages": [{"role": "user", "content": "x" * 900_000}], "max_tokens": 1}
    response = httpx.post(f"{url}/v1/chat/completions", json=huge, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    assert "at least" in response.json()["error"]["message"] and tokenized == []
    left = int(response.headers["x-ratelimit-remaining-requests"])
    assert left == server.config.requests_per_minute - 1  # refused, and charged like any call


def test_health_and_refusals_carry_no_load_error_text(strangers_server, monkeypatch):
    server, url = strangers_server
    import lifecycle.api.endpoints as endpoints
    from lifecycle.api.serving import ModelStatus

    failed = ModelStatus("failed", "m", error="OSError: /root/.cache/secret-path is unreadable")
    monkeypatch.setattr(endpoints, "model_status", lambda: failed)
    monkeypatch.setattr(endpoints, "start_model_loading", lambda: None)
    health = httpx.get(f"{url}/health")
    assert health.status_code == 503 and "secret-path" not in health.text and "error" not in health.json()
    answer = httpx.post(f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                        json={"model": "m", **HELLO})
    assert answer.status_code == 503 and "secret-path" not in answer.text


# --- stranger's text never rendered as Markdown or HTML: tests/browser/test_attacks_in_the_browser.py
# (a real browser's DOM; it shares the browser suite's one chromium and app server).


# --- sessions reading each other's calls -------------------------------------------------------


def test_concurrent_sessions_cannot_read_each_others_calls(loaded, tmp_path, monkeypatch):
    from lifecycle.api import routes
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    alice, bob = "sk-alice-" + "1" * 24, "sk-bob-" + "2" * 24
    server = ApiServer(ApiConfig(keys={"alice": alice, "bob": bob}, call_log=tmp_path / "calls.sqlite3"))
    monkeypatch.setattr(routes, "_default_server", server)
    client = TestClient(Starlette(routes=routes.api_routes(server=server)))
    made = {}
    for name, key in (("alice", alice), ("bob", bob)):
        made[name] = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                                 json={"model": loaded.name, **HELLO, "messages": [
                                     {"role": "user", "content": f"secret of {name}"}]}).headers["x-request-id"]

    # Both sessions are open at once, each holding a link to the other's call.
    opened = {"alice": run_page("live-calls", call=made["bob"]), "bob": run_page("live-calls", call=made["alice"])}
    results = {}
    for name, key in (("alice", alice), ("bob", bob)):
        opened[name].text_input(key="live_calls_key").set_value(key)
        results[name] = opened[name].run()
    for name, other in (("alice", "bob"), ("bob", "alice")):
        app = results[name]
        everything = "\n".join([*(c.value for c in app.code), *(t.value for t in app.text),
                                *(frame.value.to_csv() for frame in app.dataframe)])
        assert f"secret of {other}" not in everything and made[other] not in everything
        assert any("belongs to a key you have not presented" in w.value for w in app.warning)
        assert f"The journey of {made[other]}" not in [s.value for s in app.subheader]
