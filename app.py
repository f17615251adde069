"""LLM Request Lifecycle: the Streamlit app and, in the same process, its OpenAI-compatible API.

``streamlit run app.py`` imports this module once as "app" to find the ASGI ``app`` (the pages
plus the API routes /v1/chat/completions, /v1/models and /health, /lifecycle/warm that fills
the pages' caches, and the pages' own addresses, ui/deep_links.py), then runs it as ``__main__``
for every browser session (the pages).
"""

import os

import streamlit as st

from lifecycle.api.routes import api_routes, default_server
from lifecycle.api.serving import before_pages_ready
from lifecycle.api.warm_route import warm_routes
from lifecycle.model import THREADS_ENV
from ui.deep_links import deep_link_routes
from ui.deployment import streamlit_secrets
from ui.settings import page_journey_input
from ui.stages import STAGES
from ui.warm_pages import import_views, prepare_pages

# The browser usually runs on the same machine (a laptop in a workshop): leave it a core, since
# oversubscribed OpenMP threads slow generation far more than one thread fewer does.
os.environ.setdefault(THREADS_ENV, str(max(1, (os.cpu_count() or 1) - 1)))


# API keys and settings may come from Streamlit secrets (secrets.toml) besides the environment.
_server = default_server(streamlit_secrets())
app = st.App("app.py", routes=[*warm_routes(_server, page_journey_input, prepare_pages), *api_routes(server=_server),
                               *deep_link_routes(page.route for page in STAGES)])

if __name__ == "__main__":
    from ui.frame import run_app

    run_app()
else:  # imported once by `streamlit run` to find the ASGI app
    before_pages_ready(import_views)
