"""Run the real app (app.py with its navigation and sidebar) under AppTest, on any page.

    from tests.pages.harness import run_page
    at = run_page("tokenization", prompt="Hello world")
    assert not at.exception

Settings go in as URL query parameters, exactly as a copied deep link would carry them.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import openai
import pandas as pd
import plotly.graph_objects as go
from starlette.applications import Starlette
from starlette.testclient import TestClient

from lifecycle.api import routes
from lifecycle.api.calllog import default_call_log_path
from lifecycle.api.config import ApiConfig
from lifecycle.api.endpoints import ApiServer
from lifecycle.api.serving import model_status, start_model_loading
from streamlit.components.v2 import manifest_scanner
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.scriptrunner import ScriptRunnerEvent
from streamlit.testing.v1 import AppTest, local_script_runner
from streamlit.util import calc_hash

from tests.details import details_keys
from tests.html_cells import read_table
from ui.frame import MORE_LESSON
from ui.stages import stage

DETAILS_KEYS = details_keys()
# The Agents page tests' question, with which test_frame.py and test_picture_first.py open every page: the three run
# in one worker (tests/conftest.py's MODULES_KEPT_TOGETHER), so the Agents page finds its loop and roads computed.
EVERY_PAGE_PROMPT = "What is 17 times 23?"

APP = Path(__file__).resolve().parents[2] / "app.py"
# Before every run AppTest registers the Streamlit components of the installed packages, reading the metadata of
# every installed distribution (`streamlit run` does it once, when it starts): ~40 s of CPU over the suite. The
# installed packages do not change during a test run, so this process scans them once.
manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


def _wait_for_run(runner: local_script_runner.LocalScriptRunner, timeout: float = 3) -> None:
    """``require_widgets_deltas`` without its cost. AppTest's own wait for the end of a run looks every millisecond
    and reads the run's whole list of events each time (one per message the page sent): ~8% of a core while a page
    of 300 messages runs, measured alone, and ~96 s of py-spy's samples over the suite, taken from the page runs and
    the engine beside it. This one reads each event once and looks again after 1, 2, 4 ... at most 20 ms."""
    deadline, seen, pause = time.monotonic() + timeout, 0, 0.001
    while True:
        events = len(runner.events)
        if ScriptRunnerEvent.SHUTDOWN in runner.events[seen:events]:
            return
        seen = events
        if time.monotonic() >= deadline:
            break
        time.sleep(pause)
        pause = min(2 * pause, 0.02)
    runner.request_stop()  # as AppTest's own does: the script must not run on after the test gave up on it
    runner.join()
    raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


local_script_runner.require_widgets_deltas = _wait_for_run

# Generous: the first run in a test process loads the model, and pages may run it.
TIMEOUT = 180


def run_page(url_path: str = "", timeout: float = TIMEOUT, drawn: bool = True, **settings: object) -> AppTest:
    """The app after opening ``url_path`` ("" = home) with ``settings`` as query parameters, and (``drawn``) after
    the run the browser starts once it has drawn a page whose details wait for that (``details_drawn``).

    Keyword names are the sidebar keys: prompt, system_prompt, history, temperature, top_p,
    top_k, min_p, repetition_penalty, max_tokens, seed, include_usage.
    """
    app = AppTest.from_file(APP, default_timeout=timeout)
    app.query_params.update({key: _query_value(value) for key, value in settings.items()})
    if url_path:
        open_page(app, url_path)  # the first run opens this page, like a deep link
    app.run()
    return details_drawn(app) if drawn else app


def details_drawn(app: AppTest) -> AppTest:
    """The app after the browser told each waiting ``ui.when_idle.details_ready`` of the page that its picture is
    drawn (the pages whose details come in their second run: views' ``DETAILS`` keys)."""
    for key in DETAILS_KEYS:
        if components(app, key) and not idle_told_in(app, key):
            app = browser_idle(app, key)
    return app


def components(app: AppTest, key: str) -> list:
    """The page's ``st.components.v2`` components mounted under ``key``."""
    return [c for c in app.get("bidi_component") if c.proto.id.endswith(key)]


def component_data(app: AppTest, key: str) -> dict:
    """The data the page sent this run to its component mounted under ``key``."""
    (component,) = components(app, key)
    return json.loads(component.proto.json)


def idle_told_in(app: AppTest, key: str) -> bool:
    return key in app.session_state and bool((app.session_state[key] or {}).get("idle"))


def open_page(app: AppTest, url_path: str) -> AppTest:
    """Point the app's next run at the page of ``url_path``, as a deep link or a click in the navigation does.

    The pages are functions (``st.Page(render)``), and ``AppTest.switch_page`` finds only pages that are
    files. Streamlit knows a page by the hash of its URL path, and that is what this sets."""
    app._page_hash = calc_hash(stage(url_path).route)
    return app


def component_sends(app: AppTest, key: str, state: dict) -> AppTest:
    """Run the app as if the browser's component mounted with ``key`` (a ``st.components.v2`` component) had
    set ``state``, as its JavaScript does with setStateValue."""
    (component,) = components(app, key)
    sent = WidgetState(id=component.proto.id, json_value=json.dumps(state))
    tree = app._tree
    collect = tree.get_widget_states

    def with_the_component():
        states = collect()
        states.widgets.append(sent)
        return states

    tree.get_widget_states = with_the_component
    try:
        return app.run()
    finally:
        del tree.get_widget_states


def browser_idle(app: AppTest, key: str) -> AppTest:
    """Run the app as the browser does once it has drawn a page holding ``ui.when_idle`` under ``key``: the
    page's second run, which builds what its first left for later (the Forward pass page's other tabs)."""
    return component_sends(app, key, {"idle": True})


def run_page_with_downloads(url_path: str = "", **settings: object) -> tuple[AppTest, dict[str, bytes]]:
    """``run_page``, and the bytes each st.download_button would hand the browser on a click, by the button's id.
    The app's buttons make their file on the click (``data`` a callable, kept by the run's media file manager)."""
    made_on_click: dict[str, Callable[[], str | bytes]] = {}
    add_deferred = MediaFileManager.add_deferred

    def keep(manager: MediaFileManager, make, *args, **kwargs) -> str:
        file_id = add_deferred(manager, make, *args, **kwargs)
        made_on_click[file_id] = make
        return file_id

    with mock.patch.object(MediaFileManager, "add_deferred", keep):
        app = run_page(url_path, **settings)
    files = {}
    for button in app.get("download_button"):
        data = made_on_click[button.proto.deferred_file_id]()
        files[button.proto.id] = data.encode("utf-8") if isinstance(data, str) else data
    return app, files


def duration_ms(text: str) -> float:
    """A duration as the pages write it ("0.42 ms", "1,907.3 ms", "16.4 s") in milliseconds."""
    number, unit = re.fullmatch(r"([\d,.]+) (ms|s)", text).groups()
    return float(number.replace(",", "")) * (1000 if unit == "s" else 1)


def duration_rounding(text: str) -> float:
    """Half the last printed digit of such a duration, in ms, made generous: to the ms, or a tenth of a second."""
    return 0.5 if text.endswith(" ms") else 50.0


def _query_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def html_table(app: AppTest, css_class: str) -> pd.DataFrame:
    """The table of class ``css_class`` a page drew with st.html, as the browser shows its text: the header row's
    cells name the columns, each row's first cell is its index."""
    (body,) = [h.proto.body for h in app.get("html") if f'<table class="{css_class}"' in h.proto.body]
    header, *rows = read_table(body).rows
    return pd.DataFrame([row[1:] for row in rows], index=pd.Index([row[0] for row in rows], name=header[0]),
                        columns=header[1:])


def markdowns(app: AppTest) -> list[str]:
    """Every st.markdown text on the page in page order, with a lesson's rest (the "More of this lesson" expander
    right under its first sentences) joined onto it: each lesson as one text, as the page's lesson() got it."""
    found: list[str] = []

    def walk(node) -> None:
        after_markdown = False
        for child in node.children.values():
            if getattr(child, "type", None) == "expander" and child.label == MORE_LESSON and after_markdown:
                found[-1] += " " + " ".join(m.value for m in child.markdown)
            elif getattr(child, "type", None) == "markdown":
                found.append(child.value)
                after_markdown = True
                continue
            elif hasattr(child, "children"):
                walk(child)
            after_markdown = False

    walk(app._tree)
    return found


def texts(app: AppTest) -> list[str]:
    """Every st.text value on the page (where user text and model output are shown)."""
    return [element.value for element in app.text]


def plotly_figure(app: AppTest, key: str) -> go.Figure:
    """The figure a page drew with ``st.plotly_chart(..., key=key)``, rebuilt from what it sent to the browser."""
    spec = next(chart for chart in app.get("plotly_chart") if chart.proto.id.endswith(key)).proto.spec
    return go.Figure(json.loads(spec, object_hook=_typed_array))


def _typed_array(item: dict):
    """Plotly sends numeric arrays as base64 typed arrays: decode them back to numpy."""
    if "bdata" not in item:
        return item
    values = np.frombuffer(base64.b64decode(item["bdata"]), dtype=item["dtype"])
    shape = item.get("shape")
    return values.reshape([int(n) for n in str(shape).split(",")]) if shape else values


@contextmanager
def page_api(keys: dict[str, str]) -> Iterator[ApiServer]:
    """The real API with these keys (name -> key), logging where the pages read (the test session's throwaway
    call log), as the process-wide server the Live calls page shows, as it is when app.py serves both."""
    made = ApiServer(ApiConfig(keys=keys, call_log=default_call_log_path()))
    previous, routes._default_server = routes._default_server, made
    try:
        yield made
    finally:
        routes._default_server = previous


def sdk_client(server: ApiServer, key: str) -> openai.OpenAI:
    """The official openai SDK calling ``server``'s routes in-process, without retries."""
    client = TestClient(Starlette(routes=routes.api_routes(server=server)))
    return openai.OpenAI(base_url="http://testserver/v1", api_key=key, http_client=client, max_retries=0)


def wait_for_api(seconds: float = 120) -> None:
    """The API's model is loaded (app.py starts loading it on its first run), so no call meets a 503 of its own."""
    start_model_loading()
    deadline = time.monotonic() + seconds
    while model_status().state != "ready":
        assert time.monotonic() < deadline, f"the API never got ready: {model_status()}"
        time.sleep(0.2)
