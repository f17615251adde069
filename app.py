"""LLM Request Lifecycle: the Streamlit app and, in the same process, its OpenAI-compatible API.

``streamlit run app.py`` imports this module once as "app" to find the ASGI ``app`` (the pages
plus the API routes /v1/chat/completions, /v1/models and /health, and /lifecycle/warm that fills
the pages' caches), then runs it as ``__main__``
for every browser session (the pages).
"""

import os

import streamlit as st

from lifecycle.model import THREADS_ENV
from lifecycle.serving import start_model_loading
from ui.deployment import streamlit_secrets

# The browser usually runs on the same machine (a laptop in a workshop): leave it a core, since
# oversubscribed OpenMP threads slow generation far more than one thread fewer does.
os.environ.setdefault(THREADS_ENV, str(max(1, (os.cpu_count() or 1) - 1)))
# API keys and settings may come from Streamlit secrets (secrets.toml) besides the environment;
# reading them puts their top-level keys (LIFECYCLE_MODEL on Cloud) into the environment, so
# they come before the model starts loading, which happens before the pages' and the API's
# modules are imported, so the two overlap.
_secrets = streamlit_secrets()
start_model_loading()

from lifecycle.server.routes import api_routes, default_server  # noqa: E402
from ui.warm import warm_routes  # noqa: E402

_server = default_server(_secrets)
app = st.App("app.py", routes=[*warm_routes(_server), *api_routes(server=_server)])

if __name__ == "__main__":
    from ui.frame import run_app

    run_app()
