"""The Request page: the request built from the settings, the response of the run, the growing
re-sent conversation, and a real exchange with an OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lifecycle.stages.context_window import render_messages
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.request import chat_request
from lifecycle.api.responses_request import as_responses_request
from lifecycle.api.snippets import python_call
from tests.pages.harness import component_data, markdowns, texts

RESENT_CHART = "resent_chart_open"  # views/request.py's expander key

PROMPT = "Name a colour."
SECRET = "sk-test-secret-key-0123456789"


def _codes(app) -> list[str]:
    """Every code block's text, the JSON body's (drawn by ui.live_code, not st.code) first."""
    return [component_data(app, "request_body")["text"], *(code.value for code in app.code)]


def _chart(app, key: str) -> dict:
    return json.loads(next(el for el in app.get("plotly_chart") if el.proto.id.endswith(key) or key in el.proto.id).proto.spec)


def _everything_shown(app) -> str:
    """Every value the page shows in its main area: texts, code, markdown, metrics and tables."""
    parts = [el.value for kind in ("text", "code", "markdown", "caption", "error", "warning") for el in getattr(app, kind)]
    parts.append(component_data(app, "request_body")["text"])
    parts += [str(metric.value) for metric in app.metric]
    parts += [frame.value.to_csv() for frame in app.dataframe]
    return "\n".join(parts)


def _table(app, column: str):
    """The table shown with this column (display tables carry no key under AppTest)."""
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


def test_request_json_is_built_from_the_settings_and_the_response_matches_the_run(run_page):
    app = run_page("request", prompt=PROMPT, max_tokens=4, temperature=0.0, seed=3, system_prompt="Be brief.")
    assert not app.exception and not app.error
    request = chat_request(PROMPT, system="Be brief.", sampling=SamplingSettings(temperature=0.0, seed=3), max_tokens=4,
                           stream=True, include_usage=True)
    expected = request.to_payload()
    codes = _codes(app)
    assert json.dumps(expected, ensure_ascii=False, indent=2) in codes
    raw_http = next(code for code in codes if code.startswith("POST /v1/chat/completions HTTP/1.1"))
    assert "Authorization: Bearer <your API key>" in raw_http
    assert any(code.startswith("curl -N ") for code in codes)
    assert any("from openai import OpenAI" in code for code in codes)
    assert any('import OpenAI from "openai"' in code for code in codes)

    metrics = {metric.label: metric.value for metric in app.metric}
    prompt_tokens = len(render_messages(expected["messages"]).ids)
    assert metrics["prompt_tokens"] == f"{prompt_tokens:,}"
    assert metrics["completion_tokens"] == "4" and metrics["finish_reason"] == "length"
    response = json.loads(next(code for code in codes if '"object": "chat.completion"' in code))
    assert response["id"].startswith("chatcmpl-") and response["usage"]["prompt_tokens"] == prompt_tokens
    lesson = markdowns(app)[1]
    assert f"{len(json.dumps(expected, ensure_ascii=False, separators=(',', ':')).encode()):,} bytes" in lesson

    # The same call as a Responses request, side by side, with what differs on the wire.
    responses = as_responses_request(request)
    calls = [code for code in codes if code.startswith("stream = client.")]
    assert calls == [python_call(request).rstrip("\n"), python_call(responses).rstrip("\n")]
    assert python_call(responses).startswith("stream = client.responses.create(")
    differences = next(table.value for table in app.table if "Responses" in table.value.columns)  # a static table
    assert differences.loc["body size", "chat completions"] == f"{len(request.wire_body()):,} bytes"
    assert differences.loc["body size", "Responses"] == f"{len(responses.wire_body()):,} bytes"
    assert differences.loc["system prompt", "Responses"] == "instructions"
    assert differences.loc["no equivalent", "chat completions"] == "seed, stream_options"


def test_each_turn_resends_the_whole_conversation(run_page):
    app = run_page("request", prompt=PROMPT, max_tokens=4, temperature=0.0)
    assert not app.exception
    table = _table(app, "tokens sent again")
    assert list(table["turn"]) == [1, 2, 3]  # this run plus the two default follow-ups
    assert list(table["messages sent"]) == [1, 3, 5]
    totals = list(table["prompt tokens"])
    assert totals[0] == len(render_messages([{"role": "user", "content": PROMPT}]).ids)
    assert totals[0] < totals[1] < totals[2]
    last_messages = json.loads(next(code.value for code in app.code if code.value.startswith("[")))
    assert len(last_messages) == 5 and last_messages[0]["content"] == PROMPT
    assert totals[2] == len(render_messages(last_messages).ids)
    assert list(table["tokens sent again"]) == [t - n for t, n in zip(totals, table["new message tokens"])]

    # The chart is built only once its expander is opened (a Plotly chart on the page costs a new tab ~1 s).
    assert not app.get("plotly_chart")
    app.session_state[RESENT_CHART] = True  # the expander opened, as a click does (it reruns the page)
    app.run()
    chart = _chart(app, "resent_chart")
    resent, new, body = chart["data"]
    assert resent["y"] == list(table["tokens sent again"]) and new["y"] == list(table["new message tokens"])
    assert body["y"] == list(table["JSON body (bytes)"])


class _FakeServer(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible server that streams three content frames, usage and [DONE]."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeServer.seen.append({"authorization": self.headers.get("Authorization"), "body": body, "path": self.path})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("x-request-id", "req_fake")
        self.end_headers()
        head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
        chunks = [{"role": "assistant", "content": ""}, {"content": "Blue"}, {"content": "."}]
        events = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in chunks]
        events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server(monkeypatch):
    """An OpenAI-like server on loopback, which this test's operator allows the page to reach."""
    monkeypatch.setenv("LIFECYCLE_OUTBOUND_ALLOW", "127.0.0.1/32")
    _FakeServer.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _send(app, base_url: str, key: str):
    app.text_input(key="remote_base_url").input(base_url)
    app.text_input(key="remote_model").input("some-model")
    app.text_input(key="remote_api_key").input(key)
    return app.button(key="remote_send").click().run()


def test_send_to_a_server_shows_the_real_exchange_and_never_the_key(run_page, fake_server):
    app = _send(run_page("request", prompt=PROMPT, max_tokens=4), fake_server, SECRET)
    assert not app.exception and not app.error
    assert _FakeServer.seen[0]["authorization"] == f"Bearer {SECRET}"
    assert _FakeServer.seen[0]["path"] == "/v1/chat/completions"
    sent = _FakeServer.seen[0]["body"]
    assert sent["model"] == "some-model" and sent["messages"][-1]["content"] == PROMPT
    metrics = {metric.label: metric.value for metric in app.metric}
    assert metrics["HTTP status"] == "200" and metrics["SSE frames"] == "5"
    frames = _table(app, "frame as received")
    assert list(frames["frame as received"])[-1] == "data: [DONE]"
    assert '"content": "Blue"' in list(frames["frame as received"])[1]
    assert list(frames["kind"]) == ["role", "content", "content", "finish", "done"]
    assert list(frames["content"]) == ["", "Blue", ".", "", ""]
    assert "Blue." in texts(app)
    received = next(code for code in _codes(app) if code.startswith("HTTP/1.1 200 OK"))
    assert "x-request-id: req_fake" in received
    assert SECRET not in _everything_shown(app)
    assert all(SECRET not in str(value) for value in dict(app.query_params).values())
    assert "Authorization: Bearer ***" in "\n".join(_codes(app))


def test_a_server_that_is_not_there_gives_a_message(run_page, monkeypatch):
    monkeypatch.setenv("LIFECYCLE_OUTBOUND_ALLOW", "127.0.0.1/32")
    app = _send(run_page("request", prompt=PROMPT, max_tokens=4), "http://127.0.0.1:9/v1", "")
    assert not app.exception
    shown = [e.value.replace("\\", "").replace("\u200b", "") for e in app.error]  # as the reader sees it
    assert any("No HTTP answer from http://127.0.0.1:9/v1/chat/completions" in text for text in shown)


@pytest.mark.parametrize("base_url, reason", [
    ("http://127.0.0.1:9/v1", r"127\.0\.0\.1 is a loopback address"),
    ("http://169.254.169.254/latest", r"169\.254\.169\.254 is a link\-local address"),
])
def test_private_and_metadata_addresses_are_refused_in_one_line(run_page, fake_server, monkeypatch, base_url, reason):
    monkeypatch.delenv("LIFECYCLE_OUTBOUND_ALLOW")  # the default of a server not bound to localhost
    app = _send(run_page("request", prompt=PROMPT, max_tokens=4), base_url, SECRET)
    assert not app.exception
    refusal = next(e.value for e in app.error if "Refused" in e.value)
    assert reason in refusal and "\n" not in refusal
    assert _FakeServer.seen == [] and not [m for m in app.metric if m.label == "HTTP status"]


def test_a_malformed_base_url_is_refused_with_a_message(run_page):
    app = _send(run_page("request", prompt=PROMPT, max_tokens=4), "ftp://example.com", "")
    assert not app.exception
    assert any("base URL" in e.value for e in app.error)
