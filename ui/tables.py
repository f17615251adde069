"""Tables that fit the screen they are on: every column where there is room, a narrow view where not.

A table with more columns than fit would scroll sideways inside its box, and a projector (sidebar
open, 560 px of page) or a phone (360 px) hides its right-hand columns that way. ``fitted_table``
draws the table twice: the whole table, shown only where its box is at least ``full_from`` px
wide, and a narrow view (the columns that matter, with short names and fixed widths) shown
elsewhere, with the whole table one click away in an expander. A CSS container query decides,
so the choice follows the width of the table's own box (a column, the sidebar), not the window.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd
import streamlit as st

PHONE_PX = 340  # the narrowest box a narrow view must fit (a 390 px phone's page, less its padding)


def _css(key: str, full_from: int) -> str:
    return (
        f"<style>.st-key-fit_{key} {{ container-type: inline-size; }}"
        f"@container (max-width: {full_from - 0.02}px) {{ .st-key-full_{key} {{ display: none; }} }}"
        f"@container (min-width: {full_from}px) {{ .st-key-narrow_{key} {{ display: none; }} }}</style>"
    )


def fitted_table(
    data: pd.DataFrame | Mapping[str, Sequence],
    narrow: Sequence[str] | Mapping[str, str] | pd.DataFrame,
    *,
    key: str,
    full_from: int,
    narrow_widths: Mapping[str, int] | None = None,
    column_config: Mapping | None = None,
    narrow_config: Mapping | None = None,
    more: str = "All columns",
    **dataframe_args,
) -> None:
    """``data`` as a dataframe where its box is ``full_from`` px or wider. Elsewhere a narrow view:
    ``narrow`` is a list of columns of ``data``, a mapping of them to short names, or a table of its
    own; ``narrow_widths`` sets its columns' widths in px (they must add up to at most PHONE_PX) and
    ``narrow_config`` its other column settings. The whole table is then in an expander, ``more``."""
    key = re.sub(r"[^A-Za-z0-9_-]", "_", key)
    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
    if isinstance(narrow, pd.DataFrame):
        short, names = narrow, {}
    else:
        names = dict(narrow) if isinstance(narrow, Mapping) else {column: column for column in narrow}
        short = frame[list(names)].rename(columns=names)
    config = dict(column_config or {})
    small = {names[c]: v for c, v in config.items() if c in names}
    small.update(narrow_config or {})
    for name, width in (narrow_widths or {}).items():
        small[name] = {**(small.get(name) or {}), "width": width}
    st.html(_css(key, full_from))
    with st.container(key=f"fit_{key}"):
        with st.container(key=f"full_{key}"):
            st.dataframe(frame, column_config=config or None, key=f"{key}_full", **dataframe_args)
        with st.container(key=f"narrow_{key}"):
            st.dataframe(short, column_config=small or None, key=f"{key}_narrow", **dataframe_args)
            with st.expander(more):
                st.dataframe(frame, column_config=config or None, key=f"{key}_more", **dataframe_args)
