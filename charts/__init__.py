"""Plotly figure builders: plain data in, ``go.Figure`` out. No Streamlit import, so they test without a page."""
