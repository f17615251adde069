"""Shared fixtures: the real model, loaded once per test session, never from the network."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

from lifecycle.model import LoadedModel, shared_model


@pytest.fixture(scope="session")
def loaded() -> LoadedModel:
    """The real SmolLM2-135M-Instruct, shared by every test like the app shares it across sessions."""
    return shared_model()
