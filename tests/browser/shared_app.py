"""One `streamlit run app.py` for the browser tests of every pytest-xdist worker, as one server serves a class.

The first worker to ask starts it (under a file lock, in the folder the controller names in ``SHARED_DIR_ENV``)
and writes where it is; the others read that. The server outlives the worker that started it: the controller,
which outlives every worker, stops it at the end of the run (``stop_shared_app``). Without xdist the one pytest
process is both.

Each worker calls the API with a key of its own (named after the worker), so the workers' calls do not share one
key's rate limit, and the server logs its calls to a file of its own in that folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.app_server import AppServer

SHARED_DIR_ENV = "LIFECYCLE_TESTS_SHARED_DIR"
_INFO = "app-server.json"
_STOP_SECONDS = 20.0


def worker_name() -> str:
    """This process's name among the workers ("gw0", "gw1", ...; "main" without xdist)."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def key_name(worker: str | None = None) -> str:
    return f"browser-tests-{worker or worker_name()}"


@dataclass(frozen=True)
class SharedApp:
    url: str
    pid: int
    keys: dict[str, str]  # key name -> key
    call_log: str  # the server's call log (LIFECYCLE_CALL_LOG)

    @property
    def api_key(self) -> str:
        """This worker's key."""
        return self.keys[key_name()]


def _workers() -> list[str]:
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    return [f"gw{n}" for n in range(count)] + ["main"]


@contextmanager
def _locked(folder: Path):
    with (folder / "app-server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def shared_app(folder: Path, log: Path) -> SharedApp:
    """The run's shared app server, started now if no worker has started it yet."""
    info = folder / _INFO
    with _locked(folder):
        if info.exists():
            return SharedApp(**json.loads(info.read_text()))
        keys = {key_name(worker): "sk-browser-tests-" + secrets.token_hex(16) for worker in _workers()}
        call_log = str(folder / "server-calls.sqlite3")
        env = {"LIFECYCLE_API_KEYS": ",".join(f"{name}:{key}" for name, key in keys.items()),
               "LIFECYCLE_CALL_LOG": call_log}
        server = AppServer(env, log=log, ready="/_stcore/health").__enter__()  # stopped by stop_shared_app
        app = SharedApp(server.url, server.process.pid, keys, call_log)
        info.write_text(json.dumps(app.__dict__))
        return app


def stop_shared_app(folder: Path) -> None:
    """Stop the run's shared app server, if one was started, and wait until it has exited."""
    info = folder / _INFO
    if not info.exists():
        return
    pid = json.loads(info.read_text())["pid"]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + _STOP_SECONDS
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a child of ours that has exited is reaped here; another's is by its parent)."""
    try:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return False
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
