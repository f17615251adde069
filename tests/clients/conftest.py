"""Real third-party clients against the in-process API server (each module starts its own).

Nothing here may reach past this machine: a client that tries (a price map, telemetry, a tokenizer
download) fails its test instead of quietly depending on the network.
"""

from __future__ import annotations

import ipaddress
import socket

import pytest


def _loopback(address) -> bool:
    if isinstance(address, str):  # AF_UNIX
        return True
    host = address[0]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@pytest.fixture(autouse=True, scope="module")
def only_loopback():
    """Refuse every socket connection from this process that is not to a loopback address."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(address):
        if not _loopback(address):
            raise AssertionError(f"a client tried to reach {address!r}: tests must not use the network")

    def connect(self, address):
        guard(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        guard(address)
        return real_connect_ex(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        yield
