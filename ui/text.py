"""Text on the pages: durations as people read them, and anyone's text made literal inside Markdown.

Streamlit renders captions, alerts and labels as Markdown (links, images, emphasis, directives).
Text that a visitor, a client, a remote server or the model wrote goes through ``literal`` first,
or is shown with ``st.text``/``st.code``, never as Markdown.
"""

from __future__ import annotations

MARKDOWN_PUNCTUATION = frozenset("\\`*_{}[]()<>#+-.!|~:$=\"'&@%^")


def literal(text: object, limit: int = 500) -> str:
    """``text`` as Markdown that shows it literally: every punctuation mark backslash-escaped (so no
    link, image, emphasis, HTML, math or directive), line breaks as ↵, cut at ``limit`` characters."""
    shown = str(text)
    if len(shown) > limit:
        shown = shown[:limit] + "…"
    shown = shown.replace("\r\n", "\n").replace("\r", "\n").replace("\n", " ↵ ")
    return "".join(f"\\{c}" if c in MARKDOWN_PUNCTUATION else c for c in shown)


def ms(seconds: float | None) -> str:
    """A duration: "0.42 ms", "218.4 ms", "12.3 s"; "–" when there is none."""
    if seconds is None:
        return "–"
    if seconds < 0.001:
        return f"{seconds * 1000:.2f} ms"
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"
