"""The Handout page's lesson: the one file of this prompt's journey, counted, and what in it is not from the run."""

from __future__ import annotations

from collections.abc import Sequence

from lifecycle.features.handout import HandoutSection, not_from_run


def handout_lesson(sections: Sequence[HandoutSection], size_bytes: int) -> str:
    """The Handout page's lesson: what the file holds, counted, and which stages' numbers are not this run's."""
    charts = sum(len(s.figures) for s in sections)
    others = [s for s in sections if not s.from_run]
    numbers = ("each with its key numbers from this run" if not others else
               f"{len(sections) - len(others)} with their key numbers from this run and {len(others)} "
               f"({not_from_run(sections)}) with what the installed SDK and the Agents page do, which this run "
               "does not use")
    return (f"One file with this prompt's whole journey: **{len(sections)} stages**, {numbers}, and **{charts} "
            f"interactive charts** (zoom, hover). Plotly's JavaScript is inside the file ({size_bytes / 2**20:,.1f} "
            "MiB in all), so it opens in any browser with no network and nothing to install: hand it out at the end "
            "of a workshop, or keep it next to your notes.")
