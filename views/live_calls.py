"""Live calls: this app's own OpenAI-compatible API, call by call.

Shows the model's state and the calls queued or running now (refreshing itself), the recent calls
from any client (the SQLite call log), and one call's whole journey: the raw request as received,
the gateway's decisions, its tokens and context budget, the SSE frames with their timestamps,
TTFT and tokens/s, the response and usage. Everything a client or the model wrote is shown as text.
The key box and the live panel come first; the panel's controls, the engine's timeline, the snippets, the tables and
the call's journey come in the run after it is drawn (ui.when_idle), so a new tab does not wait for their code
(plotly.js, the data grid, the syntax highlighter, the toggle and the button).
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from urllib.parse import urlsplit

import pandas as pd
import streamlit as st

from charts.context_window import budget_chart
from charts.live_calls import (
    call_rows,
    frame_rows,
    frame_timeline,
    gateway_rows,
    live_rows,
    logged_budget,
    streamed_text,
    tokens_per_second,
)
from lifecycle.api.access import CallReader, call_reader
from lifecycle.api.calllog import CallLog, CallRecord
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.keys import KEYS_ENV
from lifecycle.api.routes import default_server
from lifecycle.lessons.live_calls import live_calls_lesson
from lifecycle.lessons.words import counted
from lifecycle.model import is_loaded, shared_model
from lifecycle.api.serving import live_calls, model_status
from lifecycle.stages.vocabulary import show_token, token_bytes
from ui.audience import Audience, paced_interval, repace
from ui.deployment import local_only
from ui.engine_state import engine_section
from ui.frame import lesson, presenting, show_text, stage_page
from ui.settings import JourneySettings
from ui.text import literal, ms
from ui.when_idle import details_ready, idle_told

RECENT = 200  # calls listed in the table
TOKENS_SHOWN = 64  # prompt tokens decoded one by one
PART_CHARS = 200  # of each prompt part's text in the budget table; a longer one ends in "…"
BODY_CHARS = 20_000  # of a raw request body
WATCH_SECONDS = 2.0  # how often an idle page looks for new calls
LIVE_SECONDS = 1.0  # how often it refreshes while a call is in flight
CALL_PANELS = Audience(runs_per_second=5.0)  # both slower when many watch (ui.audience): a run takes ~8 ms
KEY_STATE = "live_calls_key"  # session state only: the key this visitor presented
WATCH_STATE = "watch_calls"  # the toggle: the panel looks for new calls by itself
DETAILS = "live_calls_details"  # ui.when_idle: the panel's controls and everything under it come once it is drawn


def _reader(server: ApiServer) -> CallReader:
    """Who this visitor is: the key they presented on this page (kept in their session only)."""
    return call_reader(st.session_state.get(KEY_STATE) or None, server.config, local_only())


def _key_box(reader: CallReader) -> None:
    with st.expander("Your calls: present your API key", expanded=not reader.sees_any, icon=":material/key:"):
        st.text_input("API key", type="password", key=KEY_STATE, autocomplete="off",
                      help="Only the calls made with this key are listed. It stays in this browser session's "
                           "memory and is never logged or stored.")
    shown = "every call" if reader.sees_all else ("only your calls" if reader.sees_any else "no calls")
    st.caption(f"You see {shown}: {literal(reader.reason)}.")


def _watch_controls() -> None:
    """Whether the panel looks for new calls by itself (read from the session as the page starts), and a refresh."""
    toggle_column, button_column = st.columns([3, 1], vertical_alignment="center")
    toggle_column.toggle(
        "Watch for new calls", True, key=WATCH_STATE,
        help=f"Look for new calls every {WATCH_SECONDS:g} s; refresh every {LIVE_SECONDS:g} s while one is in "
             "flight (less often when many people watch this page).",
    )
    button_column.button("Refresh", icon=":material/refresh:")


def _visible(reader: CallReader, calls: list) -> list:
    return calls if reader.sees_all else [call for call in calls if reader.may_read(call)]


def _signature(log: CallLog, reader: CallReader) -> tuple:
    """What the page shows that can change behind its back: calls in flight and the newest logged call."""
    newest = log.recent(1, key_name=reader.only_key) if reader.sees_any else []
    return tuple(call.id for call in _visible(reader, live_calls())), newest[0].id if newest else None


def _live_panel(log: CallLog, reader: CallReader, refused: Counter, fastest: float | None,
                interval: float | None) -> None:
    """Model state and calls in flight; reruns the whole page once something finished or arrived."""
    if interval is not None:
        repace(CALL_PANELS, fastest, interval)
    if st.session_state.get("live_calls_seen") != _signature(log, reader):
        st.rerun(scope="app")
    status = model_status()
    everyone = live_calls()
    calls = _visible(reader, everyone)
    running = sum(call.state == "running" for call in everyone)
    left, middle, right, far = st.columns(4)
    left.metric("Model", status.state, help=literal(status.name))
    middle.metric("Running", running)
    right.metric("Waiting in the queue", len(everyone) - running)
    far.metric("Refused, no key", sum(refused.values()),
               help="Calls without a valid key are counted, never logged.")
    if is_loaded() and shared_model().warning:
        st.warning(literal(shared_model().warning))
    if status.state == "unhealthy":
        st.warning(literal(status.error))
    elif status.error and reader.sees_all:
        st.warning(literal(f"The model could not load: {status.error}"))
    if calls:
        st.dataframe(live_rows(calls), hide_index=True)
    else:
        st.caption("None of your calls is queued or running right now." if everyone else
                   "No call is queued or running right now.")


def _how_to_call(settings: JourneySettings, development_key: bool) -> None:
    page = urlsplit(st.context.url or "")
    base = f"{page.scheme}://{page.netloc}/v1" if page.netloc else "http://localhost:8501/v1"
    body = {
        "model": model_status().name, "messages": settings.messages(), "temperature": settings.sampling.temperature,
        "max_tokens": settings.max_tokens, "stream": True, "stream_options": {"include_usage": True},
    }
    st.markdown("Send the sidebar's prompt to this app's API; the call appears in the table below.")
    st.code(
        f"curl -N {base}/chat/completions \\\n"
        '  -H "Authorization: Bearer $LIFECYCLE_API_KEY" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d {shlex.quote(json.dumps(body, ensure_ascii=False))}",
        language="bash", wrap_lines=True,
    )
    st.code(
        "import os\nfrom openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{base}", api_key=os.environ["LIFECYCLE_API_KEY"])\n'
        f"stream = client.chat.completions.create(\n"
        f"    model={body['model']!r},\n"
        f"    messages={settings.messages()!r},\n"
        f"    temperature={settings.sampling.temperature!r}, max_tokens={settings.max_tokens},\n"
        '    stream=True, stream_options={"include_usage": True},\n)\n'
        "for chunk in stream:\n"
        "    if chunk.choices:\n"
        '        print(chunk.choices[0].delta.content or "", end="", flush=True)\n'
        "    if chunk.usage:\n"
        "        print(\"\\n\", chunk.usage)",
        language="python", wrap_lines=True,
    )
    where = (
        "This server was started without keys, so it made a **development key** for this run: it is printed in "
        "the terminal where `streamlit run app.py` started (it is never shown here)."
        if development_key else
        "This server's keys come from its configuration; ask whoever runs it for one."
    )
    st.markdown(
        f"**The key.** Keys are set with the `{KEYS_ENV}` environment variable or the same name in Streamlit "
        f"secrets, as comma-separated `name:key` entries; the call log keeps only the key's name. {where} "
        "Put it in `LIFECYCLE_API_KEY` for the snippets above."
    )


def _recent_table(records: list[CallRecord]) -> None:
    ids = [record.id for record in records]

    def open_selected() -> None:
        rows = st.session_state["recent_calls"].selection.rows
        if rows:
            st.session_state["call"] = ids[rows[0]]

    st.dataframe(call_rows(records), hide_index=True, key="recent_calls", on_select=open_selected,
                 selection_mode="single-row")
    newest = "The newest call" if len(records) == 1 else f"The newest {len(records)} calls"
    st.caption(f"{newest} you may see. Click a row, or pick its id below, to open it.")


def _usage_per_key(records: list[CallRecord]) -> None:
    """The usage the server reported, summed per key name as a bill would (calls without usage count 0)."""
    with st.expander("Usage per key, as the bill would sum it", icon=":material/receipt_long:"):
        frame = pd.DataFrame({
            "key name": [r.key_name for r in records],
            "calls": [1] * len(records),
            "prompt tokens": [r.prompt_tokens or 0 for r in records],
            "completion tokens": [r.completion_tokens or 0 for r in records],
        })
        totals = frame.groupby("key name", as_index=False).sum()
        totals["total tokens"] = totals["prompt tokens"] + totals["completion tokens"]
        st.dataframe(totals, hide_index=True, key="usage_per_key")
        st.caption(f"Over the {counted(len(records), 'call')} listed above. Keep each call's x-request-id and usage: "
                   "they are what an invoice is reconciled against.")


def _pick_call(log: CallLog, records: list[CallRecord], reader: CallReader) -> CallRecord | None:
    by_id = {record.id: record for record in records}
    linked = st.query_params.get("call")
    if linked and linked not in by_id and (older := log.get(linked)) is not None:
        if reader.may_read(older):
            by_id[linked] = older
        else:
            st.warning("The call in this link belongs to a key you have not presented: present the key it was "
                       "made with to open it.", icon=":material/lock:")
    if not by_id:
        return None
    # Options are the bare ids: a bound widget matches the URL's ?call= against the shown labels.
    chosen = st.selectbox("Open a call", list(by_id), key="call", bind="query-params",
                          help="The id is the response's x-request-id header; ?call=<id> in the URL opens it.")
    return by_id.get(chosen)


def _request_text(request: dict) -> str:
    headers = "\n".join(f"{name}: {value}" for name, value in (request.get("headers") or {}).items())
    body = request.get("body", "")
    if len(body) > BODY_CHARS:
        body = f"{body[:BODY_CHARS]}\n… ({request.get('body_bytes', len(body)):,} bytes in all; the rest is not shown)"
    return f"{request.get('method', '')} {request.get('path', '')}\n{headers}\n\n{body}".strip()


def _summary(record: CallRecord, journey: dict) -> None:
    timings = journey.get("timings") or {}
    rate = tokens_per_second(record)
    cells = (
        ("Status", f"{record.status} {record.outcome}"), ("finish_reason", record.finish_reason or "–"),
        ("Prompt tokens", record.prompt_tokens if record.prompt_tokens is not None else "–"),
        ("Completion tokens", record.completion_tokens if record.completion_tokens is not None else "–"),
        ("Queue wait", ms(timings.get("queue_seconds", journey.get("queue_seconds")))),
        ("TTFT", ms(record.ttft)), ("Tokens/s", "–" if rate is None else f"{rate:,.1f}"),
        ("Total time", ms(record.duration)),
    )
    for row in (cells[:4], cells[4:]):
        for column, (label, value) in zip(st.columns(len(row)), row):
            column.metric(label, value)
    st.caption(f"Key name: {literal(record.key_name or 'none')} · model: {literal(record.model or '–')}")
    if record.error:
        st.warning(literal(f"Refused or failed: {record.error}"))


def _tokens(journey: dict) -> None:
    tokens, budget = journey.get("tokens"), logged_budget(journey.get("context"))
    if not tokens:
        st.caption("This call never reached the tokenizer (it was refused earlier).")
        return
    ids, special = tokens.get("ids", []), set(tokens.get("special_positions", []))
    st.markdown(
        f"The chat template turned the messages into **{tokens['prompt_tokens']:,} tokens**"
        + (f"; with {budget.output_reserve:,} reserved for the answer, {budget.free:,} of the "
           f"{budget.window:,}-token window stayed free." if budget else ".")
    )
    if budget:
        st.plotly_chart(budget_chart([("this call", budget)]), key="call_budget", theme=None)
        parts = [{"part": s.name, "tokens": s.tokens,
                  "text": s.text if len(s.text) <= PART_CHARS else f"{s.text[:PART_CHARS]}…"} for s in budget.segments]
        parts += [{"part": "output reserve (max_tokens)", "tokens": budget.output_reserve, "text": ""},
                  {"part": "free", "tokens": budget.free, "text": ""}]
        st.dataframe(parts, hide_index=True)
    shown = ids[:TOKENS_SHOWN]
    if shown and is_loaded():
        loaded = shared_model()
        vocabulary = token_bytes(loaded)
        pieces = [show_token(vocabulary.of(token_id)) for token_id in shown]
        st.dataframe(
            [{"position": i, "id": token_id, "text": piece, "special": i in special}
             for i, (token_id, piece) in enumerate(zip(shown, pieces))],
            hide_index=True, height=280,
        )
        if len(ids) > len(shown):
            st.caption(f"The first {len(shown)} of {tokens['prompt_tokens']:,} tokens.")


def _frames(record: CallRecord, journey: dict) -> None:
    frames = journey.get("frames") or []
    if not frames:
        st.caption("Not streamed: the answer went back as one JSON body (below).")
        return
    rows = frame_rows(frames)
    timings = journey.get("timings") or {}
    gaps = timings.get("inter_token") or []
    mean_gap = f"{sum(gaps) / len(gaps) * 1000:,.0f} ms apart on average" if gaps else "no gaps to measure"
    st.markdown(
        f"**{len(frames)} frames** left the server: the first content arrived after **{ms(record.ttft)}** "
        f"(time to first token), then the tokens came {mean_gap}."
    )
    st.plotly_chart(frame_timeline(frames, record.ttft), key="frame_timeline", theme=None)
    st.dataframe(rows, hide_index=True, column_config={"sent": st.column_config.TextColumn(width="large")})


def _response(journey: dict) -> None:
    response, frames, usage = journey.get("response"), journey.get("frames") or [], journey.get("usage")
    if frames:
        st.caption("The text the client put together from the content deltas")
        show_text(streamed_text(frames), limit=4000)
    if response:
        st.caption(f"Response body (HTTP {response.get('status')})")
        st.code(json.dumps(response.get("body"), indent=2, ensure_ascii=False), language="json", wrap_lines=True)
    if usage:
        st.caption("Usage")
        st.code(json.dumps(usage, indent=2), language="json")


def _journey(record: CallRecord) -> None:
    journey = record.journey if isinstance(record.journey, dict) else {}
    st.subheader(f"The journey of {record.id}", anchor=False)
    _summary(record, journey)
    st.markdown("#### 1 · The request as received")
    st.code(_request_text(journey.get("request") or {}), language=None, wrap_lines=True)
    st.markdown("#### 2 · The gateway's decisions")
    st.dataframe(gateway_rows(journey.get("gateway") or []), hide_index=True)
    st.markdown("#### 3 · Tokens and context budget")
    _tokens(journey)
    st.markdown("#### 4 · SSE frames")
    _frames(record, journey)
    st.markdown("#### 5 · Response and usage")
    _response(journey)


def render() -> None:
    with stage_page("live-calls", needs_prompt=False) as settings:
        server = default_server()
        log = server.gateway.log
        reader = _reader(server)
        records = log.recent(RECENT, key_name=reader.only_key) if reader.sees_any else []
        answered = sum(record.outcome == "ok" for record in records)
        lesson(live_calls_lesson(len(records), answered, reader.sees_all))
        if not presenting():
            _key_box(reader)
        st.session_state["live_calls_seen"] = _signature(log, reader)
        watch = st.session_state.get(WATCH_STATE, True)
        fastest = LIVE_SECONDS if live_calls() else (WATCH_SECONDS if watch else None)
        interval = None if fastest is None else paced_interval(CALL_PANELS, fastest)[0]
        st.fragment(_live_panel, run_every=interval)(log, reader, server.gateway.refused, fastest, interval)
        if idle_told(DETAILS):  # the panel's controls come with the details, under it
            _watch_controls()
        if presenting():  # on a projector the model and its queue come first, the key box after them
            _key_box(reader)
        if not details_ready(DETAILS):
            return
        engine_section(settings)
        with st.expander("How to call it", expanded=not records, icon=":material/terminal:"):
            _how_to_call(settings, server.config.development_key)
        st.subheader("Recent calls", anchor=False)
        if records:
            _recent_table(records)
            _usage_per_key(records)
        else:
            st.info("No call to show yet. Present your key above, then send a call with the snippets; it appears here.")
        selected = _pick_call(log, records, reader)
        if selected is not None:
            _journey(selected)
