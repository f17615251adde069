"""The frame around every page: navigation, the settings sidebar, the page header and error guard.

``run_app`` is what app.py runs for each session. A stage page is a module in views/ with a
``render()`` function::

    from ui.frame import lesson, stage_page

    def render() -> None:
        with stage_page("tokenization") as settings:
            lesson("This run's numbers in a sentence or two. Anything after that is detail.")
            ...  # compute with lifecycle, draw with charts; a LifecycleError becomes a message

Presenter mode (the sidebar switch, or ``?present=1`` in a link) is the frame's too, so every
page gets it: sidebar collapsed, larger type, a stage-progress bar, the lesson cut to its first
sentences with the rest in an expander, and the keyboard moving between stages (ui/presenter/).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import streamlit as st

from lifecycle.engine import EngineUnavailable
from lifecycle.errors import LifecycleError
from lifecycle.result_cache import ResultTimeout
from lifecycle.api.wire import DEFAULT_BASE_URL
from lifecycle.model import LoadedModel, ModelLoadError, is_loaded, model_name, shared_model
from ui.settings import (JourneySettings, current_settings, keep_link_settings, render_settings_sidebar,
                         url_problems)
from ui.stages import HOME, PHASES, STAGES, StagePage, neighbours, phase_of, stage
from ui.when_idle import page_asks, start_run, when_idle

APP_TITLE = "LLM Request Lifecycle"
# An emoji: Streamlit draws it as the tab's icon itself (an SVG data URL); a :material/...: icon would be fetched
# from fonts.gstatic.com by every visitor's browser (and fail on a closed network).
PAGE_ICON = "🧭"
PROMPT_PREVIEW_CHARS = 400
HEADER_PROMPT_CHARS = 200  # the header's prompt box: about two lines at 1024 px
EMPTY_PROMPT = "The prompt is empty: type one in the sidebar (Prompt) to follow it through the stages."
PRESENT = "present"  # the presenter-mode switch's key and URL parameter
PRESENTER = Path(__file__).resolve().parent / "presenter"
LAYOUT_CSS = Path(__file__).resolve().parent / "layout.css"  # every page, presenter mode or not
# Streamlit's HTML sanitizer dropped this script sent as plain text; as base64 it arrives intact.
_KEYS_SCRIPT = f"<script>eval(atob('{base64.b64encode((PRESENTER / 'keys.js').read_bytes()).decode()}'))</script>"
LESSON_SHORT_CHARS = 240
MORE_LESSON = "More of this lesson"
_LESSON_REST = "presenter_lesson_rest"  # presenter mode: lesson details gathered during a stage page, shown at its end
SETTINGS_LATER = "settings_later"  # ui.when_idle: a new tab's run after its picture, which draws the settings widgets
_SESSION_RAN = "session_ran"  # set by a session's first run
_LINK_PROBLEMS = "link_problems"  # (page, messages): what the link this page was opened with set that cannot be used
# A sentence ends at . ! or ? (after any closing bold, code or bracket) followed by a capital or a quote.
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)[.!?](?:\*\*|`|\)|\")*\s+(?=[A-Z*`\"'(])")


def streamlit_page(page: StagePage) -> st.Page:
    """The st.Page that runs ``page``'s ``render()``. Its view is imported before the server says its pages are
    ready (app.py, ui.warm_pages.import_views), or on the page's first open if that comes first (or where app.py is
    not imported: AppTest runs it as a script). Streamlit identifies a page by its URL path, so a link built from a new
    st.Page of the same stage opens the one registered with the navigation."""

    def render() -> None:
        import_module(page.view).render()

    return st.Page(render, title=page.title, icon=page.icon, url_path=page.route, default=page is HOME)


def _link_problems(page: str) -> list[str]:
    """What the link this page was opened with set that the sidebar cannot use. The sidebar puts valid values in
    the URL at once, so the next run finds nothing: the messages stay for the rest of the visit to the page (the
    run that builds a page's details once its picture is drawn, ui.when_idle, must not take them away)."""
    found = url_problems(st.query_params.to_dict())
    kept_page, kept = st.session_state.get(_LINK_PROBLEMS, ("", []))
    if found or kept_page != page:
        st.session_state[_LINK_PROBLEMS] = (page, found)
        return found
    return kept


def run_app() -> None:
    """One session's script run: page config, URL checks, settings sidebar, then the chosen page.

    A new tab's first run leaves the settings widgets and the presenter switch out (the page reads the link's
    settings, as the widgets will): the browser draws the picture sooner, not waiting for the widgets' code. They
    come in the run the browser asks for once it has drawn the page: the one that builds the page's details
    (ui.when_idle.details_ready), or the one the frame asks for itself for a page without page-level details (none
    at all, or only a fragment's, whose run leaves the sidebar out)."""
    present = _present_from_url()
    st.set_page_config(page_title=APP_TITLE, page_icon=PAGE_ICON, layout="wide",
                       initial_sidebar_state="collapsed" if present else "auto")
    sections = {"": [streamlit_page(HOME)]}
    sections.update({name: [streamlit_page(p) for p in pages] for name, pages in PHASES.items()})
    current = st.navigation(sections, expanded=True)
    st.html(LAYOUT_CSS)
    for problem in _link_problems(current.url_path):
        st.warning(problem, icon=":material/link_off:")
    deferred = _SESSION_RAN not in st.session_state  # a new tab: its picture first, the settings widgets next run
    st.session_state[_SESSION_RAN] = True
    # A new tab's first run presents as the link says, with no switch yet (its code would hold back the picture).
    presenting_now = present if deferred else _presenter_switch()
    if presenting_now:
        st.query_params[PRESENT] = "1"  # page switches drop parameters no widget is bound to
        st.html(PRESENTER / "presenter.css")
        st.html(_KEYS_SCRIPT, unsafe_allow_javascript=True)
    if deferred:
        keep_link_settings()
    else:
        render_settings_sidebar()
    st.session_state.pop(_LESSON_REST, None)  # only a stage page gathers lesson details for its end
    start_run()
    try:
        current.run()
    except PageEnded:
        pass
    finally:
        if deferred and not page_asks():  # no page-level ask (no details, or a fragment's): ask for the widgets' run
            with st.sidebar:
                when_idle(SETTINGS_LATER, after_ms=0)


class PageEnded(Exception):
    """Raised by ``end_page``: the page has said all it can for this run."""


def end_page() -> NoReturn:
    """End the page's run here, as ``st.stop`` does, but let the frame finish its own part of the run (st.stop
    would refuse every element after it, the frame's included)."""
    raise PageEnded


def _presenter_switch() -> bool:
    return st.sidebar.toggle("Presenter mode", key=PRESENT, on_change=_present_to_url,
                             help="For a projector: larger type, sidebar closed, the lesson cut short. "
                                  "→ / ← or PageDown / PageUp move between stages. Links carry it as ?present=1.")


def _present_from_url() -> bool:
    """``?present=1`` (or true/yes/on) in a link turns presenter mode on, ``?present=0`` off; else it stays."""
    raw = st.query_params.get(PRESENT)
    if raw is not None:
        st.session_state[PRESENT] = raw.strip().lower() in {"1", "true", "yes", "on"}
    return bool(st.session_state.get(PRESENT, False))


def _present_to_url() -> None:
    if st.session_state[PRESENT]:
        st.query_params[PRESENT] = "1"
    else:
        st.query_params.pop(PRESENT, None)


def presenting() -> bool:
    """Whether this session shows pages in presenter mode."""
    return bool(st.session_state.get(PRESENT, False))


def split_lesson(markdown: str, present: bool = True) -> tuple[str, str]:
    """The lesson's first two sentences and the rest; for presenter mode the first sentence only, unless
    the two stay short."""
    ends = [match.end() for match in _SENTENCE_END.finditer(markdown)]
    if len(ends) < (1 if present else 2):  # nothing after what stays on screen
        return markdown.strip(), ""
    two_fit = len(ends) > 1 and (not present or ends[1] <= LESSON_SHORT_CHARS)
    cut = ends[1] if two_fit else ends[0]
    return markdown[:cut].strip(), markdown[cut:].strip()


def show_text(text: str, limit: int = PROMPT_PREVIEW_CHARS) -> None:
    """User text or model output, shown literally (never as Markdown or HTML), cut at ``limit`` chars."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters in all)"
    st.text(text)


def show_prompt(prompt: str) -> None:
    """The prompt this run follows, in a one-row box under the page title (one line in presenter mode)."""
    if presenting():
        show_text(f"Prompt: {prompt}", limit=120)
        return
    with st.container(border=True, horizontal=True, vertical_alignment="center", key="run_prompt"):
        st.caption("Prompt", width="content")
        show_text(prompt, limit=HEADER_PROMPT_CHARS)


def lesson(markdown: str, inline: bool = False) -> None:
    """The page's lesson. Markdown written by us: put numbers in it, never user text.

    Lead with the run's key fact: only the first two sentences stay on screen (in presenter mode the
    first, two while they stay short), so the picture comes up; the rest goes into a "More of this
    lesson" expander right under them, or in presenter mode into one at the end of the stage page.
    ``inline`` keeps it in place there too (a fragment, which reruns alone).
    """
    present = presenting()
    short, rest = split_lesson(markdown, present)
    st.markdown(short)
    deferred = st.session_state.get(_LESSON_REST) if present else None
    if rest and (inline or deferred is None):
        with st.expander(MORE_LESSON):
            st.markdown(rest)
    elif rest:
        deferred.append(rest)


def empty_prompt_message() -> None:
    """The one message every page shows when the prompt is empty."""
    st.warning(EMPTY_PROMPT, icon=":material/edit_note:")


def input_error(error: LifecycleError | ModelLoadError) -> None:
    """Bad input or a missing model as one message; a prompt too long for the model links where it still works."""
    st.error(str(error), icon=":material/error:")
    if getattr(error, "param", None) == "prompt":
        st.caption("These pages work on a prompt of any length:")
        for url_path in ("tokenization", "context-window"):
            page = stage(url_path)
            st.page_link(streamlit_page(page), label=page.title, icon=page.icon)


def own_api_base() -> str:
    """This app's own /v1 API at the address the browser used to open the page (any host, any port)."""
    page = urlsplit(st.context.url or "")
    return f"{page.scheme}://{page.netloc}/v1" if page.scheme and page.netloc else DEFAULT_BASE_URL


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
    if presenting():  # the title says it on a projector; the summary is on the journey map
        _progress(page)
    else:  # one small line, so that the page's picture starts on the first screen of a 1024x768 window
        st.markdown(f":gray[:small[{phase_of(page)} · {page.summary}]]")
    st.title(page.title, anchor=False)
    try:
        settings = current_settings()
    except LifecycleError as error:
        st.error(error.message, icon=":material/error:")
        end_page()
    show_prompt(settings.prompt)
    if needs_prompt and not settings.prompt.strip():
        empty_prompt_message()
        _stage_links(page)
        end_page()
    st.session_state[_LESSON_REST] = []
    try:
        yield settings
    except (LifecycleError, ModelLoadError) as error:
        input_error(error)
    except (EngineUnavailable, ResultTimeout) as error:  # the server, not the input: our own message
        st.error(str(error), icon=":material/cloud_off:")
    rests = st.session_state.pop(_LESSON_REST, [])
    if rests:
        with st.expander(MORE_LESSON, icon=":material/menu_book:"):
            for rest in rests:
                st.markdown(rest)
    _stage_links(page)


def _progress(page: StagePage) -> None:
    number = STAGES.index(page) + 1
    st.progress(number / len(STAGES), text=f"Stage {number} of {len(STAGES)} · {phase_of(page)} · "
                                             "→ / PageDown: next, ← / PageUp: back")


def _stage_links(page: StagePage) -> None:
    before, after = neighbours(page)
    st.divider()
    left, right = st.columns(2)
    with left:
        stage_link(before or HOME, f"Back: {before.title if before else HOME.title}", ":material/arrow_back:")
    if after:
        with right:
            stage_link(after, f"Next: {after.title}", ":material/arrow_forward:")


def stage_link(page: StagePage, label: str, icon: str) -> None:
    """A link to another stage. In presenter mode the link itself carries ``present=1``: Streamlit drops
    parameters no widget is bound to on a page switch, and waiting for the next run to put it back loses
    it when that run is cut short."""
    st.page_link(streamlit_page(page), label=label, icon=icon, query_params={PRESENT: "1"} if presenting() else None)
