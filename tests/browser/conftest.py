"""A freshly started app server and Debian's chromium, driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
STARTUP_SECONDS = 90
PAGE_TIMEOUT_MS = 90_000  # the first page of a fresh server waits for the model to load
# The suite's server accepts this one API key (made per run), so tests can call its /v1 API.
API_KEY_NAME = "browser-tests"
API_KEY = "sk-browser-tests-" + secrets.token_hex(16)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"streamlit exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"streamlit did not become healthy in {STARTUP_SECONDS} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def app_url(tmp_path_factory) -> str:
    """Base URL of `streamlit run app.py` started fresh for this test session, stopped at the end."""
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LIFECYCLE_API_KEYS": f"{API_KEY_NAME}:{API_KEY}"}
    command = [
        sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
        "--server.address", "127.0.0.1", "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]
    with log.open("w") as output:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, server, log)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


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
