"""The app started exactly as the README's ``make run`` starts it, for the bench and the browser tests.

``streamlit run app.py`` with the repo's own ``.streamlit/config.toml`` and no other server setting:
only the port (a free one) and the loopback address (a test server is never reachable from outside)
are given on the command line. Anything that makes the app faster belongs in the config file, so
what is measured here is what a teacher gets.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STARTUP_SECONDS = 120.0
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def app_command(port: int) -> list[str]:
    """The README's command (``streamlit run app.py --server.port N``), bound to loopback."""
    return [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
            "--server.address", "127.0.0.1"]


class AppServer:
    """``streamlit run app.py`` on a free port, stopped (only this process) on exit.

    ``ready`` is the path polled before the server counts as started: ``/health`` (the model is
    loaded and the engine built) or ``/_stcore/health`` (Streamlit answers; the model may still load).
    """

    def __init__(self, env: dict | None = None, log: Path | None = None, ready: str = "/health") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **OFFLINE, **(env or {})}
        self.log = log
        self.ready = ready
        self.process: subprocess.Popen | None = None
        self.ready_seconds = float("nan")
        self.started_at = float("nan")

    def __enter__(self) -> AppServer:
        output = self.log.open("w") if self.log is not None else subprocess.DEVNULL
        started = self.started_at = time.perf_counter()
        try:
            self.process = subprocess.Popen(app_command(self.port), cwd=ROOT, env=self.env, stdout=output,
                                            stderr=subprocess.STDOUT)
        finally:
            if self.log is not None:
                output.close()
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        self.ready_seconds = time.perf_counter() - started
        return self

    def __exit__(self, *_exc) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.process.returncode}{self._tail()}")
            try:
                with urllib.request.urlopen(self.url + self.ready, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the app was not ready within {STARTUP_SECONDS:.0f} s{self._tail()}")

    def wait_for_pages(self) -> float:
        """Wait until ``/health`` says the pages' own model work can start at once (the loader builds their
        hooked model a few seconds after the API is served); the seconds since the start."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as reply:
                pages = json.load(reply).get("pages")
            if pages == "ready":
                return time.perf_counter() - self.started_at
            if pages == "failed":
                raise RuntimeError(f"the pages' model could not be built{self._tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"the pages were not ready within {STARTUP_SECONDS:.0f} s{self._tail()}")

    def _tail(self) -> str:
        return f":\n{self.log.read_text()[-3000:]}" if self.log is not None and self.log.exists() else ""
