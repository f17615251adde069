"""How this server is deployed, as the pages need it: its secrets, whether it listens on localhost
only, and therefore where "Send it for real" may go and who reads which calls."""

from __future__ import annotations

import os

import streamlit as st

from lifecycle.api.outbound import OUTBOUND_ENV, OutboundPolicy

LOCAL_ADDRESSES = {"localhost", "127.0.0.1", "::1", "[::1]"}


def streamlit_secrets() -> dict:
    """Streamlit secrets (secrets.toml, or the Cloud app's Secrets box) as a plain dict; {} without any."""
    try:
        return dict(st.secrets)
    except Exception:  # noqa: BLE001 - no or unreadable secrets.toml: the environment alone configures the app
        return {}


def local_only() -> bool:
    """True when the server listens on localhost alone (``--server.address localhost``)."""
    return str(st.get_option("server.address") or "").strip().lower() in LOCAL_ADDRESSES


def own_port() -> int:
    return int(st.get_option("server.port") or 8501)


def outbound_policy() -> OutboundPolicy:
    """Where this server may send a visitor's request: ``LIFECYCLE_OUTBOUND_ALLOW`` or the default."""
    setting = os.environ.get(OUTBOUND_ENV) or streamlit_secrets().get(OUTBOUND_ENV)
    return OutboundPolicy.from_setting(str(setting or ""), local_only(), own_ports={own_port()})
