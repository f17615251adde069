"""Detokenization chart: how many bytes each generated token carried, and how many waited for the next, as
browser-drawn columns (ui.live_bars)."""

from __future__ import annotations

from collections.abc import Sequence

from charts.bars import BarChart, BarRow, BarView, Segment, Series, bars_data
from charts.theme import OKABE_ITO


def bytes_bars(labels: Sequence[str], token_bytes: Sequence[int], held_bytes: Sequence[int]) -> dict:
    """A pair of columns per token: the bytes it carried, and the bytes of an unfinished character held after it."""
    rows = [BarRow(label, [Segment(carried, title=f"{label}: {carried} bytes"),
                           Segment(held, series=1, title=f"{label}: {held} bytes held back")])
            for label, carried, held in zip(labels, token_bytes, held_bytes)]
    return bars_data(BarChart(
        views=[BarView("bytes", "Size (bytes)", rows)],
        series=[Series("bytes in the token", OKABE_ITO[0]), Series("bytes held back after it", OKABE_ITO[5])],
        legend=True, orientation="columns", category="Token (step: text)",
        label=f"Bytes of each of {len(rows)} tokens, and bytes held back after each",
    ))
