"""Live calls page: real calls made with the official openai SDK against the real API in-process,
logged to the test session's call log (LIFECYCLE_CALL_LOG), then read back by the page."""

from __future__ import annotations

import json
import threading
import time

import openai
import plotly.graph_objects as go
import pytest

from lifecycle.api.endpoints import ApiServer
from lifecycle.api.serving import live_calls
from lifecycle.stages.streaming import delta_content, event_data, frame_kind
from lifecycle.stages.vocabulary import show_token, token_bytes
from tests.pages.harness import markdowns, page_api, sdk_client, texts, wait_for_api
from ui.text import ms

KEY = "sk-page-tests-" + "9f8e7d6c5b4a" * 2
KEY_NAME = "page-tests"
OTHER_KEY = "sk-other-page-tests-" + "0a1b2c3d4e5f" * 2
MESSAGES = [{"role": "user", "content": "Say hi."}]
MAX_TOKENS = 4


def _sdk(server: ApiServer, key: str = KEY) -> openai.OpenAI:
    return sdk_client(server, key)


@pytest.fixture(scope="module")
def server(loaded) -> ApiServer:
    """The real API, logging where the page reads (the test session's throwaway call log); the page's
    process-wide server is this one, as it is when app.py serves both."""
    wait_for_api()  # run alone, no earlier test has loaded the API's model
    with page_api({KEY_NAME: KEY, "other": OTHER_KEY}) as made:
        yield made


def open_page(run_page, key: str | None = KEY, **settings):
    """The Live calls page after presenting ``key`` on it (as a visitor types it)."""
    app = run_page("live-calls", **settings)
    if key is not None:
        app.text_input(key="live_calls_key").set_value(key).run()
    return app


@pytest.fixture(scope="module")
def calls(server, loaded) -> dict:
    """One streamed call (with usage), one plain call, one refused with a valid key and one without."""
    sdk = _sdk(server)
    raw = sdk.chat.completions.with_raw_response.create(
        model=loaded.name, messages=MESSAGES, temperature=0, max_tokens=MAX_TOKENS, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(raw.parse())
    streamed = {
        "id": raw.headers["x-request-id"],
        "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        "usage": chunks[-1].usage.model_dump(exclude_none=True),
    }
    raw = sdk.chat.completions.with_raw_response.create(
        model=loaded.name, messages=MESSAGES, temperature=0, max_tokens=MAX_TOKENS,
    )
    answer = raw.parse()
    plain = {"id": raw.headers["x-request-id"], "text": answer.choices[0].message.content,
             "usage": answer.usage.model_dump(exclude_none=True)}
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model=loaded.name, messages=MESSAGES, max_tokens=1, temperature=5)
    with pytest.raises(openai.AuthenticationError) as stranger:
        _sdk(server, key="sk-wrong").chat.completions.create(model=loaded.name, messages=MESSAGES, max_tokens=1)
    return {"streamed": streamed, "plain": plain, "refused": refused.value.response.headers["x-request-id"],
            "stranger": stranger.value.response.headers["x-request-id"]}


def _table(app, column: str):
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


def _metrics(app) -> dict[str, str]:
    return {metric.label: metric.value for metric in app.metric}


def _chart(app, key: str) -> dict:
    return json.loads(next(c for c in app.get("plotly_chart") if c.proto.id.endswith(key)).proto.spec)


def _page_text(app) -> str:
    parts = [*texts(app), *(c.value for c in app.code), *(m for m in markdowns(app)),
             *(c.value for c in app.caption), *(w.value for w in app.warning)]
    parts += [frame.value.to_csv() for frame in app.dataframe]
    return "\n".join(parts)


def test_recent_calls_table_has_each_call_with_the_numbers_the_client_got(run_page, calls, server):
    app = open_page(run_page)
    assert not app.exception and not app.error
    table = _table(app, "TTFT (ms)").set_index("id")
    for kind in ("streamed", "plain"):
        call = calls[kind]
        row = table.loc[call["id"]]
        logged = server.gateway.log.get(call["id"])
        assert (row["status"], row["outcome"], row["finish_reason"]) == (200, "ok", logged.finish_reason)
        assert row["key name"] == KEY_NAME
        assert (row["prompt tokens"], row["completion tokens"]) == (
            call["usage"]["prompt_tokens"], call["usage"]["completion_tokens"])
        assert row["TTFT (ms)"] == pytest.approx(logged.ttft * 1000, abs=0.1)
        assert row["tokens/s"] == pytest.approx(logged.journey["timings"]["tokens_per_second"], abs=0.01)
    refused = table.loc[calls["refused"]]
    assert (refused["status"], refused["outcome"]) == (400, "invalid_request")
    assert calls["stranger"] not in table.index and server.gateway.log.get(calls["stranger"]) is None
    assert int(_metrics(app)["Refused, no key"]) >= 1
    lesson = next(m for m in markdowns(app) if "The call log shows" in m)
    answered = int((_table(app, "TTFT (ms)")["outcome"] == "ok").sum())
    assert (f"The call log shows **{len(table)}** of your key's recent calls: **{answered}** answered, "
            f"**{len(table) - answered}** refused, cancelled or failed.") in lesson
    assert KEY not in _page_text(app) and "sk-wrong" not in _page_text(app)


def test_streamed_call_journey_shows_request_gateway_tokens_frames_and_usage(run_page, calls, server, loaded):
    call = calls["streamed"]
    logged = server.gateway.log.get(call["id"])
    journey = logged.journey
    app = open_page(run_page, call=call["id"])
    assert not app.exception and not app.error
    assert app.selectbox(key="call").value == call["id"]
    assert app.subheader[-1].value == f"The journey of {call['id']}"
    metrics = _metrics(app)
    assert metrics["Prompt tokens"] == str(call["usage"]["prompt_tokens"])
    assert metrics["Completion tokens"] == str(call["usage"]["completion_tokens"])
    assert metrics["Status"] == "200 ok"

    request = next(c.value for c in app.code if c.value.startswith("POST /v1/chat/completions"))
    assert journey["request"]["body"] in request and "authorization: Bearer <redacted>" in request
    assert json.loads(journey["request"]["body"])["stream_options"] == {"include_usage": True}

    steps = _table(app, "step")
    assert list(steps["step"]) == ["auth", "routing", "rate limit", "queue"]
    assert steps.iloc[0]["detail"] == f"Key '{KEY_NAME}' accepted."

    tokens = _table(app, "special")
    ids = journey["tokens"]["ids"]
    assert list(tokens["id"]) == ids[: len(tokens)] and len(tokens) == min(len(ids), 64)
    assert loaded.tokenizer.decode([ids[0]]) == tokens.iloc[0]["text"] == "<|im_start|>"
    assert list(tokens["text"]) == [show_token(token_bytes(loaded).of(i)) for i in ids[: len(tokens)]]
    assert "↵" in list(tokens["text"])  # the newline after the role marker
    budget = _chart(app, "call_budget")
    assert sum(sum(trace["x"]) for trace in budget["data"]) == loaded.context_window
    parts = _table(app, "part").set_index("part")
    assert parts["tokens"].sum() == loaded.context_window
    assert parts.loc["new message", "text"] == MESSAGES[0]["content"]
    assert parts.loc["output reserve (max_tokens)", "tokens"] == MAX_TOKENS

    prompt_tokens = call["usage"]["prompt_tokens"]
    free = loaded.context_window - prompt_tokens - MAX_TOKENS
    assert (f"The chat template turned the messages into **{prompt_tokens:,} tokens**; with {MAX_TOKENS:,} reserved "
            f"for the answer, {free:,} of the {loaded.context_window:,}-token window stayed free.") in _page_text(app)
    frames = _table(app, "sent")
    assert len(frames) == len(journey["frames"])
    assert (f"**{len(frames)} frames** left the server: the first content arrived after **{ms(logged.ttft)}**"
            in _page_text(app))
    contents = [delta_content(event_data(f["sse"])) for f in journey["frames"] if frame_kind(f["sse"]) == "content"]
    assert "".join(contents) == call["text"]
    assert [c for c in frames["content"] if c] == [show_token(c) for c in contents]
    assert list(frames["at (ms)"]) == [round(f["at"] * 1000, 1) for f in journey["frames"]]
    figure = go.Figure(_chart(app, "frame_timeline"))
    arrived = sorted(x for trace in figure.data for x in trace.x)
    assert arrived == sorted(f["at"] for f in journey["frames"])

    assert call["text"] in texts(app)
    usage = json.loads(next(c.value for c in app.code if '"total_tokens"' in c.value and "choices" not in c.value))
    assert usage == call["usage"]


def test_choosing_the_plain_call_shows_its_json_body(run_page, calls):
    app = open_page(run_page)
    app.selectbox(key="call").set_value(calls["plain"]["id"]).run()
    assert not app.exception
    assert app.subheader[-1].value == f"The journey of {calls['plain']['id']}"
    assert "Not streamed: the answer went back as one JSON body (below)." in [c.value for c in app.caption]
    body = json.loads(next(c.value for c in app.code if '"chat.completion"' in c.value))
    assert body["choices"][0]["message"]["content"] == calls["plain"]["text"]
    assert body["usage"] == calls["plain"]["usage"]


def test_refused_call_shows_the_refusal_as_text(run_page, calls):
    app = open_page(run_page, call=calls["refused"])
    assert not app.exception and not app.error
    steps = _table(app, "step")
    assert list(steps["step"]) == ["auth"] and steps.iloc[0]["outcome"] == "passed"
    warning = next(w.value for w in app.warning if "Refused or failed" in w.value)
    assert "temperature" in warning and r"Refused or failed\:" in warning  # escaped: shown literally


def test_another_keys_calls_are_neither_listed_nor_opened(run_page, calls):
    app = open_page(run_page, key=OTHER_KEY, call=calls["plain"]["id"])
    assert not app.exception
    assert not any(calls["plain"]["id"] in frame.value.to_csv() for frame in app.dataframe)
    assert any("belongs to a key you have not presented" in w.value for w in app.warning)
    assert not any(s.value.startswith("The journey of") for s in app.subheader)
    stranger = open_page(run_page, key=None)
    assert not any(calls["plain"]["id"] in frame.value.to_csv() for frame in stranger.dataframe)


def test_a_waiting_call_is_listed_live(run_page, server, loaded):
    """Hold the model (as a page run would): an API call then waits in the queue, and the page shows it."""
    results = {}
    with loaded.lock:
        worker = threading.Thread(target=lambda: results.update(answer=_sdk(server).chat.completions.create(
            model=loaded.name, messages=MESSAGES, temperature=0, max_tokens=1)))
        worker.start()
        deadline = time.monotonic() + 60
        while not live_calls() and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = live_calls()[0]
        app = open_page(run_page)
        assert not app.exception
        live = _table(app, "waited (s)")
        row = live.set_index("id").loc[waiting.id]
        assert (row["state"], row["key name"], row["prompt tokens"], row["generated"]) == (
            "queued", KEY_NAME, waiting.prompt_tokens, "0 of 1")
        assert _metrics(app)["Waiting in the queue"] == "1"
    worker.join(120)
    assert results["answer"].usage.completion_tokens == 1


def test_usage_is_summed_per_key_as_a_bill_would(run_page, calls):
    app = open_page(run_page)
    listed = _table(app, "TTFT (ms)")
    totals = _table(app, "total tokens").set_index("key name")
    mine = listed[listed["key name"] == KEY_NAME]
    assert totals.loc[KEY_NAME, "calls"] == len(mine)
    assert totals.loc[KEY_NAME, "prompt tokens"] == mine["prompt tokens"].fillna(0).sum()
    assert totals.loc[KEY_NAME, "completion tokens"] == mine["completion tokens"].fillna(0).sum()
    assert totals.loc[KEY_NAME, "total tokens"] == (totals.loc[KEY_NAME, "prompt tokens"]
                                                    + totals.loc[KEY_NAME, "completion tokens"])
    assert (calls["streamed"]["usage"]["prompt_tokens"] + calls["plain"]["usage"]["prompt_tokens"]
            <= totals.loc[KEY_NAME, "prompt tokens"])
