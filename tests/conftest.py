"""Shared fixtures: the real model, loaded once per test session, never from the network."""

import asyncio
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Calls made by tests (the API, the app's own runs) go to a throwaway log, not the user's.
os.environ.setdefault("LIFECYCLE_CALL_LOG", os.path.join(tempfile.mkdtemp(prefix="lifecycle-tests-"), "calls.sqlite3"))

import numpy as np
import pytest

from lifecycle.model import LoadedModel, shared_model


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
