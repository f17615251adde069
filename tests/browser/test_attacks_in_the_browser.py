"""Hostile Markdown and HTML in paths, headers, prompts and model names, checked in a real browser's DOM:
no <a> or <img> points at the attacker's host and no script runs. Part of tests/test_attacks.py's promises."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.browser.app_page import main_text, open_page, present_key
from tests.browser.test_api_in_app import _wait_ready
from tests.test_attacks import EVIL, HOSTILE

pytestmark = pytest.mark.browser


def _links_and_images(page) -> list[str]:
    """Every <a href> and <img src> in the page whose target is the attacker's host (where it is)."""
    return page.evaluate(
        "() => [...document.querySelectorAll('a[href], img[src]')]"
        ".filter(e => new URL(e.href || e.src, location.href).hostname.endsWith('evil.example'))"
        ".map(e => (e.href || e.src) + ' in ' + e.closest('[data-testid]')?.getAttribute('data-testid'))"
    )


def test_markdown_in_paths_headers_prompts_and_model_names_stays_text(app_url, api_key, page):
    assert _wait_ready(app_url)[-1] == 200
    headers = {"Authorization": f"Bearer {api_key}", "User-Agent": HOSTILE}
    path = httpx.get(f"{app_url}/v1/[x]({EVIL}/path)%3Cimg%20src=x%3E", headers=headers)
    assert path.status_code == 404
    model = httpx.post(f"{app_url}/v1/chat/completions", headers=headers,
                       json={"model": f"[m]({EVIL}/model)", "messages": [{"role": "user", "content": "hi"}]})
    assert model.status_code == 404
    sdk = openai.OpenAI(base_url=f"{app_url}/v1", api_key=api_key, max_retries=0, timeout=300,
                        default_headers={"User-Agent": HOSTILE})
    served = httpx.get(f"{app_url}/health").json()["model"]
    prompt = sdk.chat.completions.with_raw_response.create(
        model=served, messages=[{"role": "user", "content": HOSTILE}], max_tokens=2, temperature=0)
    ids = [path.headers["x-request-id"], model.headers["x-request-id"], prompt.headers["x-request-id"]]

    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_page(page, app_url, "live-calls")
    present_key(page, api_key)
    for call_id in ids:
        open_page(page, app_url, "live-calls", call=call_id)
        present_key(page, api_key)
        shown = main_text(page)
        assert f"The journey of {call_id}" in shown, shown[:3000]
        assert _links_and_images(page) == [], call_id
    assert "evil.example" in shown and dialogs == []

    open_page(page, app_url, "request", prompt=HOSTILE)
    assert _links_and_images(page) == [] and dialogs == []
    open_page(page, app_url, "detokenization", prompt=f"Repeat exactly: {HOSTILE}")
    assert _links_and_images(page) == [] and dialogs == []


