"""Live calls chart and table builders, on frames streamed by the real model and real call-log rows."""

from __future__ import annotations

import json
import time

import pytest

from charts.live_calls import (
    call_rows,
    frame_rows,
    frame_timeline,
    gateway_rows,
    live_rows,
    logged_budget,
    streamed_text,
)
from lifecycle.stages import streaming
from lifecycle.stages.context_window import context_budget, render_messages
from lifecycle.api.calllog import CallLog, CallRecord
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.api.serving import LiveCall
from lifecycle.stages.streaming import frame_kind

MESSAGES = [{"role": "user", "content": "Say hi."}]
MAX_TOKENS = 4


@pytest.fixture(scope="module")
def streamed(loaded):
    """Frames exactly as the API writes them into a call's journey: {at, sse} per SSE event."""
    prompt = render_messages(MESSAGES)
    events = list(streaming.stream_completion(
        loaded, prompt.ids, SamplingSettings(temperature=0.0), MAX_TOKENS, loaded.name, "chatcmpl-test", True,
        started=time.perf_counter(),
    ))
    frames = [{"at": round(event.at, 6), "sse": event.sse} for event in events]
    return prompt, frames


def test_frames_are_classified_and_tabled_in_order(streamed):
    _, frames = streamed
    rows = frame_rows(frames)
    kinds = [row["kind"] for row in rows]
    assert kinds[0] == "role" and kinds[-1] == "done" and kinds[-2] == "usage" and kinds[-3] == "finish"
    content = [row for row in rows if row["kind"] == "content"]
    assert 1 <= len(content) <= MAX_TOKENS
    assert [row["at (ms)"] for row in rows] == [round(f["at"] * 1000, 1) for f in frames]
    assert rows[0]["gap (ms)"] is None
    assert rows[1]["gap (ms)"] == round((frames[1]["at"] - frames[0]["at"]) * 1000, 1)
    assert [row["sent"] + "\n\n" for row in rows] == [f["sse"] for f in frames]
    finish = next(row for row in rows if row["kind"] == "finish")
    assert finish["finish_reason"] == streaming.assemble(streaming.parse_sse("".join(f["sse"] for f in frames)))[1]


def test_streamed_text_is_what_the_client_reassembles(streamed):
    _, frames = streamed
    text, _, usage = streaming.assemble(streaming.parse_sse("".join(f["sse"] for f in frames)))
    assert streamed_text(frames) == text and text
    assert usage["completion_tokens"] == sum(row["kind"] == "content" for row in frame_rows(frames))


def test_frame_kinds_of_odd_frames():
    assert frame_kind("data: [DONE]\n\n") == "done"
    assert frame_kind('data: {"error": {"message": "boom"}}\n\n') == "error"
    assert frame_kind(": keep-alive\n\n") == "other"


def test_timeline_puts_each_frame_at_its_arrival_time(streamed):
    _, frames = streamed
    ttft = next(f["at"] for f in frames if frame_kind(f["sse"]) == "content")
    figure = frame_timeline(frames, ttft)
    points = sorted((y, x) for trace in figure.data for x, y in zip(trace.x, trace.y))
    assert points == [(n, f["at"]) for n, f in enumerate(frames, start=1)]
    assert {trace.name for trace in figure.data} == {row["kind"] for row in frame_rows(frames)}
    assert figure.layout.shapes[0].x0 == ttft
    assert "(s)" in figure.layout.xaxis.title.text and figure.layout.yaxis.title.text


def test_logged_budget_round_trips_the_api_journey_entry(streamed, loaded):
    from dataclasses import asdict

    prompt, _ = streamed
    budget = context_budget(prompt, loaded.context_window, MAX_TOKENS)
    saved = json.loads(json.dumps({**asdict(budget), "max_tokens_defaulted": False}))
    assert logged_budget(saved) == budget
    assert logged_budget(None) is None


def test_call_rows_read_the_log_and_never_a_key(tmp_path):
    secret = "sk-never-shown-0123456789"
    with CallLog(tmp_path / "calls.sqlite3", redact=[secret]) as log:
        log.record(CallRecord(
            "req_a", created=1_700_000_000.0, key_name="alice", model="m", status=200, outcome="ok",
            finish_reason="stop", prompt_tokens=33, completion_tokens=5, ttft=0.1234,
            journey={"timings": {"tokens_per_second": 12.345}, "request": {"body": secret}},
        ))
        log.record(CallRecord("req_b", created=1_700_000_001.0, status=401, outcome="unauthorized"))
        rows = call_rows(log.recent())
    assert [row["id"] for row in rows] == ["req_b", "req_a"]
    first = rows[1]
    assert (first["key name"], first["status"], first["prompt tokens"], first["completion tokens"]) == ("alice", 200, 33, 5)
    assert first["TTFT (ms)"] == 123.4 and first["tokens/s"] == 12.35
    assert rows[0]["TTFT (ms)"] is None and rows[0]["tokens/s"] is None
    assert secret not in json.dumps(rows)


def test_live_and_gateway_rows():
    call = LiveCall("req_x", "bob", "m", True, 40, 16, received_at=time.time() - 2, completion_tokens=3)
    row = live_rows([call])[0]
    assert (row["place"], row["id"], row["state"], row["generated"]) == (1, "req_x", "queued", "3 of 16")
    assert row["waited (s)"] >= 2
    steps = [{"step": "auth", "outcome": "refused", "detail": "Incorrect API key provided.", "status": 401, "at": 0.00025}]
    assert gateway_rows(steps) == [
        {"step": "auth", "outcome": "refused", "status": 401, "at (ms)": 0.25, "detail": "Incorrect API key provided."}
    ]


def test_content_deltas_are_written_as_every_page_writes_a_token():
    chunk = lambda delta: "data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}) + "\n\n"  # noqa: E731
    frames = [{"at": 0.1, "sse": chunk({"role": "assistant", "content": ""})},
              {"at": 0.2, "sse": chunk({"content": " sky\n"})}, {"at": 0.3, "sse": "data: [DONE]\n\n"}]
    rows = frame_rows(frames)
    assert [row["content"] for row in rows] == ["", "␣sky↵", ""]
    assert rows[1]["sent"] + "\n\n" == frames[1]["sse"]  # the frame itself stays exactly as sent
    assert streamed_text(frames) == " sky\n"
