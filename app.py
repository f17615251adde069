"""LLM Request Lifecycle: the Streamlit app and, in the same process, its HTTP API.

``streamlit run app.py`` imports this module once as "app" to find the ASGI ``app`` (the API
routes), then runs it as ``__main__`` for every browser session (the pages).
"""

import streamlit as st

app = st.App("app.py", routes=[])

if __name__ == "__main__":
    from ui.frame import run_app

    run_app()
