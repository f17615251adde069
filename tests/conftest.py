"""Shared fixtures: the real model, loaded once per test session, never from the network."""

import asyncio
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Calls made by tests (the API, the app's own runs) go to a throwaway log, not the user's. Under
# pytest-xdist (pytest.ini runs two workers) each worker process gets a log of its own: the one the
# controller made is inherited by both, and a page counting its calls must not see the other worker's.
_OWN_LOG = "LIFECYCLE_TESTS_OWN_CALL_LOG"
if "LIFECYCLE_CALL_LOG" not in os.environ or (os.environ.get(_OWN_LOG) and os.environ.get("PYTEST_XDIST_WORKER")):
    os.environ[_OWN_LOG] = "1"
    os.environ["LIFECYCLE_CALL_LOG"] = os.path.join(tempfile.mkdtemp(prefix="lifecycle-tests-"), "calls.sqlite3")

import numpy as np
import pytest

from lifecycle.model import LoadedModel, shared_model
from tests.browser.shared_app import SHARED_DIR_ENV, stop_shared_app

# The xdist workers share the machine's cores: each runs PyTorch on its share, or their OpenMP
# threads wait on each other (see lifecycle/model.py's _set_torch_threads). The app servers the browser
# tests start are not affected (they set their own, as `make run` does).
if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("LIFECYCLE_TORCH_THREADS"):
    import torch

    from lifecycle.engine import scheduler

    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _workers))
    # A class's steps too (more requests than scheduler.ROOM_REQUESTS, e.g. the Agent page's injection measurement):
    # the app runs them on every core, which here puts two OpenMP threads of a worker on cores the others are using.
    # Measured with one core kept busy, the Agent page's test took 47 s of CPU so against 30 s on the worker's share.
    # This process's engines only: the app servers the browser tests start keep the app's own setting.
    _engine_init = scheduler.Engine.__init__

    def _on_the_workers_share(self, *args, **kwargs) -> None:
        _engine_init(self, *args, **kwargs)
        self.room_threads = self.threads

    scheduler.Engine.__init__ = _on_the_workers_share


_shared_dir_made_here: Path | None = None


def pytest_configure(config) -> None:
    """The folder the run's workers share (the browser tests' one app server: tests/browser/shared_app.py), made by
    the controller before it starts the workers, which inherit its environment."""
    global _shared_dir_made_here
    if SHARED_DIR_ENV not in os.environ:
        _shared_dir_made_here = Path(tempfile.mkdtemp(prefix="lifecycle-tests-shared-"))
        os.environ[SHARED_DIR_ENV] = str(_shared_dir_made_here)


def pytest_unconfigure(config) -> None:
    """After every worker has finished: stop the shared app server, if a browser test started one."""
    if _shared_dir_made_here is not None:
        stop_shared_app(_shared_dir_made_here)
        shutil.rmtree(_shared_dir_made_here, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist) pytest would refuse an unknown hook
def pytest_xdist_make_scheduler(config, log):
    """Whole modules go to one worker (their module-scoped fixtures, e.g. a page run many tests read, are
    computed once; MODULES_KEPT_TOGETHER go as one), except browser tests, which share only session fixtures (the
    run's app server, the worker's chromium) and go one by one, so the long browser modules spread over the workers."""
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndBrowserTests(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module.startswith("tests/browser/") and module not in BROWSER_MODULES_KEPT_TOGETHER:
                return nodeid
            return MODULES_KEPT_TOGETHER.get(module, module)

    return ModulesAndBrowserTests(config, log)


# Browser modules with a module-scoped fixture (built once per worker that runs the module's tests).
BROWSER_MODULES_KEPT_TOGETHER = {"tests/browser/test_handout.py"}
# Modules that open the same costly page, so that the second finds the first's results in the worker's caches: the
# Agent page's loop, its injection measurement (the same for every prompt: ~13 s of CPU) and temperature 0's roads
# (test_frame.py opens every page, the Agent page too, for their question: 28 s in a worker of its own;
# test_picture_first.py opens the pages with details for the same question; test_warm.py's warm call prepares the
# Agent page for a prompt of its own, and finds the injection measurement already made).
# The truth tests of the three prompts, the 1,007-token one among them: the Handout and Live calls modules find the
# prompts' pages computed by test_truth.py (the long prompt's handout: 15.2 s alone, 1.8 s after it), and the KV
# cache page's module its sweep and turns for one of them (16.7 s alone).
MODULES_KEPT_TOGETHER = {
    **{module: "agent pages" for module in ("tests/pages/test_agent_page.py", "tests/pages/test_truth_agent.py",
                                            "tests/pages/test_frame.py", "tests/pages/test_picture_first.py",
                                            "tests/test_warm.py")},
    **{module: "truth of three prompts" for module in ("tests/pages/test_truth.py", "tests/pages/test_truth_handout.py",
                                                       "tests/pages/test_truth_live_calls.py",
                                                       "tests/pages/test_kv_cache_page.py")},
}


@pytest.fixture(scope="session")
def loaded() -> LoadedModel:
    """The real SmolLM2-135M-Instruct, shared by every test like the app shares it across sessions."""
    return shared_model()


@pytest.fixture(scope="session")
def logits(loaded) -> np.ndarray:
    """The real next-token logits after "Once upon a time, there was a" (a wide, natural distribution)."""
    import torch

    with loaded.tokenizer_lock:
        ids = loaded.tokenizer("Once upon a time, there was a", add_special_tokens=False)["input_ids"]
    from lifecycle.engine import shared_engine

    def job(model):
        with torch.inference_mode():
            return model(torch.tensor([ids])).logits[0, -1].float().numpy()

    return shared_engine(loaded).run(job)


def run_coroutine(coroutine):
    """Run ``coroutine`` to the end in a thread of its own: an earlier test may have left an event
    loop running in this one, and asyncio.run refuses to start inside a running loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
