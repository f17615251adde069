"""Per-prompt results, cached across sessions and bounded in size and age.

``cached_journey(settings)`` is the whole journey of this session's prompt (every stage, timed),
computed once per distinct settings. A page that needs more than the journey decorates the function that computes its stage for one prompt::

    @per_prompt_cache
    def tokenizations(settings: JourneySettings) -> dict[str, Tokenization]: ...

The result is shared by every session asking with equal arguments, so treat it as read-only.
Arguments are hashed to make the key; name a parameter with a leading underscore (``_loaded``)
to leave an unhashable one (the model) out of the key. Old entries expire after ``TTL`` and at
most ``MAX_ENTRIES`` stay per function, so memory levels off however many prompts arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

import streamlit as st

from lifecycle.model import LoadedModel
from ui.frame import loaded_model
from ui.settings import JourneySettings

if TYPE_CHECKING:
    from lifecycle.journey import Journey, JourneyInput

MAX_ENTRIES = 16
TTL = timedelta(minutes=30)

Result = TypeVar("Result")


def per_prompt_cache(function: Callable[..., Result]) -> Callable[..., Result]:
    """``function`` memoised by its arguments for all sessions: at most MAX_ENTRIES, each for TTL."""
    return st.cache_resource(max_entries=MAX_ENTRIES, ttl=TTL, show_spinner=False)(function)


@per_prompt_cache
def _journey(inp: JourneyInput, _loaded: LoadedModel) -> Journey:
    from lifecycle.journey import run_journey  # imported on first use: ui.cache stays light

    return run_journey(inp, _loaded)


def cached_journey(settings: JourneySettings) -> Journey:
    """Every stage's result for these settings; the first request runs the model, with a spinner.

    Raises LifecycleError for input the journey cannot take (empty or too long prompt, ...).
    """
    loaded = loaded_model()
    with st.spinner("Running the prompt through every stage on the model…", show_time=True):
        return _journey(settings.journey_input(), loaded)
