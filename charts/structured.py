"""Structured-output page chart: how many tokens of the vocabulary the grammar mask let through at
each step of one constrained generation, as browser-drawn columns (ui.live_bars) on a log axis."""

from __future__ import annotations

from collections.abc import Sequence

from charts.bars import BarChart, BarRow, BarView, Segment, Series, bars_data
from charts.theme import OKABE_ITO
from lifecycle.stages.vocabulary import show_token

AGREED, OVERRULED = OKABE_ITO[2], OKABE_ITO[1]  # green, orange (the page's caption names them)


def _count_label(allowed: int) -> str:
    """Bar labels short enough not to collide: none on forced steps (1), thousands as "48.8k"."""
    if allowed <= 1:
        return ""
    return f"{allowed / 1000:.1f}k" if allowed >= 10_000 else f"{allowed:,}"


def count_labels(allowed: Sequence[int]) -> list[str]:
    """``_count_label`` per bar, written only on the first bar of a run that reads the same: side by
    side, "48.8k" over "48.8k" ran into each other."""
    labels = [_count_label(a) for a in allowed]
    return [label if i == 0 or label != labels[i - 1] else "" for i, label in enumerate(labels)]


def mask_bars(tokens: Sequence[str], allowed: Sequence[int], overruled: Sequence[bool], vocabulary: int) -> dict:
    """One column per generated token: how many tokens the mask allowed there (log axis, the whole vocabulary
    as a dashed line), coloured by whether the model's own favourite was among them."""
    rows = [
        BarRow(f"{i}. {show_token(token)}", [Segment(count, text, series=int(lost))],
               title=f"step {i}, {show_token(token)}: {count:,} tokens allowed; "
                     + ("the mask overruled the model" if lost else "the model's favourite was allowed"))
        for i, (token, count, text, lost) in enumerate(zip(tokens, allowed, count_labels(allowed), overruled), start=1)
    ]
    return bars_data(BarChart(
        views=[BarView("allowed", "Tokens the mask allows (log)", rows, scale="log",
                       line=(vocabulary, f"the whole vocabulary: {vocabulary:,}"))],
        series=[Series("the model's favourite was allowed", AGREED), Series("the mask overruled the model", OVERRULED)],
        legend=True, orientation="columns", category="Generated token",
        label=f"Tokens the grammar allowed at each of {len(rows)} steps",
    ))
