"""Context window budget bars (browser-drawn and Plotly): every part's tokens in order, the window line, overflow past it."""

from charts.context_window import FREE, OUTPUT_RESERVE, budget_bars, budget_chart, budget_parts
from lifecycle.stages.context_window import DEFAULT_SYSTEM, HISTORY, NEW_MESSAGE, TEMPLATE, TOOLS, ContextBudget, ContextSegment


def budget(window: int, reserve: int, **tokens: int) -> ContextBudget:
    names = {"template": TEMPLATE, "default": DEFAULT_SYSTEM, "tools": TOOLS, "history": HISTORY, "new": NEW_MESSAGE}
    segments = [ContextSegment(names[key], count, "") for key, count in tokens.items()]
    prompt = sum(tokens.values())
    used = prompt + reserve
    return ContextBudget(window, reserve, segments, prompt, max(0, window - used), max(0, used - window), used <= window)


def test_parts_follow_the_drawing_order_and_add_up_to_the_window():
    fits = budget(100, 10, template=12, default=20, new=8)
    parts = budget_parts(fits)
    assert list(parts) == [DEFAULT_SYSTEM, NEW_MESSAGE, TEMPLATE, OUTPUT_RESERVE, FREE]
    assert parts[FREE] == 50 and sum(parts.values()) == 100


def _by_series(chart: dict) -> dict[str, list[float]]:
    """Each series' tokens per row (0 where a row has none of it)."""
    names = [series["name"] for series in chart["series"]]
    rows = chart["views"][0]["rows"]
    return {name: [next((s["value"] for s in row["segments"] if s["series"] == index), 0) for row in rows]
            for index, name in enumerate(names)}


def test_the_bars_carry_each_rows_tokens_stacked():
    run = budget(256, 48, template=12, default=20, new=8)
    bigger = budget(256, 48, template=12, default=20, tools=90, history=120, new=8)
    chart = budget_bars([("this run", run), ("with tools", bigger)])
    by_name = _by_series(chart)
    assert by_name["template overhead"] == [12, 12]
    assert by_name[TOOLS] == [0, 90] and by_name[HISTORY] == [0, 120]
    assert by_name[OUTPUT_RESERVE] == [48, 48]
    assert by_name[FREE] == [168, 0]
    assert [row["label"] for row in chart["views"][0]["rows"]] == ["this run", "with tools"]
    assert chart["mode"] == "stack" and chart["legend"]
    assert chart["views"][0]["axis"] == "Context window (tokens)"
    assert chart["views"][0]["rows"][1]["segments"][1]["text"] == "90"


def test_overflow_runs_past_the_window_line():
    over = budget(256, 48, template=12, default=20, history=300, new=8)
    chart = budget_bars([("overflowing", over)])
    assert chart["views"][0]["line"] == {"at": 256.0, "label": "window 256"}
    total = sum(s["value"] for s in chart["views"][0]["rows"][0]["segments"])
    assert total == 388 > 256
    assert FREE not in _by_series(chart)


def test_the_plotly_chart_traces_carry_each_rows_tokens():
    run = budget(256, 48, template=12, default=20, new=8)
    bigger = budget(256, 48, template=12, default=20, tools=90, history=120, new=8)
    figure = budget_chart([("this run", run), ("with tools", bigger)])
    by_name = {trace.name: list(trace.x) for trace in figure.data}
    assert by_name["template overhead"] == [12, 12]
    assert by_name[TOOLS] == [0, 90] and by_name[HISTORY] == [0, 120]
    assert by_name[OUTPUT_RESERVE] == [48, 48]
    assert by_name[FREE] == [168, 0]
    assert list(figure.data[0].y) == ["this run", "with tools"]
    assert figure.layout.barmode == "stack"
    assert figure.layout.xaxis.title.text == "Context window (tokens)"


def test_the_plotly_chart_runs_past_the_window_line():
    over = budget(256, 48, template=12, default=20, history=300, new=8)
    figure = budget_chart([("overflowing", over)])
    line = figure.layout.shapes[0]
    assert line.x0 == line.x1 == 256
    total = sum(trace.x[0] for trace in figure.data)
    assert total == 388 > 256
    assert figure.layout.xaxis.range[1] >= total
    assert FREE not in {trace.name for trace in figure.data}
