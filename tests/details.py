"""The pages that hold their details back until the browser has drawn their picture (ui.when_idle.details_ready):
each such view's ``DETAILS`` key, found by importing every page's view, and the frame's own key, under which a new
tab's page without details asks for the run that draws the settings widgets."""

from __future__ import annotations

import importlib

from ui.frame import SETTINGS_LATER
from ui.stages import HOME, STAGES


def details_keys() -> tuple[str, ...]:
    """The ``DETAILS`` key of every page's view that has one, in the journey's order, then the frame's."""
    views = (importlib.import_module(page.view) for page in (HOME, *STAGES))
    return (*(view.DETAILS for view in views if hasattr(view, "DETAILS")), SETTINGS_LATER)
