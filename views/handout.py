"""Take it home: download this prompt's whole journey as one offline HTML file."""

import streamlit as st

from charts.handout import contents_table, handout_document
from lifecycle.stages.forward_pass import token_text
from lifecycle.lessons.handout import handout_lesson
from lifecycle.journey import Journey
from lifecycle.stages.kv_cache import KVCacheShape
from lifecycle.model import LoadedModel
from lifecycle.results import shared_results
from ui.cache import cached_journey, per_prompt_cache
from ui.frame import lesson, loaded_model, stage_page
from ui.settings import JourneySettings


@per_prompt_cache
def handout(settings: JourneySettings, _journey: Journey, _loaded: LoadedModel) -> tuple[str, list]:
    """The handout's HTML and its sections (for the preview), for these settings."""
    return handout_document(_journey, lambda i: token_text(_loaded, i), KVCacheShape.of(_loaded.model),
                            _loaded.context_window)


def prepare(settings: JourneySettings, loaded: LoadedModel) -> None:
    """The handout for ``settings``, into the shared cache."""
    handout(settings, shared_results(loaded).journey(settings.journey_input(), label="warm"), loaded)


def render() -> None:
    with stage_page("handout") as settings:
        journey = cached_journey(settings)
        loaded = loaded_model()
        with st.spinner("Writing the handout…"):
            html, sections = handout(settings, journey, loaded)
        lesson(handout_lesson(sections, len(html.encode("utf-8"))))
        # Handed over on the click (``data`` a callable): a run does not hash and store the ~5 MB file for every visit.
        st.download_button("Download the handout (HTML)", lambda: html, file_name="llm-request-journey.html",
                           mime="text/html", type="primary", icon=":material/download:", key="handout_download",
                           on_click="ignore")
        st.subheader("What is inside", anchor=False)
        st.html(contents_table(sections))  # the key numbers wrap inside their cells on any screen (ui/layout.css)
