"""The frame around every page: navigation, the settings sidebar, the page header and error guard.

``run_app`` is what app.py runs for each session. A stage page's script is::

    from ui.frame import stage_page

    with stage_page("tokenization") as settings:
        ...  # compute with lifecycle, draw with charts; a LifecycleError becomes a message
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from lifecycle.errors import LifecycleError
from lifecycle.model import LoadedModel, ModelLoadError, is_loaded, model_name, shared_model
from ui.settings import JourneySettings, current_settings, render_settings_sidebar, url_problems
from ui.stages import HOME, PHASES, StagePage, neighbours, phase_of, stage

APP_TITLE = "LLM Request Lifecycle"
PROMPT_PREVIEW_CHARS = 400


def _page(page: StagePage, default: bool = False) -> st.Page:
    if default:
        return st.Page(page.script, title=page.title, icon=page.icon, default=True)
    return st.Page(page.script, title=page.title, icon=page.icon, url_path=page.url_path)


def run_app() -> None:
    """One session's script run: page config, URL checks, settings sidebar, then the chosen page."""
    st.set_page_config(page_title=APP_TITLE, page_icon=":material/route:", layout="wide")
    sections = {"": [_page(HOME, default=True)]}
    sections.update({name: [_page(p) for p in pages] for name, pages in PHASES.items()})
    current = st.navigation(sections, expanded=True)
    for problem in url_problems(st.query_params.to_dict()):
        st.warning(problem, icon=":material/link_off:")
    render_settings_sidebar()
    current.run()


def show_text(text: str, limit: int = PROMPT_PREVIEW_CHARS) -> None:
    """User text or model output, shown literally (never as Markdown or HTML), cut at ``limit`` chars."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters in all)"
    st.text(text)


def show_prompt(prompt: str) -> None:
    """The prompt this run follows, in a box under the page title."""
    with st.container(border=True):
        st.caption("This run's prompt")
        show_text(prompt)


def lesson(markdown: str) -> None:
    """The page's one-paragraph lesson. Markdown written by us: put numbers in it, never user text."""
    st.markdown(markdown)


def loaded_model() -> LoadedModel:
    """The process-wide model; the first call in a process shows progress while it loads."""
    if is_loaded():
        return shared_model()
    with st.spinner(
        f"Loading {model_name()}… (the very first start converts the GGUF, ~20 s)", show_time=True
    ):
        return shared_model()


@contextmanager
def stage_page(url_path: str, needs_prompt: bool = True) -> Iterator[JourneySettings]:
    """Header, prompt and error guard of a stage page; yields this session's settings.

    Bad input (``LifecycleError``) and a missing model (``ModelLoadError``) end the page body with
    a one-line message instead of a traceback. Links to the previous and next stage close the page.
    """
    page = stage(url_path)
    st.caption(phase_of(page))
    st.title(page.title, anchor=False)
    st.markdown(page.summary)
    try:
        settings = current_settings()
    except LifecycleError as error:
        st.error(error.message, icon=":material/error:")
        st.stop()
    show_prompt(settings.prompt)
    if needs_prompt and not settings.prompt.strip():
        st.warning("The prompt is empty: type one in the sidebar to follow it through this stage.")
        _stage_links(page)
        st.stop()
    try:
        yield settings
    except (LifecycleError, ModelLoadError) as error:
        st.error(str(error), icon=":material/error:")
    _stage_links(page)


def _stage_links(page: StagePage) -> None:
    before, after = neighbours(page)
    st.divider()
    left, right = st.columns(2)
    with left:
        st.page_link(before.script if before else HOME.script,
                     label=f"Back: {before.title if before else HOME.title}", icon=":material/arrow_back:")
    if after:
        with right:
            st.page_link(after.script, label=f"Next: {after.title}", icon=":material/arrow_forward:")
