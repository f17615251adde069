"""A freshly started app server and Debian's chromium, driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from bench.app_server import AppServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
PAGE_TIMEOUT_MS = 90_000  # the first page of a fresh server waits for the model to load
# The suite's server accepts this one API key (made per run), so tests can call its /v1 API.
API_KEY_NAME = "browser-tests"
API_KEY = "sk-browser-tests-" + secrets.token_hex(16)


BROWSER_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items) -> None:
    """Every test in tests/browser is a browser test, whether or not its module says so, so that
    ``-m "not browser"`` (make test-fast, make test-py312) never starts chromium or an app server."""
    for item in items:
        if BROWSER_TESTS in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


def _started_app(tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    env = {"LIFECYCLE_API_KEYS": f"{API_KEY_NAME}:{API_KEY}"}
    return AppServer(env, log=log, ready="/_stcore/health")


@pytest.fixture(scope="session")
def app_url(tmp_path_factory) -> str:
    """Base URL of `streamlit run app.py` started once for the whole test session, stopped at the end:
    every browser test shares it, as a class shares one server."""
    with _started_app(tmp_path_factory) as server:
        yield server.url


@pytest.fixture
def fresh_app_url(tmp_path_factory) -> str:
    """Base URL of a `streamlit run app.py` started for this one test and stopped after it: the test's
    first request is the first the server ever sees (no other test has warmed its model or caches)."""
    with _started_app(tmp_path_factory) as server:
        yield server.url


@pytest.fixture(scope="session")
def api_key() -> str:
    """The key `app_url`'s server accepts for its OpenAI-compatible API (key name "browser-tests")."""
    return API_KEY


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A fresh browser context per test: its own cookies and Streamlit session."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    opened = context.new_page()
    yield opened
    context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS
