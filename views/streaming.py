"""Streaming page: the server-sent events of a streamed answer, with their timing, live and recorded.

The recorded stream is replayed in the browser on its own clock (ui/live_replay), with no script run.

"Stream it live" runs a fresh generation with ``lifecycle.stages.streaming.stream_completion`` and writes
each SSE frame into the page as it is produced; beside it a non-streaming client's panel stays
empty until the whole answer exists. Both panels are fed by the same generation. Last, a guardrail
(lifecycle.features.guardrail) streams the same request with the visitor's block list.
"""

import time

import pandas as pd
import streamlit as st

from charts.live_replay import stream_replay_data
from charts.streaming import event_timeline, inter_token_latency
from lifecycle.errors import LifecycleError
from lifecycle.features.guardrail import FINISH_REASON, Guardrail, check_seconds, parse_guardrail
from lifecycle.lessons.streaming import gaps_sentence, stream_gaps, streaming_lesson
from lifecycle.stages.completion import build_response, new_completion_id
from lifecycle.stages.streaming import StreamEvent, assemble, delta_content, frame_kind, stream_completion, stream_metrics
from lifecycle.model import LoadedModel
from lifecycle.results import shared_results
from lifecycle.stages.vocabulary import show_token
from ui.cache import answered_prompt, per_prompt_cache
from ui.frame import lesson, loaded_model, show_text, stage_page
from ui.live_replay import live_replay
from ui.settings import JourneySettings
from ui.tables import fitted_table
from ui.text import ms
from ui.when_idle import details_ready

DETAILS = "streaming_details"  # ui.when_idle: the tabs under the replay come in the run after it is drawn
LIVE = "streaming_live"  # session state: the last live run (settings, events, wait) so a rerun still shows it
TABLE_EVENTS = 200
WIRE_EVENTS = 60
LIVE_TAIL = 8  # frames kept visible in the live panel while streaming
DEFAULT_BLOCK = "Delhi"  # in the default prompt's answer: an example the visitor edits


def event_kind(event: StreamEvent) -> str:
    return frame_kind(event.sse)


def _delta(event: StreamEvent) -> str:
    choices = (event.data or {}).get("choices") or []
    return (choices[0].get("delta") or {}).get("content", "") if choices else ""


def _frames_table(events: list[StreamEvent]) -> pd.DataFrame:
    shown = events[:TABLE_EVENTS]
    return pd.DataFrame({
        "#": range(1, len(shown) + 1),
        "At (ms)": [round(e.at * 1000, 1) for e in shown],
        "Since previous (ms)": [round((e.at - (shown[i - 1].at if i else 0.0)) * 1000, 1) for i, e in enumerate(shown)],
        "Kind": [event_kind(e) for e in shown],
        "Content delta": [show_token(_delta(e)) if event_kind(e) == "content" else "" for e in shown],
        "Bytes on the wire": [len(e.sse.encode()) for e in shown],
    })


def _wire(events: list[StreamEvent], limit: int = WIRE_EVENTS) -> str:
    text = "".join(e.sse for e in events[:limit])
    if len(events) > limit:
        text += f"… ({len(events) - limit} more events not shown)\n"
    return text


def _stamped(events: list[StreamEvent]) -> str:
    """Frames one per line, each after the time it was produced (ms since the request)."""
    return "\n".join(f"[{e.at * 1000:9.1f} ms] {e.sse.strip()}" for e in events[:TABLE_EVENTS])


def _lesson(prepared, answer) -> None:
    events = answer.stream
    contents = sum(event_kind(e) == "content" for e in events)
    setup, waiting, prefill = (span.seconds for span in answer.call[:3])
    lesson(streaming_lesson(len(events), contents, prepared.input.include_usage, answer.stream_metrics,
                            len(prepared.rendered.ids), setup, waiting, prefill))


def _metrics(metrics) -> None:
    columns = st.columns(4)
    columns[0].metric("Time to first token", ms(metrics.ttft))
    gaps = metrics.inter_token
    columns[1].metric("Mean gap (ITL)", ms(sum(gaps) / len(gaps)) if gaps else "n/a",
                      help="Mean inter-token latency: the mean time between two tokens of this stream.")
    columns[2].metric("Tokens per second", f"{metrics.tokens_per_second:,.1f}")
    columns[3].metric("Whole stream", ms(metrics.total_seconds))


def _usage(prepared, answer) -> None:
    st.subheader("The usage chunk", anchor=False)
    usage = [e.data for e in answer.stream if event_kind(e) == "usage"]
    if prepared.input.include_usage:
        st.markdown(
            '`stream_options: {"include_usage": true}` is on (sidebar: *Stream usage chunk*): the last chunk before '
            "`[DONE]` has empty `choices` and the token counts, and every earlier chunk says `\"usage\": null`."
        )
        if usage:
            st.json(usage[-1])
    else:
        st.info(
            "include_usage is off (sidebar: *Stream usage chunk*): this stream has **no usage chunk**, "
            "the finish chunk is followed directly by `[DONE]`, and a streaming client cannot learn how many tokens "
            "it was billed for without counting them itself. Turn it on to see the extra chunk.",
            icon=":material/info:",
        )


def _run_live(prepared, settings, loaded) -> dict:
    """Stream a fresh generation into the page frame by frame; return what the session keeps of it."""
    area = st.empty()
    with area.container():
        left, right = st.columns(2, border=True)
        with left:
            st.markdown("**Streaming client** (`stream: true`)")
            text_box, frames_box = st.empty(), st.empty()
        with right:
            st.markdown("**Non-streaming client** (`stream: false`)")
            waiting = st.empty()
    started = time.perf_counter()
    events = []
    stream = stream_completion(
        loaded, prepared.rendered.ids, settings.sampling, settings.max_tokens, loaded.name, new_completion_id(),
        settings.include_usage, started=started,
    )
    for event in stream:
        events.append(event)
        with text_box.container():
            st.text("".join(_delta(e) for e in events) or "…")
        frames_box.code(_stamped(events[-LIVE_TAIL:]), language=None, wrap_lines=True)
        waiting.info(f"Waiting for the whole answer: nothing to show yet ({time.perf_counter() - started:,.1f} s so far).",
                     icon=":material/hourglass_top:")
    live = {"settings": settings, "events": events, "wait": time.perf_counter() - started}
    with area.container():
        _show_live(live, loaded.name)
    return live


def _show_live(live: dict, model_name: str) -> None:
    events = live["events"]
    chunks = [e.data for e in events if e.data is not None]
    text, finish_reason, usage = assemble(chunks)
    metrics = stream_metrics(events)
    left, right = st.columns(2, border=True)
    with left:
        st.markdown("**Streaming client** (`stream: true`)")
        show_text(text, limit=4000)
        st.caption(f"{len(events)} frames; first text after {ms(metrics.ttft)}, "
                   f"{metrics.tokens_per_second:,.1f} tokens/s.")
        st.code(_stamped(events), language=None, height=320, wrap_lines=True)
    with right:
        st.markdown("**Non-streaming client** (`stream: false`)")
        show_text(text, limit=4000)
        st.caption(f"Nothing at all for {ms(live['wait'])}, then the whole answer in one body.")
        st.json(build_response(
            completion_id=chunks[0]["id"], model=model_name, text=text, finish_reason=finish_reason or "cancelled",
            prompt_tokens=(usage or {}).get("prompt_tokens", 0) or 0,
            completion_tokens=(usage or {}).get("completion_tokens", 0) or 0, created=chunks[0]["created"],
        ), expanded=False)
        if usage is None:
            st.caption("Without include_usage the stream carried no token counts, so usage here shows 0.")


@per_prompt_cache
def _guarded_stream(settings, guardrail: Guardrail, _prepared, _loaded) -> list[StreamEvent]:
    prepared, loaded = _prepared, _loaded
    return list(stream_completion(loaded, prepared.rendered.ids, settings.sampling, settings.max_tokens, loaded.name,
                                  new_completion_id(), settings.include_usage, guardrail=guardrail))


def prepare(settings: JourneySettings, loaded: LoadedModel) -> None:
    """What this page computes for ``settings`` beyond the journey (the stream again with the default guardrail),
    into the shared cache."""
    prepared = shared_results(loaded).prepared(settings.journey_input())
    _guarded_stream(settings, parse_guardrail({"block": [DEFAULT_BLOCK]}), prepared, loaded)


def _guardrail(prepared, settings, answer, loaded) -> None:
    st.subheader("A guardrail outside the model", anchor=False)
    lines = st.text_area("Blocked phrases, one a line (any case)", DEFAULT_BLOCK, key="guardrail_block", height=80)
    try:
        guardrail = parse_guardrail({"block": [line for line in lines.splitlines() if line.strip()]})
    except LifecycleError as error:
        st.error(str(error), icon=":material/error:")
        return
    with st.spinner("Streaming it again with the check…", show_time=True):
        frames = _guarded_stream(settings, guardrail, prepared, loaded)
    finish = next((c["finish_reason"] for e in frames for c in (e.data or {}).get("choices") or [] if c["finish_reason"]),
                  None)
    sent = "".join(_delta(e) for e in frames)
    full = answer.generation.text
    if finish == FINISH_REASON:
        st.markdown(f"The same request, streamed again with the check: it ended after **{len(sent):,} of the "
                    f"{len(full):,} characters** of the free answer with finish_reason **{FINISH_REASON}**. The "
                    "blocked phrase and everything after it were never sent.")
    else:
        st.markdown(f"The same request, streamed again with the check: no blocked phrase appeared, so all "
                    f"**{len(sent):,} characters** went out and finish_reason is **{finish}**.")
    pieces = [step.delta for step in answer.generation.steps]
    cost = check_seconds(guardrail, pieces)
    gaps = sorted(answer.stream_metrics.inter_token)
    step = f", against {ms(gaps[len(gaps) // 2])} for a decode step" if gaps else ""
    st.caption("The check runs after detokenization, before a frame is written: text that could still grow into "
               "a blocked phrase is held back a token or two, like a stop sequence. It cost "
               f"{cost * 1e6:,.1f} µs per token here (run over this answer's {len(pieces)} tokens){step}. On the API "
               'a request opts in with "guardrail": {"block": [...]}.')
    show_text(sent or "(nothing was sent)")
    with st.expander("The guarded stream on the wire"):
        st.code(_wire(frames), language=None, wrap_lines=True)


def _details(prepared, answer, settings, loaded) -> None:
    """The tabs under the replay: every event timed, the raw wire, a live run and a guardrail."""
    events = answer.stream
    recorded, wire, watch, guarded = st.tabs(["Every event", "On the wire", "Watch it stream live", "A guardrail"])
    with recorded:
        st.plotly_chart(event_timeline([e.at for e in events], [event_kind(e) for e in events]), key="timeline",
                        theme=None)
        fitted_table(_frames_table(events), ["#", "At (ms)", "Kind", "Content delta"], key="stream_events",
                     full_from=530, hide_index=True,
                     narrow_widths={"#": 40, "At (ms)": 75, "Kind": 85, "Content delta": 140})
        if len(events) > TABLE_EVENTS:
            st.caption(f"The first {TABLE_EVENTS} of {len(events)} events are listed.")
        st.plotly_chart(inter_token_latency(answer.stream_metrics.inter_token), key="gaps", theme=None)
        content_at = [e.at for e in events if delta_content(e.data)]
        st.caption(gaps_sentence(stream_gaps(content_at, answer.generation.steps)))
    with wire:
        st.markdown("The raw response body, exactly as the client reads it: one `data:` line per event, a blank line "
                    "after each.")
        st.code(_wire(events), language=None, wrap_lines=True, height=480)
        _usage(prepared, answer)
    with watch:
        st.markdown(
            "Runs the same request again on the model and writes every SSE frame the moment it is produced. "
            "Beside it, a client that asked for `stream: false` sees nothing until the last token is done. "
            "Both panels are fed by this one generation."
        )
        live = st.session_state.get(LIVE)
        if st.button("Stream it live", icon=":material/play_arrow:", type="primary"):
            st.session_state[LIVE] = _run_live(prepared, settings, loaded)
        elif live is not None and live["settings"] == settings:
            st.caption("Your last live run:")
            _show_live(live, loaded.name)
    with guarded:
        _guardrail(prepared, settings, answer, loaded)


def render() -> None:
    with stage_page("streaming") as settings:
        prepared, answer = answered_prompt(settings)
        live_replay(stream_replay_data(answer.stream), key="stream_replay")  # the picture first, its lesson under it
        _lesson(prepared, answer)
        metrics_box = st.container()  # the metrics come with the details: their code would hold back the replay
        st.caption("The replay above is this run's recorded stream in your browser: press play to see each frame "
                   "arrive after the gap it really had, or step through the events (dots: the events on the "
                   "request's clock).")
        if details_ready(DETAILS):
            with metrics_box:
                _metrics(answer.stream_metrics)
            _details(prepared, answer, settings, loaded_model())
