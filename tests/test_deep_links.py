"""The pages' own addresses serve Streamlit's HTML with the base set first (ui/deep_links.py); the browser's side (one
health check, at the root) is tests/browser/test_legibility.py's."""

from pathlib import Path

from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit import file_util

from ui.deep_links import BASE_SCRIPT, deep_link_routes
from ui.stages import STAGES


def _client() -> TestClient:
    return TestClient(Starlette(routes=deep_link_routes(page.route for page in STAGES)))


def test_every_page_address_serves_streamlits_html_with_the_base_before_the_frontend():
    streamlit_html = (Path(file_util.get_static_dir()) / "index.html").read_text(encoding="utf-8")
    with _client() as client:
        for page in STAGES:
            reply = client.get(f"/{page.url_path}?prompt=Hi")
            assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
            assert reply.headers["cache-control"] == "no-cache"
            html = reply.text
            assert html.index(BASE_SCRIPT) < html.index('<script type="module"')  # set before the frontend reads it
            assert html.replace(BASE_SCRIPT, "", 1) == streamlit_html
            assert client.head(f"/{page.url_path}").status_code == 200


def test_only_the_pages_are_served_and_the_home_page_is_left_to_streamlit():
    assert deep_link_routes(["", "forward-pass"])[0].path == "/forward-pass"
    with _client() as client:
        assert client.get("/").status_code == 404
        assert client.get("/forward-pass/_stcore/health").status_code == 404
        assert client.get("/no-such-page").status_code == 404
