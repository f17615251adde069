"""The suite's app server (one for every worker: tests/browser/shared_app.py) and Debian's chromium, driven by
Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench.app_server import AppServer
from tests.browser.shared_app import SHARED_DIR_ENV, SharedApp, key_name, shared_app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
PAGE_TIMEOUT_MS = 90_000  # the first page of a fresh server waits for the model to load
# expect() keeps its own timeout (5 s by default), not the context's. A rerun after a click or a key press takes
# longer than 5 s now and then on a machine running three test workers: the Live calls page's key, measured with two
# busy loops beside the server, was taken 0.3-4.7 s after Enter in 70 tries.
EXPECT_TIMEOUT_MS = 30_000
expect.set_options(timeout=EXPECT_TIMEOUT_MS)
# The suite's server accepts a key per worker (made per run), so tests can call its /v1 API; this is this worker's.
API_KEY_NAME = key_name()


BROWSER_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items) -> None:
    """Every test in tests/browser is a browser test, whether or not its module says so, so that
    ``-m "not browser"`` (make test-fast, make test-py312) never starts chromium or an app server."""
    for item in items:
        if BROWSER_TESTS in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def shared() -> SharedApp:
    """`streamlit run app.py`, started once for the whole run and shared by every worker's browser tests, as a
    class shares one server; the controller stops it at the end (tests/conftest.py)."""
    folder = Path(os.environ[SHARED_DIR_ENV])
    return shared_app(folder, log=folder / "streamlit.log")


@pytest.fixture(scope="session")
def app_url(shared) -> str:
    """Base URL of the run's shared app server."""
    return shared.url


@pytest.fixture
def fresh_app_url(tmp_path_factory) -> str:
    """Base URL of a `streamlit run app.py` started for this one test and stopped after it: the test's
    first request is the first the server ever sees (no other test has warmed its model or caches)."""
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with AppServer({}, log=log, ready="/_stcore/health") as server:
        yield server.url


@pytest.fixture(scope="session")
def api_key(shared) -> str:
    """This worker's key for the shared server's OpenAI-compatible API (its name: API_KEY_NAME)."""
    return shared.api_key


@pytest.fixture(scope="session")
def playwright():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as started:
        yield started


@pytest.fixture(scope="session")
def browser(playwright):
    """A chromium for tests that need browsers apart (new contexts: no cache, cookies or storage shared)."""
    launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield launched
    launched.close()


@pytest.fixture(scope="session")
def profile(playwright, tmp_path_factory):
    """One chromium profile on disk for the worker's pages, as one person's browser: a new tab in it finds
    Streamlit's bundles and plotly.js in the HTTP cache and their compiled code in V8's code cache (about a
    quarter less of chromium's CPU per page load than a new empty context, measured). Each test still gets a
    Streamlit session of its own (a new tab is a new websocket)."""
    context = playwright.chromium.launch_persistent_context(
        tmp_path_factory.mktemp("chromium-profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
        viewport={"width": 1400, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def page(profile):
    """A new tab (1400x900; tests resize it) in the worker's chromium profile: its own Streamlit session."""
    opened = profile.new_page()
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS
