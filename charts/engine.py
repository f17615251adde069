"""The engine as it runs: batch size per step over time, and who is in the batch or waiting.

Input is ``lifecycle.engine.EngineState`` (or its parts): ``batch_timeline`` draws one bar per
recent model step (how many requests it carried, split into decoding and prefilling work);
``running_rows`` and ``waiting_rows`` are plain rows for ``st.dataframe``. ``mine`` is the tag of the
viewer's own request, so their row says "yours" and nobody else's prompt or call id is shown.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from charts.theme import OKABE_ITO, TEMPLATE, axis_title
from lifecycle.engine import RunningRequest, StepRecord, WaitingRequest

TIMELINE_SECONDS = 60.0


def batch_timeline(steps: Sequence[StepRecord], now: float, seconds: float = TIMELINE_SECONDS) -> go.Figure:
    """Bars at each step's end (seconds before ``now``): the step's batch size."""
    shown = [s for s in steps if s.time >= now - seconds]
    ago = [round(s.time - now, 3) for s in shown]
    figure = go.Figure(
        go.Bar(
            x=ago,
            y=[s.batch_size for s in shown],
            marker_color=[OKABE_ITO[1] if s.prefill_tokens else OKABE_ITO[0] for s in shown],
            customdata=[(s.prefill_tokens, s.decode_tokens, round(s.seconds * 1000)) for s in shown],
            hovertemplate="%{y} requests; %{customdata[0]} prompt tokens read, %{customdata[1]} decoded; "
                          "%{customdata[2]} ms<extra></extra>",
            name="batch size",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        title="Batch size per model step",
        xaxis=dict(title=axis_title("time", "s, 0 = now"), range=[-seconds, 0]),
        yaxis=dict(title=axis_title("requests in the step"), rangemode="tozero", dtick=None),
        bargap=0.1,
        showlegend=False,
        height=320,
    )
    return figure


def running_rows(running: Sequence[RunningRequest], mine: str | None = None) -> list[dict]:
    """One row per request in the running batch (orange in the chart while it still reads its prompt)."""
    return [
        {
            "request": r.id,
            "from": _who(r.label, r.tag, mine),
            "phase": "reading the prompt (prefill)" if r.phase == "prefill" else "generating (decode)",
            "prompt tokens": r.prompt_tokens,
            "from prefix cache": r.cached_tokens,
            "generated": r.generated,
            "waited (s)": None if r.waited_seconds is None else round(r.waited_seconds, 2),
        }
        for r in running
    ]


def waiting_rows(waiting: Sequence[WaitingRequest], mine: str | None = None) -> list[dict]:
    """One row per request waiting for a place in the batch, first in line first."""
    return [{"place in line": w.position, "request": w.id, "from": _who(w.label, w.tag, mine)} for w in waiting]


def _who(label: str, tag: str | None, mine: str | None) -> str:
    return f"{label} (yours)" if mine is not None and tag == mine else label
