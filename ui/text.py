"""Text on the pages: durations as people read them, and anyone's text made literal inside Markdown.

Streamlit renders captions, alerts and labels as Markdown (links, images, emphasis, directives).
Text that a visitor, a client, a remote server or the model wrote goes through ``literal`` first,
or is shown with ``st.text``/``st.code``, never as Markdown.
"""

from __future__ import annotations

import re

from lifecycle.lessons import words
from lifecycle.stages.vocabulary import show_token

ms = words.ms  # a duration: one format for the pages and their lessons (lifecycle/lessons/words.py)

MARKDOWN_PUNCTUATION = frozenset("\\`*_{}[]()<>#+-.!|~:$=\"'&@%^")


_AUTOLINK_START = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)")
ZERO_WIDTH_SPACE = "\u200b"


def literal(text: object, limit: int = 500) -> str:
    """``text`` as Markdown that shows it literally: every punctuation mark backslash-escaped (so no
    link, image, emphasis, HTML, math or directive), line breaks as ↵, cut at ``limit`` characters.

    GFM turns addresses into links after escapes are decoded, so a zero-width space also goes after
    "://"'s colon, between "www" and its dot and before "@": the text reads the same, links nowhere."""
    shown = str(text)
    if len(shown) > limit:
        shown = shown[:limit] + "…"
    shown = shown.replace("\r\n", "\n").replace("\r", "\n").replace("\n", " ↵ ")
    shown = _AUTOLINK_START.sub(ZERO_WIDTH_SPACE, shown)
    return "".join(f"\\{c}" if c in MARKDOWN_PUNCTUATION else c for c in shown)


def quoted(token: str) -> str:
    """A token in quotes for a Markdown sentence, written as every page writes tokens (``show_token``),
    made literal by ``literal``: the one escaper for text inside Markdown."""
    return literal(f"'{show_token(token)}'")


_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(([^)\n]*)\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\n]*)\)")
_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:.*$", re.MULTILINE)
_BARE = re.compile(r"<?(?:[a-zA-Z][a-zA-Z0-9+.-]{1,20}:(?://)?|www\.)[^\s<>]+>?|<?[\w.+-]+@[\w-]+\.[\w.-]+>?")


def safe_markdown(text: str) -> str:
    """Model text rendered as Markdown (emphasis, lists, code, tables) with nothing remote: an image
    becomes a note naming its address, a link shows its target beside its label and is not clickable,
    bare addresses and link definitions stay literal text."""
    def image(match: re.Match) -> str:
        return f"*(image {literal(match.group(1), 80)} not loaded: {literal(match.group(2), 200)})*"

    def link(match: re.Match) -> str:
        return f"{literal(match.group(1), 200)} *(link to {literal(match.group(2), 200)})*"

    text = _DEFINITION.sub(lambda m: literal(m.group(0)), text)
    parts = re.split(r"(`[^`\n]*`)", text)  # inline code is already literal
    for index in range(0, len(parts), 2):
        part = _IMAGE.sub(image, parts[index])
        part = _LINK.sub(link, part)
        parts[index] = _BARE.sub(lambda m: literal(m.group(0)), part)
    return "".join(parts)
