"""Nagle's algorithm off on every connection the app's server accepts (uvicorn issue #3149).

Streamlit binds its listening socket itself (``socket.socket(family)``: protocol number 0) and hands it to
uvicorn; asyncio turns ``TCP_NODELAY`` on only for sockets that report ``IPPROTO_TCP``, so each accepted
connection keeps Nagle's algorithm. On a keep-alive connection (the openai SDK's, a browser's) every answer
after the first then waits for the client's delayed ACK: ~40 ms on Linux (measured here: 44 ms per ``/health``
call on one connection, 0.9 ms on a new connection each time). Turning ``TCP_NODELAY`` on as each connection is
made gives what asyncio means to give.
"""

from __future__ import annotations

import socket

_MARK = "_lifecycle_nodelay"


def nagle_off(transport) -> None:
    """``TCP_NODELAY`` on the TCP socket under an asyncio transport (a Unix socket has no Nagle to turn off)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def nagle_off_for_uvicorn() -> None:
    """Wrap uvicorn's HTTP protocols' ``connection_made`` (a websocket starts as one of them, so it is covered
    too); calling it again changes nothing."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    protocols = [H11Protocol]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional: uvicorn then speaks HTTP with h11 alone
        pass
    else:
        protocols.append(HttpToolsProtocol)
    for protocol in protocols:
        if getattr(protocol.connection_made, _MARK, False):
            continue
        made = protocol.connection_made

        def connection_made(self, transport, made=made) -> None:
            nagle_off(transport)
            made(self, transport)

        setattr(connection_made, _MARK, True)
        protocol.connection_made = connection_made
