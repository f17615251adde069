"""Fixtures for page tests: ``run_page`` opens any page of the real app under AppTest."""

import pytest

from tests.pages.harness import run_page as _run_page


@pytest.fixture
def run_page():
    """``run_page(url_path="", **settings) -> AppTest``; see tests/pages/harness.py."""
    return _run_page
