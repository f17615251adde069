"""The HTTP API over real sockets: raw HTTP for bad input, streaming, disconnects, the queue and the log.

The server is the real Starlette app from ``api_routes`` under uvicorn on a free loopback port,
driving the real model; the call log is a temporary SQLite file.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from lifecycle.api import serving
from lifecycle.api import endpoints
from lifecycle.api.config import ApiConfig, api_config
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.routes import api_routes
from lifecycle.stages.context_window import render_messages
from lifecycle.api.serving import ModelStatus, live_calls, model_queue
from lifecycle.engine import shared_engine
from lifecycle.stages.streaming import parse_sse, stream_problems
from tests.held_engine import engine_held

KEY = "sk-test-" + "a1b2c3d4e5f6" * 2
HELLO = [{"role": "user", "content": "Say hello."}]


RUNNING: dict[str, uvicorn.Server] = {}  # serve()'s uvicorn servers by base URL, while they run


@contextmanager
def serve(server: ApiServer) -> Iterator[str]:
    """Run ``Starlette(routes=api_routes(server=server))`` with uvicorn on a free port; yield its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(Starlette(routes=api_routes(server=server)), log_level="warning", lifespan="off")
    runner = uvicorn.Server(config)
    RUNNING[f"http://127.0.0.1:{port}"] = runner
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not runner.started:
        time.sleep(0.02)
    # The routes start loading the shared model in the background; a module run on its own must
    # not meet "The model is loading" (503) on its first call.
    deadline = time.monotonic() + 300
    while serving.model_status().state == "loading" and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        runner.should_exit = True
        thread.join(10)
        sock.close()
        RUNNING.pop(f"http://127.0.0.1:{port}", None)


def make_server(tmp_path: Path, **limits) -> ApiServer:
    return ApiServer(ApiConfig(keys={"tester": KEY}, call_log=tmp_path / "calls.sqlite3", **limits))


@pytest.fixture(scope="module")
def api_server(loaded, tmp_path_factory) -> ApiServer:
    return make_server(tmp_path_factory.mktemp("api"))


@pytest.fixture(scope="module")
def base_url(api_server) -> Iterator[str]:
    with serve(api_server) as url:
        yield url


@pytest.fixture
def http(base_url) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as client:
        yield client


def test_every_connection_the_server_accepts_has_nagle_off(base_url, http):
    """serve() binds its socket as Streamlit does (protocol number 0, so asyncio leaves Nagle's algorithm on):
    the routes turn TCP_NODELAY on for each accepted connection, or every answer after the first on a kept-alive
    connection waits ~40 ms for the client's delayed ACK (lifecycle/api/nodelay.py; `make bench` times it)."""
    for _ in range(2):
        assert http.get("/health").status_code == 200
    connections = RUNNING[base_url].server_state.connections
    accepted = [connection.transport.get_extra_info("socket") for connection in connections]
    assert accepted
    assert all(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for sock in accepted)


def chat(http: httpx.Client, **fields) -> httpx.Response:
    body = {"model": serving.model_status().name, "messages": HELLO, "max_tokens": 4, "temperature": 0} | fields
    return http.post("/v1/chat/completions", json=body)


def assert_error(response: httpx.Response, status: int, param: str | None = None, code: str | None = None) -> dict:
    """An OpenAI error envelope with this status (and param/code when given), carrying x-request-id."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-request-id"].startswith("req_")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"] and "Traceback" not in error["message"]
    if param is not None:
        assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error
    return error


def logged(server: ApiServer, response: httpx.Response):
    row = server.gateway.log.get(response.headers["x-request-id"])
    assert row is not None, "every call lands in the call log under its x-request-id"
    return row


# --- health, models, routing ------------------------------------------------------------------


def test_health_is_200_with_the_model_ready(http, loaded):
    _ = loaded.model  # the pages' hooked model, which the app's loader builds after the API is served
    response = http.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ready" and response.json()["model"] == loaded.name
    assert response.json()["pages"] == "ready"
    assert response.headers["x-request-id"]


def test_health_counts_the_engines_work_in_hand(http, loaded):
    """A page job holding the engine and one waiting behind it are both in /health's engine field, and gone once
    they have run."""
    engine = shared_engine(loaded)
    with engine_held(engine):
        behind = threading.Thread(target=engine.run, args=(lambda model: None,))
        behind.start()
        deadline = time.monotonic() + 30
        while engine.load()["jobs"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        shown = http.get("/health").json()["engine"]
        assert set(shown) == {"running", "waiting", "jobs"} and shown["jobs"] == 2
        assert engine.state().jobs == 2  # what the engine panel's sentence counts
    behind.join(30)
    assert http.get("/health").json()["engine"]["jobs"] == 0


def test_health_and_completions_are_503_while_the_model_loads(http, monkeypatch, loaded):
    monkeypatch.setattr(endpoints, "model_status", lambda: ModelStatus("loading", loaded.name))
    health = http.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "loading"
    assert int(health.headers["retry-after"]) >= 1
    assert_error(chat(http), 503, code="model_not_ready")


def test_models_lists_the_loaded_model_and_needs_a_key(http, base_url, loaded):
    listed = http.get("/v1/models").json()
    assert [m["id"] for m in listed["data"]] == [loaded.name]
    assert_error(httpx.get(f"{base_url}/v1/models"), 401, code="invalid_api_key")


def test_a_model_is_retrieved_by_its_id_and_an_unknown_id_is_404(http, base_url, loaded):
    listed = http.get("/v1/models").json()["data"][0]
    retrieved = http.get(f"/v1/models/{loaded.name}")
    assert retrieved.status_code == 200 and retrieved.json() == listed
    assert retrieved.headers["x-request-id"].startswith("req_")
    assert_error(http.get("/v1/models/gpt-9"), 404, param="model", code="model_not_found")
    assert_error(http.get("/v1/models/HuggingFaceTB/not-this-one"), 404, param="model", code="model_not_found")
    assert_error(httpx.get(f"{base_url}/v1/models/{loaded.name}"), 401, code="invalid_api_key")
    assert_error(http.delete(f"/v1/models/{loaded.name}"), 405, code="method_not_allowed")


def test_unknown_path_and_wrong_method_use_the_envelope(http):
    assert_error(http.get("/v1/nowhere"), 404)
    assert_error(http.get("/v1/chat/completions"), 405, code="method_not_allowed")
    assert_error(http.put("/v1/models"), 405)


def test_unknown_model_is_404_model_not_found(http, api_server):
    response = chat(http, model="gpt-9")
    assert_error(response, 404, param="model", code="model_not_found")
    assert logged(api_server, response).status == 404


# --- keys -------------------------------------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", f"Basic {KEY}", "Bearer"])
def test_missing_or_wrong_key_is_401_counted_not_logged(base_url, api_server, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    before = api_server.gateway.refused["unauthorized"]
    response = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "x", "messages": HELLO}, headers=headers)
    assert_error(response, 401, code="invalid_api_key")
    assert api_server.gateway.log.get(response.headers["x-request-id"]) is None
    assert api_server.gateway.refused["unauthorized"] == before + 1
    stored = b"".join(p.read_bytes() for p in api_server.gateway.log.path.parent.glob("calls.sqlite3*"))
    assert KEY.encode() not in stored and b"wrong-key" not in stored


def test_development_key_is_generated_when_none_is_configured():
    config = api_config({}, environ={})
    assert config.development_key and list(config.keys) == ["dev"] and len(config.keys["dev"]) >= 32
    named = api_config({"LIFECYCLE_API_KEYS": {"alice": "secret-a"}}, environ={})
    assert named.keys == {"alice": "secret-a"} and not named.development_key
    from_env = api_config(None, environ={"LIFECYCLE_API_KEYS": "bob:secret-b,secret-c"})
    assert from_env.keys == {"bob": "secret-b", "key2": "secret-c"}


# --- malformed bodies ---------------------------------------------------------------------------


def test_malformed_json_is_400_and_logged(http, api_server):
    response = http.post("/v1/chat/completions", content=b'{"model": "x", "messages": [', headers={"Content-Type": "application/json"})
    assert_error(response, 400, code="invalid_json")
    row = logged(api_server, response)
    assert row.outcome == "invalid_request" and row.journey["request"]["body"] == '{"model": "x", "messages": ['


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_400(http, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    body = json.dumps({"model": "x", "messages": HELLO}).encode()
    response = http.post("/v1/chat/completions", content=body, headers=headers)
    assert response.request.headers.get("content-type") == content_type
    assert_error(response, 400, code="invalid_content_type")


def test_deeply_nested_json_is_400_not_500(http):
    body = b"[" * 200_000 + b"]" * 200_000
    response = http.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert_error(response, 400)


@pytest.mark.parametrize(
    "messages, param",
    [
        (None, "messages"),
        ("x", "messages"),
        ([], "messages"),
        ([123], "messages[0]"),
        ([{}], "messages[0].role"),
        ([{"content": "hi"}], "messages[0].role"),
        ([{"role": 123, "content": "hi"}], "messages[0].role"),
        ([{"role": "wizard", "content": "hi"}], "messages[0].role"),
        ([{"role": "user", "content": 123}], "messages[0].content"),
        ([{"role": "user"}], "messages[0].content"),
        ([{"role": "user", "content": "   "}], "messages[0].content"),
    ],
)
def test_bad_messages_are_400_naming_the_param(http, messages, param):
    assert_error(chat(http, messages=messages), 400, param=param)


def test_a_body_that_is_not_an_object_is_400(http):
    for body in (b"null", b'"x"', b"[1, 2]", b"42"):
        response = http.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
        assert_error(response, 400)


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"presence_penalty": 3}, "presence_penalty"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"n": 9}, "n"),
        ({"max_token": 5}, "max_token"),
        ({"logit_bias": {"The": -100}}, "logit_bias"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"stream": False, "stream_options": {"include_usage": True}}, "stream_options"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ],
)
def test_out_of_range_parameters_are_400_naming_the_param(http, fields, param):
    assert_error(chat(http, **fields), 400, param=param)


def test_nan_temperature_is_400(http, loaded):
    body = f'{{"model": "{loaded.name}", "messages": [{{"role": "user", "content": "hi"}}], "temperature": NaN}}'
    response = http.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert_error(response, 400, param="temperature")


def test_oversized_body_is_413_declared_or_streamed(http, api_server):
    big = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * (1024 * 1024) + b'"}]}'
    response = http.post("/v1/chat/completions", content=big, headers={"Content-Type": "application/json"})
    assert_error(response, 413, code="request_too_large")
    assert logged(api_server, response).status == 413

    def chunks():  # no Content-Length: the limit is enforced while reading
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    chunked = http.post("/v1/chat/completions", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in chunked.request.headers
    assert_error(chunked, 413, code="request_too_large")


def test_prompt_over_the_context_window_is_400_before_any_sse_byte(http, loaded, api_server):
    messages = [{"role": "user", "content": "hello " * 9000}]
    prompt_tokens = len(render_messages(messages).ids)
    assert prompt_tokens > loaded.context_window
    response = chat(http, messages=messages, stream=True, stream_options={"include_usage": True})
    error = assert_error(response, 400, code="context_length_exceeded")
    assert f"{prompt_tokens} in the messages" in error["message"]
    assert "data:" not in response.text
    row = logged(api_server, response)
    assert row.journey["context"]["prompt_tokens"] == prompt_tokens and not row.journey["context"]["fits"]


def test_max_tokens_beyond_the_window_is_context_length_exceeded(http, loaded):
    prompt_tokens = len(render_messages(HELLO).ids)
    over = loaded.context_window - prompt_tokens + 1
    error = assert_error(chat(http, max_tokens=over), 400, code="context_length_exceeded")
    assert f"requested {loaded.context_window + 1} tokens" in error["message"]


def test_fifty_concurrent_refused_calls_give_fifty_rows(base_url, api_server):
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY}"}) as client:
        def call(_: int) -> str:
            return client.post("/v1/chat/completions", json={"messages": []}).headers["x-request-id"]

        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(call, range(50)))
    assert len(set(ids)) == 50
    assert all(api_server.gateway.log.get(i).status == 400 for i in ids)


# --- generation -------------------------------------------------------------------------------


def test_streamed_call_follows_openai_shape_and_its_journey_is_logged(http, api_server, loaded):
    response = chat(http, stream=True, stream_options={"include_usage": True}, max_tokens=6, user="learner")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-ratelimit-limit-requests"] and response.headers["x-request-id"]
    lines = [line for line in response.text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = parse_sse(response.text)
    assert stream_problems(chunks) == []
    usage = chunks[-1]["usage"]

    row = logged(api_server, response)
    assert (row.status, row.outcome, row.key_name, row.model) == (200, "ok", "tester", loaded.name)
    assert (row.prompt_tokens, row.completion_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    journey = row.journey
    assert journey["completion_id"] == chunks[0]["id"]
    assert json.loads(journey["request"]["body"])["user"] == "learner"
    assert journey["metadata"] == {"user": "learner"}
    assert journey["request"]["headers"]["authorization"] == "Bearer <redacted>"
    assert [s["step"] for s in journey["gateway"]] == ["auth", "routing", "rate limit", "queue"]
    assert journey["tokens"]["prompt_tokens"] == usage["prompt_tokens"] == len(render_messages(HELLO).ids)
    assert journey["context"]["window"] == loaded.context_window
    sent = [f["sse"] for f in journey["frames"]]
    assert "".join(sent) == response.text
    times = [f["at"] for f in journey["frames"]]
    assert times == sorted(times) and row.ttft == journey["timings"]["ttft"] > 0


def test_stream_without_include_usage_has_no_usage_but_the_log_does(http, api_server):
    response = chat(http, stream=True, max_tokens=3)
    chunks = parse_sse(response.text)
    assert all("usage" not in c for c in chunks) and stream_problems(chunks) == []
    row = logged(api_server, response)
    assert row.completion_tokens == 3 and row.finish_reason == "length"


def test_client_disconnect_mid_stream_stops_generation_and_is_logged_cancelled(base_url, api_server, loaded):
    body = {"model": loaded.name, "messages": [{"role": "user", "content": "Write a long story about a dragon."}],
            "max_tokens": 500, "temperature": 0, "stream": True}
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{base_url}/v1/chat/completions", json=body,
                           headers={"Authorization": f"Bearer {KEY}"}) as response:
            request_id = response.headers["x-request-id"]
            lines = response.iter_lines()
            received = 0
            while received < 3:
                received += next(lines).startswith("data: ")
            left_at = time.monotonic()
        # leaving the block closes the connection mid-stream
    row = None
    while row is None and time.monotonic() - left_at < 30:
        time.sleep(0.05)
        row = api_server.gateway.log.get(request_id)
    assert row is not None and row.outcome == "cancelled" and row.finish_reason == "cancelled"
    assert row.completion_tokens < 100, "generation went on after the client left"
    assert loaded.lock.acquire(timeout=5), "the model lock was released"
    loaded.lock.release()
    assert not live_calls()


def test_queue_full_is_503_and_waiting_calls_are_visible(http, api_server, loaded, monkeypatch):
    monkeypatch.setattr(model_queue(), "capacity", 1)
    results: dict[str, httpx.Response] = {}
    holder_done = threading.Event()

    def hold_model():  # a Streamlit page generating: the API call has to wait behind it
        with loaded.lock:
            holder_done.wait(60)

    holder = threading.Thread(target=hold_model)
    holder.start()
    first = threading.Thread(target=lambda: results.setdefault("first", chat(http, max_tokens=2)))
    first.start()
    try:
        deadline = time.monotonic() + 30
        while not any(c.state == "queued" for c in live_calls()) and time.monotonic() < deadline:
            time.sleep(0.02)
        waiting = live_calls()
        assert [c.state for c in waiting] == ["queued"] and waiting[0].key_name == "tester"
        second = chat(http, max_tokens=2)
        assert_error(second, 503, code="queue_full")
        assert int(second.headers["retry-after"]) >= 1
        assert logged(api_server, second).outcome == "error"
        health = http.get("/health").json()
        assert health["queue"]["waiting"] == 1
    finally:
        holder_done.set()
        holder.join()
        first.join(60)
    assert results["first"].status_code == 200
    assert not live_calls()


# --- inside Streamlit ---------------------------------------------------------------------------

ENTRY = '''import streamlit as st

from lifecycle.api.routes import api_routes

app = st.App("entry.py", routes=api_routes())

if __name__ == "__main__":
    st.write("pages still work")
'''


def test_streamlit_run_serves_the_api_next_to_the_pages(tmp_path, loaded):
    """`streamlit run` of an entry script with st.App(routes=api_routes()): one process serves the
    pages and the API; /health is 503 then 200; the generated development key is printed once."""
    (tmp_path / "entry.py").write_text(ENTRY)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "LIFECYCLE_CALL_LOG": str(tmp_path / "calls.sqlite3"),
           "LIFECYCLE_API_KEYS": "", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "streamlit", "run", "entry.py", "--server.port", str(port),
               "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        statuses = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and (not statuses or statuses[-1] != 200):
            time.sleep(0.3)
            try:
                statuses.append(httpx.get(f"{url}/health", timeout=5).status_code)
            except httpx.TransportError:
                continue
        assert statuses and statuses[-1] == 200 and set(statuses) <= {200, 503}
        printed = [line for line in output if "development key for this run" in line]
        assert len(printed) == 1, "".join(output)
        dev_key = printed[0].split()[-1]
        models = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {dev_key}"})
        assert models.status_code == 200 and models.json()["data"][0]["id"] == loaded.name
        refused = httpx.post(f"{url}/v1/chat/completions", json={}, headers={"Authorization": "Bearer nope"})
        assert_error(refused, 401, code="invalid_api_key")
        invalid = httpx.post(f"{url}/v1/chat/completions", json={}, headers={"Authorization": f"Bearer {dev_key}"})
        assert_error(invalid, 400)
        assert httpx.get(f"{url}/_stcore/health").status_code == 200
        assert "<html" in httpx.get(url).text.lower()
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    reader.join(5)
    assert sum("development key for this run" in line for line in output) == 1
    log = sqlite3.connect(tmp_path / "calls.sqlite3")
    rows = log.execute("SELECT id, status, journey FROM calls").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(invalid.headers["x-request-id"], 400)]  # the 401 is only counted
    assert dev_key not in rows[0][2]


def test_abandoned_calls_leave_the_queue_and_a_fresh_call_is_served(tmp_path, loaded):
    """Checklist 18: clients that give up after 0.5 s do not clog the model for the next one."""
    server = make_server(tmp_path)
    body = {"model": loaded.name, "messages": [{"role": "user", "content": "Write a long story about a dragon."}],
            "max_tokens": 200, "temperature": 0}

    def impatient(client: httpx.Client) -> int | str:
        try:
            return client.post("/v1/chat/completions", json=body).status_code
        except httpx.TimeoutException:
            return "gave up"

    with serve(server) as url:
        # One client, its own connection for each of the 20 at once (building a client costs an SSL context).
        with (httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=0.5) as client,
              ThreadPoolExecutor(max_workers=20) as pool):
            outcomes = list(pool.map(impatient, [client] * 20))
        assert outcomes.count("gave up") >= 1
        assert set(outcomes) <= {"gave up", 503}  # a full queue answers at once; the rest time out
        deadline = time.monotonic() + 60
        while live_calls() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not live_calls(), "abandoned calls are still queued or running"
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as client:
            fresh = client.post("/v1/chat/completions", json=body | {"max_tokens": 4})
    assert fresh.status_code == 200 and fresh.json()["usage"]["completion_tokens"] >= 1
    rows = server.gateway.log.recent(50)
    abandoned = [row for row in rows if row.id != fresh.headers["x-request-id"]]
    assert len(abandoned) == 20
    assert all((row.outcome, row.status) in {("cancelled", 499), ("error", 503), ("ok", 200)} for row in abandoned)
    assert sum(row.outcome == "cancelled" for row in abandoned) >= 1
