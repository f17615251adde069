"""The Streamlit side of the app: the journey's page registry, the shared settings and the page frame.

Everything that imports ``streamlit`` lives here or in ``views/``; the stages themselves are
computed by ``lifecycle`` and drawn by ``charts``.
"""
