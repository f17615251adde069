"""Sending the prompt to an OpenAI-compatible server and recording the raw exchange (our own API as the server)."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict

import pytest

from lifecycle.errors import LifecycleError
from lifecycle.api.outbound import REDACTED, OutboundPolicy, completions_url, send_chat_completion
from lifecycle.stages.streaming import parse_sse
from tests.test_api import KEY, make_server, serve

HELLO = [{"role": "user", "content": "Say hi."}]
LOCAL = OutboundPolicy.from_setting("127.0.0.0/8", local_only=False)  # the test server is on loopback


@pytest.fixture(scope="module")
def base_url(loaded, tmp_path_factory):
    with serve(make_server(tmp_path_factory.mktemp("remote"))) as url:
        yield url + "/v1"


def payload(loaded, **fields) -> dict:
    return {"model": loaded.name, "messages": HELLO, "max_tokens": 5, "temperature": 0} | fields


def test_non_streamed_exchange_is_recorded_raw(base_url, loaded):
    exchange = send_chat_completion(base_url, payload(loaded), api_key=KEY, policy=LOCAL)
    assert exchange.status == 200 and exchange.error is None and not exchange.streamed
    headers = dict(exchange.response_headers)
    assert headers["content-type"] == "application/json" and headers["x-request-id"].startswith("req_")
    body = json.loads(exchange.body)
    assert exchange.text == body["choices"][0]["message"]["content"] != ""
    assert exchange.request_headers["Authorization"] == REDACTED
    assert KEY not in json.dumps(asdict(exchange), default=str) and KEY not in repr(exchange)


def test_streamed_exchange_keeps_every_frame_with_its_time(base_url, loaded):
    exchange = send_chat_completion(
        base_url, payload(loaded, stream=True, stream_options={"include_usage": True}), api_key=KEY, policy=LOCAL
    )
    assert exchange.status == 200 and exchange.streamed
    assert exchange.frames[-1].raw == "data: [DONE]" and exchange.frames[-1].data is None
    times = [frame.at for frame in exchange.frames]
    assert times == sorted(times) and 0 < exchange.ttft <= times[-1] <= exchange.seconds
    raw = "\n\n".join(frame.raw for frame in exchange.frames) + "\n\n"
    chunks = parse_sse(raw)
    assert [frame.data for frame in exchange.frames[:-1]] == chunks
    assert exchange.text == "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert chunks[-1]["usage"]["completion_tokens"] <= 5
    non_streamed = send_chat_completion(base_url, payload(loaded), api_key=KEY, policy=LOCAL)
    assert exchange.text == non_streamed.text


def test_an_http_error_is_recorded_not_raised(base_url, loaded):
    exchange = send_chat_completion(base_url, payload(loaded), api_key="sk-wrong-key-123", policy=LOCAL)
    assert exchange.status == 401 and exchange.error is None
    assert json.loads(exchange.body)["error"]["code"] == "invalid_api_key"
    assert "sk-wrong-key-123" not in json.dumps(asdict(exchange), default=str)


def test_no_server_listening_is_a_recorded_network_error(loaded):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exchange = send_chat_completion(f"http://127.0.0.1:{port}/v1", payload(loaded), api_key=KEY, policy=LOCAL, deadline=5)
    assert exchange.status is None and exchange.error.startswith("ConnectError")


@pytest.mark.parametrize(
    "url", ["localhost:8501/v1", "ftp://example.com/v1", "http://user:pw@example.com/v1",
            "https://example.com/v1?key=abc", ""],
)
def test_bad_base_urls_are_refused_before_sending(url):
    with pytest.raises(LifecycleError) as caught:
        completions_url(url)
    assert caught.value.param == "base_url"


def test_completions_url_appends_the_path():
    assert completions_url(" https://api.openai.com/v1/ ") == "https://api.openai.com/v1/chat/completions"
