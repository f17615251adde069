"""HTTP messages as text: a request or response the way it crosses the socket, secrets redacted.

A request is anything with ``endpoint`` ("chat/completions" or "responses"), ``stream`` and
``to_payload()`` (a ``ChatRequest`` or a ``ResponsesRequest``).
"""

from __future__ import annotations

import http
import json
from typing import Mapping, Protocol, Sequence
from urllib.parse import urlsplit

from lifecycle.errors import LifecycleError
from lifecycle.stages.json_fields import shown

DEFAULT_BASE_URL = "http://localhost:8501/v1"
SECRET_HEADERS = ("authorization", "api-key", "x-api-key", "proxy-authorization", "cookie", "set-cookie")


class WireRequest(Protocol):
    endpoint: str
    stream: bool

    def to_payload(self) -> dict: ...


def redact_key(api_key: str | None) -> str:
    """What a page may show of a key: a short prefix for long keys, never enough to use or guess it."""
    if not api_key:
        return "<your API key>"
    return f"{api_key[:3]}…<redacted>" if len(api_key) >= 20 else "<redacted>"


def endpoint_url(base_url: str, endpoint: str = "chat/completions") -> tuple[str, str, str]:
    """(url, host, path) of ``endpoint`` under ``base_url``; user:password in the URL is dropped."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LifecycleError(
            f"Invalid base URL {shown(base_url)}: expected http(s)://host[:port]/path.", "base_url", "invalid_value"
        )
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    if ":" in parts.hostname:  # IPv6 literal
        host = f"[{parts.hostname}]" + ("" if parts.port is None else f":{parts.port}")
    path = parts.path.rstrip("/") + "/" + endpoint
    return f"{parts.scheme}://{host}{path}", host, path


def render_http_request(req: WireRequest, base_url: str = DEFAULT_BASE_URL, api_key: str | None = None) -> str:
    """The request as HTTP/1.1 text (lines shown with \\n; the wire uses \\r\\n), key redacted.

    The body is pretty-printed for reading and Content-Length is that body's byte length.
    """
    _, host, path = endpoint_url(base_url, req.endpoint)
    body = json.dumps(req.to_payload(), ensure_ascii=False, indent=2)
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}",
        f"Authorization: Bearer {redact_key(api_key)}",
        "Content-Type: application/json",
        f"Accept: {'text/event-stream' if req.stream else 'application/json'}",
        f"Content-Length: {len(body.encode('utf-8'))}",
        "",
        body,
    ]
    return "\n".join(lines)


def escape_control(text: str) -> str:
    """Text on one line: CR, LF and other control characters shown as escapes, never interpreted."""
    return "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii") for ch in text
    )


def render_http_response(
    status: int, headers: Mapping[str, str] | Sequence[tuple[str, str]], body: object
) -> str:
    """A response as HTTP/1.1 text: status line, headers (secrets redacted, escapes kept), body."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    lines = [f"HTTP/1.1 {status} {reason}".rstrip()]
    for name, value in pairs:
        redacted = "<redacted>" if name.lower() in SECRET_HEADERS else escape_control(str(value))
        lines.append(f"{escape_control(str(name))}: {redacted}")
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", errors="replace")
    if not isinstance(body, str):
        body = json.dumps(body, ensure_ascii=False, indent=2)
    return "\n".join(lines + ["", body])
