"""A code block drawn in the page's DOM as a Streamlit component: the Request page's JSON body, its picture.

``st.code`` makes a new tab fetch and run Streamlit's syntax highlighter (~0.5 s of the browser) before it
draws anything of the script run that holds it. This component (ui/live_code.js, .css), mounted in the
page's own DOM with nothing fetched at run time, shows the text as it is, colours JSON's keys, strings,
numbers and literals itself, and has a copy button. Nothing comes back to Python.
"""

from __future__ import annotations

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_code")


def live_code(text: str, key: str, language: str = "json", label: str = "") -> None:
    """Show ``text`` under ``key``: coloured when ``language`` is "json", as it is otherwise."""
    _COMPONENT(key=key, data={"text": text, "language": language, "label": label}, height="content")
