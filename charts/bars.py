"""Bars for the browser-drawn picture (ui/live_bars.js), as plain data: rows of segments against a value axis.

A page's picture is drawn from this data without plotly.js. A chart has one or more views (the browser
switches between them), each a list of rows; a row is a label and its segments, stacked end to end or side by
side; each segment names its series (colour and legend entry). Rows are drawn as horizontal bars, or as
columns side by side (a generation's tokens, many of them, in one screen's height). A view's axis is linear
or logarithmic. Every text is plain: the browser sets it as text, never as markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

FORMATS = ("percent", "number")
MODES = ("stack", "group")
ORIENTATIONS = ("rows", "columns")
SCALES = ("linear", "log")


@dataclass(frozen=True)
class Series:
    """One kind of segment: its name in the legend and its colour."""

    name: str
    colour: str


@dataclass(frozen=True)
class Segment:
    """One bar (or one piece of a stacked bar): its value, the text printed on or after it, its hover text."""

    value: float
    text: str = ""
    series: int = 0
    title: str = ""


@dataclass(frozen=True)
class BarRow:
    """One row of the chart: its label on the left and its segments."""

    label: str
    segments: Sequence[Segment]
    title: str = ""


@dataclass(frozen=True)
class BarView:
    """One way to see the rows: the axis title, how ticks are written, the scale (a log axis needs positive
    values) and an optional dashed line (at, label)."""

    name: str
    axis: str
    rows: Sequence[BarRow]
    format: str = "number"
    line: tuple[float, str] | None = None
    scale: str = "linear"


@dataclass(frozen=True)
class BarChart:
    """What ui.live_bars draws: views (a toggle when several), series, stacked or side by side, as rows or
    columns (``category`` names the columns' axis)."""

    views: Sequence[BarView]
    series: Sequence[Series]
    mode: str = "group"
    legend: bool = False
    toggle: str = ""
    label: str = ""
    orientation: str = "rows"
    category: str = ""


def bars_data(chart: BarChart) -> dict:
    """The chart as the JSON-ready dict the component reads; refuses what it could not draw."""
    if not chart.views:
        raise ValueError("a bar chart needs at least one view")
    if chart.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {chart.mode!r}")
    if chart.orientation not in ORIENTATIONS:
        raise ValueError(f"orientation must be one of {ORIENTATIONS}, got {chart.orientation!r}")
    for view in chart.views:
        _check_view(view, len(chart.series))
    return {
        "views": [_view_data(view) for view in chart.views],
        "series": [{"name": s.name, "colour": s.colour} for s in chart.series],
        "mode": chart.mode,
        "legend": chart.legend,
        "toggle": chart.toggle,
        "label": chart.label,
        "orientation": chart.orientation,
        "category": chart.category,
    }


def _check_view(view: BarView, series: int) -> None:
    if view.format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {view.format!r}")
    if view.scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {view.scale!r}")
    for row in view.rows:
        for segment in row.segments:
            if not math.isfinite(segment.value):
                raise ValueError(f"row {row.label!r} has a value that is not finite: {segment.value}")
            if view.scale == "log" and segment.value <= 0:
                raise ValueError(f"row {row.label!r} has {segment.value}, which a log axis cannot show")
            if not 0 <= segment.series < series:
                raise ValueError(f"row {row.label!r} names series {segment.series}, of {series}")
    if view.line is not None and not (math.isfinite(view.line[0]) and (view.scale == "linear" or view.line[0] > 0)):
        raise ValueError(f"the line of view {view.name!r} is not at a value its axis can show")


def _view_data(view: BarView) -> dict:
    data = {
        "name": view.name,
        "axis": view.axis,
        "format": view.format,
        "scale": view.scale,
        "rows": [
            {"label": row.label, "title": row.title,
             "segments": [{"value": float(s.value), "text": s.text, "series": s.series, "title": s.title}
                          for s in row.segments]}
            for row in view.rows
        ],
    }
    if view.line is not None:
        data["line"] = {"at": float(view.line[0]), "label": view.line[1]}
    return data
