"""Run the real app (app.py with its navigation and sidebar) under AppTest, on any page.

    from tests.pages.harness import run_page
    at = run_page("tokenization", prompt="Hello world")
    assert not at.exception

Settings go in as URL query parameters, exactly as a copied deep link would carry them.
"""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.stages import stage

APP = Path(__file__).resolve().parents[2] / "app.py"
# Generous: the first run in a test process loads the model, and pages may run it.
TIMEOUT = 180


def run_page(url_path: str = "", timeout: float = TIMEOUT, **settings: object) -> AppTest:
    """The app after opening ``url_path`` ("" = home) with ``settings`` as query parameters.

    Keyword names are the sidebar keys: prompt, system_prompt, history, temperature, top_p,
    top_k, min_p, repetition_penalty, max_tokens, seed, include_usage.
    """
    app = AppTest.from_file(APP, default_timeout=timeout)
    app.query_params.update({key: _query_value(value) for key, value in settings.items()})
    if url_path:
        app.switch_page(stage(url_path).script)  # the first run opens this page, like a deep link
    return app.run()


def _query_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def texts(app: AppTest) -> list[str]:
    """Every st.text value on the page (where user text and model output are shown)."""
    return [element.value for element in app.text]
