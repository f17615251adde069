"""A page's own address (a deep link) served so that a new tab asks the server where it is once, not twice.

Opened at /forward-pass, Streamlit's frontend first asks /forward-pass/_stcore/health and host-config, as if the
whole app were served under that path, and only after their 404 and a 100 ms wait asks / (streamlit/streamlit#7074,
open in Streamlit 1.67): ~130 ms of every new tab opened by a page's link (make bench prints it). The app knows its
pages' paths, so it serves those addresses itself: Streamlit's own index.html, with ``window.__streamlit``'s
``BACKEND_BASE_URL`` (the frontend's setting for a server at another address) set to the address without the page's
segment, the one base the frontend then asks. The base is read from the browser's address, so a proxy's prefix
(Streamlit Community Cloud's) stays in it. Any other path is Streamlit's as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from streamlit import file_util

# The address without its last segment: http://host/prefix/forward-pass -> http://host/prefix/
BASE_SCRIPT = ("<script>window.__streamlit = {BACKEND_BASE_URL: "
               "location.origin + location.pathname.replace(/[^/]*$/, '')};</script>")


@cache
def page_html() -> str:
    """Streamlit's index.html with BASE_SCRIPT first in its head (before the frontend's module reads the setting)."""
    html = (Path(file_util.get_static_dir()) / "index.html").read_text(encoding="utf-8")
    if "<head>" not in html:
        raise RuntimeError("Streamlit's index.html has no <head>: ui/deep_links.py needs updating for this release")
    return html.replace("<head>", "<head>" + BASE_SCRIPT, 1)


async def _page(_request: Request) -> HTMLResponse:
    return HTMLResponse(page_html(), headers={"Cache-Control": "no-cache"})  # as Streamlit serves its HTML


def deep_link_routes(url_paths: Iterable[str]) -> list[Route]:
    """GET (and HEAD) routes for the pages' ``url_paths`` (the home page's "" needs none: its base is its address)."""
    return [Route(f"/{path}", _page, methods=["GET"]) for path in url_paths if path]
