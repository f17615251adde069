"""Live calls view: the API's calls as tables and one call's SSE frames on a time axis.

Input is what the server keeps: ``lifecycle.api.serving.LiveCall`` for calls queued or running now,
and ``lifecycle.api.calllog.CallRecord`` rows (with their ``journey`` JSON) for finished ones. The
table builders return plain rows (lists of dicts) for ``st.dataframe``; ``frame_timeline`` draws
when each frame of a streamed answer left the server, against the time the request arrived.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from charts.theme import OKABE_ITO, TEMPLATE, axis_title
from lifecycle.stages.context_window import ContextBudget, ContextSegment
from lifecycle.api.calllog import CallRecord
from lifecycle.api.serving import LiveCall
from lifecycle.stages.streaming import delta_content, event_data, frame_kind
from lifecycle.stages.vocabulary import show_token

# What a frame carries, in the order a well-formed stream sends them; one colour (and marker) each.
FRAME_KINDS = ("role", "content", "finish", "usage", "done", "error", "other")
KIND_STYLES = {
    "role": (OKABE_ITO[4], "diamond"),
    "content": (OKABE_ITO[0], "circle"),
    "finish": (OKABE_ITO[1], "square"),
    "usage": (OKABE_ITO[2], "triangle-up"),
    "done": (OKABE_ITO[7], "x"),
    "error": (OKABE_ITO[5], "x"),
    "other": (OKABE_ITO[3], "circle-open"),
}


def frame_rows(frames: Sequence[Mapping]) -> list[dict]:
    """One row per frame: number, arrival (ms after the request arrived), gap to the previous
    frame (ms), kind, the delta's text (as every page writes a token), finish_reason, and the frame
    exactly as sent (raw SSE, deliberately not rewritten)."""
    rows, previous = [], None
    for number, frame in enumerate(frames, start=1):
        at, sse = float(frame["at"]), str(frame["sse"])
        data = event_data(sse)
        choices = (data or {}).get("choices") or [{}]
        finish = choices[0].get("finish_reason") if isinstance(choices[0], dict) else None
        rows.append({
            "frame": number,
            "at (ms)": round(at * 1000, 1),
            "gap (ms)": None if previous is None else round((at - previous) * 1000, 1),
            "kind": frame_kind(sse),
            "content": show_token(delta_content(data)) if frame_kind(sse) == "content" else "",
            "finish_reason": finish,
            "sent": sse.rstrip("\n"),
        })
        previous = at
    return rows


def streamed_text(frames: Sequence[Mapping]) -> str:
    """The answer's text as the client reassembles it from the content deltas."""
    return "".join(delta_content(event_data(str(frame["sse"]))) for frame in frames)


def frame_timeline(frames: Sequence[Mapping], ttft: float | None = None) -> go.Figure:
    """Each frame as a marker: x = seconds after the request arrived, y = frame number; one trace
    per kind (role, content, finish, usage, done…), and a dashed line at the time to first token."""
    figure = go.Figure()
    kinds = [frame_kind(str(frame["sse"])) for frame in frames]
    for kind in FRAME_KINDS:
        numbers = [n for n, k in enumerate(kinds, start=1) if k == kind]
        if not numbers:
            continue
        colour, symbol = KIND_STYLES[kind]
        figure.add_trace(go.Scatter(
            name=kind,
            x=[float(frames[n - 1]["at"]) for n in numbers],
            y=numbers,
            mode="markers",
            marker=dict(color=colour, symbol=symbol, size=13, line=dict(width=1, color=colour)),
            hovertemplate=f"frame %{{y}} ({kind}) at %{{x:.3f}} s<extra></extra>",
        ))
    last = max([float(frame["at"]) for frame in frames] + [ttft or 0.0, 1e-3])
    if ttft is not None:
        figure.add_vline(
            x=ttft, line=dict(color=OKABE_ITO[5], width=2, dash="dash"),
            annotation=dict(text=f"first token {ttft:.3f} s", font=dict(color=OKABE_ITO[5])),
            annotation_position="top left",
        )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title("Time after the request arrived", "s"), range=[-0.03 * last, 1.05 * last]),
        yaxis=dict(title=axis_title("SSE frame", "number"), rangemode="tozero"),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, title=None),
        height=420,
        margin=dict(t=90),
    )
    return figure


def _clock(epoch: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(epoch))


def tokens_per_second(record: CallRecord) -> float | None:
    """Decode speed the server measured for this call (None when it generated nothing)."""
    timings = (record.journey or {}).get("timings") if isinstance(record.journey, dict) else None
    value = (timings or {}).get("tokens_per_second")
    return None if value is None else float(value)


def call_rows(records: Sequence[CallRecord]) -> list[dict]:
    """The call log as table rows (newest first as given): no key, only its name."""
    return [
        {
            "time": _clock(record.created),
            "id": record.id,
            "key name": record.key_name,
            "model": record.model,
            "status": record.status,
            "outcome": record.outcome,
            "finish_reason": record.finish_reason,
            "prompt tokens": record.prompt_tokens,
            "completion tokens": record.completion_tokens,
            "TTFT (ms)": None if record.ttft is None else round(record.ttft * 1000, 1),
            "tokens/s": None if tokens_per_second(record) is None else round(tokens_per_second(record), 2),
        }
        for record in records
    ]


def live_rows(calls: Sequence[LiveCall]) -> list[dict]:
    """Calls queued or running now, in arrival order: place in line, waited seconds, tokens so far."""
    return [
        {
            "place": place,
            "id": call.id,
            "key name": call.key_name,
            "state": call.state,
            "waited (s)": round(call.waited_seconds, 2),
            "stream": call.stream,
            "prompt tokens": call.prompt_tokens,
            "generated": f"{call.completion_tokens} of {call.max_tokens}",
        }
        for place, call in enumerate(calls, start=1)
    ]


def gateway_rows(steps: Sequence[Mapping]) -> list[dict]:
    """The gateway's decisions in order, each with the moment it was taken (ms after arrival)."""
    return [
        {
            "step": step.get("step"),
            "outcome": step.get("outcome"),
            "status": step.get("status"),
            "at (ms)": None if step.get("at") is None else round(float(step["at"]) * 1000, 2),
            "detail": step.get("detail"),
        }
        for step in steps
    ]


def logged_budget(context: Mapping | None) -> ContextBudget | None:
    """The ContextBudget a journey's ``context`` entry was saved from (None when there is none)."""
    if not context:
        return None
    segments = [ContextSegment(s["name"], int(s["tokens"]), s.get("text", "")) for s in context["segments"]]
    return ContextBudget(
        window=int(context["window"]), output_reserve=int(context["output_reserve"]), segments=segments,
        prompt_tokens=int(context["prompt_tokens"]), free=int(context["free"]), overflow=int(context["overflow"]),
        fits=bool(context["fits"]),
    )
