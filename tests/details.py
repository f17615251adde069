"""The pages that hold their details back until the browser has drawn their picture (ui.when_idle.details_ready):
each such view's ``DETAILS`` key, found by importing every page's view."""

from __future__ import annotations

import importlib

from ui.stages import HOME, STAGES


def details_keys() -> tuple[str, ...]:
    """The ``DETAILS`` key of every page's view that has one, in the journey's order."""
    views = (importlib.import_module(page.view) for page in (HOME, *STAGES))
    return tuple(view.DETAILS for view in views if hasattr(view, "DETAILS"))
