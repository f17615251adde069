"""A warmed prompt's pages: what the warm route computes after the journey, so every page opens at once.

Most pages read only the journey's stages (``lifecycle.results``), which the warm route computes itself. A page
that runs work of its own (the Agents page's loop and measurements, the KV cache page's three turns, the
Structured output page's grammar run, ...) has a ``prepare(settings, loaded)`` beside its ``render()``: it
computes, into the shared results cache, what ``render()`` reads with the page's own controls at their defaults.
app.py hands ``prepare_pages`` to the warm route, which needs nothing of Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module

from lifecycle.model import LoadedModel, shared_model
from ui.settings import JourneySettings
from ui.stages import HOME, STAGES


def import_views() -> None:
    """Import every page's view, with what they import (plotly, pandas, the openai SDK: ~1.4 s here). app.py has
    the loader run it before /health says the pages are ready: otherwise the first visitor of a page pays for its
    import, and a class opening that page at once waits behind that visitor's import lock."""
    for page in (HOME, *STAGES):
        import_module(page.view)


def page_preparers() -> dict[str, Callable[[JourneySettings, LoadedModel], None]]:
    """Each page with work of its own (its URL path) and its ``prepare``, in the journey's order."""
    found = {page.url_path: getattr(import_module(page.view), "prepare", None) for page in STAGES}
    return {path: prepare for path, prepare in found.items() if prepare is not None}


def prepare_pages(settings: Mapping[str, object], prompt: str) -> list[str]:
    """Compute every page's own results for ``prompt`` under ``settings`` (the sidebar's names); returns the
    pages prepared. A LifecycleError (input a page refuses) propagates."""
    page_settings = JourneySettings.from_sidebar(**settings, prompt=prompt)
    loaded = shared_model()
    preparers = page_preparers()
    for prepare in preparers.values():
        prepare(page_settings, loaded)
    return list(preparers)
