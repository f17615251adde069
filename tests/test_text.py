"""The one escaper for text inside Markdown (ui/text.py): whatever a stranger or the model wrote shows literally."""

from markdown_it import MarkdownIt

from ui.text import literal, quoted

# CommonMark as Streamlit's frontend reads it, with GFM's tables and strikethrough; linkify off because
# markdown-it-py's needs an extra package (autolinks are covered by the zero-width space checked below).
MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
HOSTILE = ['<img src=x onerror=alert(1)>', "[x](javascript:alert(3))", "**bold** _it_ `code` ~~gone~~",
           "# heading", "| a | b |", "$x^2$", ":smile: :material/home:", "1. one", "> quote", "&amp;"]


def _rendered_text(markdown: str) -> str:
    """The HTML for ``markdown`` with its one paragraph wrapper removed: what a reader sees is what is left."""
    html = MARKDOWN.render(markdown).strip()
    assert html.startswith("<p>") and html.endswith("</p>"), html  # no heading, list, quote or table
    return html[3:-4]


def test_literal_text_renders_as_exactly_its_characters():
    import html

    for text in HOSTILE:
        assert html.unescape(_rendered_text(literal(text))) == text, text


def test_literal_cuts_long_text_and_shows_line_breaks():
    assert literal("a" * 10, limit=4) == "aaaa…"
    assert literal("one\ntwo\r\nthree") == "one ↵ two ↵ three"


def test_literal_breaks_what_gfm_would_turn_into_a_link():
    for text in ["https://evil.example/x", "www.evil.example", "someone@evil.example"]:
        shown = literal(text)
        assert "\u200b" in shown and shown.replace("\u200b", "").replace("\\", "") == text


def test_quoted_writes_a_token_as_the_pages_do_and_literal():
    import html

    assert quoted(" the") == literal("'␣the'")
    assert html.unescape(_rendered_text(quoted("*x*"))) == "'*x*'"
    assert html.unescape(_rendered_text(quoted("<b>"))) == "'<b>'"
    assert html.unescape(_rendered_text(quoted("\n"))) == "'↵'"
