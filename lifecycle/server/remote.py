"""The real wire to any OpenAI-compatible server: send one chat-completions request, record it raw.

Given a base URL (``https://api.openai.com/v1``, ``http://localhost:8501/v1``, a vLLM or llama.cpp
server...) the request is sent with httpx and the exchange is kept as it happened: the status,
the response headers, and for a stream every server-sent event with the time it arrived. The API
key is only a function argument: it goes into the ``Authorization`` header and nowhere else (the
recorded request headers show it redacted; it is never logged, stored or put in the URL).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from lifecycle.errors import LifecycleError
from lifecycle.stream import delta_content

REDACTED = "Bearer ***"
# A stream or body beyond this is cut off (and says so): a misbehaving server cannot exhaust memory.
MAX_RECORDED_BYTES = 2 * 1024 * 1024


@dataclass
class SseFrame:
    """One server-sent event as received: its raw lines, the parsed JSON (None for ``[DONE]`` or
    non-JSON data) and the seconds since the request was sent."""

    at: float
    raw: str
    data: dict | None


@dataclass
class RemoteExchange:
    """One real request/response. ``error`` is set when no HTTP response arrived (network, timeout)."""

    url: str
    request_headers: dict[str, str]
    request_body: dict
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    body: str = ""  # the raw body of a non-streamed (or error) response
    frames: list[SseFrame] = field(default_factory=list)
    seconds: float = 0.0
    truncated: bool = False
    error: str | None = None

    @property
    def streamed(self) -> bool:
        return bool(self.frames)

    @property
    def ttft(self) -> float | None:
        """Seconds until the first frame carrying content."""
        return next((f.at for f in self.frames if delta_content(f.data)), None)

    @property
    def text(self) -> str:
        """The answer: joined content deltas of a stream, or the message of a JSON response."""
        if self.frames:
            return "".join(delta_content(f.data) for f in self.frames)
        try:
            return json.loads(self.body)["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            return ""


def completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions``, after checking the base URL is a plain http(s) URL."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LifecycleError(f"base URL must start with http:// or https://, got {base_url!r}", param="base_url")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise LifecycleError(
            "base URL must not carry credentials, a query or a fragment (the key goes in a header)",
            param="base_url",
        )
    return base_url.strip().rstrip("/") + "/chat/completions"


def send_chat_completion(
    base_url: str,
    payload: dict,
    api_key: str | None = None,
    timeout: float = 60.0,
) -> RemoteExchange:
    """POST ``payload`` to ``{base_url}/chat/completions`` and record the exchange raw.

    Streams (``payload["stream"]`` true) are read event by event with a timestamp per event.
    HTTP errors are recorded, not raised; only a malformed base URL raises LifecycleError.
    """
    url = completions_url(base_url)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
    shown = {**headers, "Authorization": REDACTED} if api_key else dict(headers)
    exchange = RemoteExchange(url, shown, payload)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    started = time.perf_counter()
    try:
        with httpx.Client(timeout=timeout) as client, client.stream("POST", url, json=payload, headers=headers) as response:
            exchange.status = response.status_code
            exchange.response_headers = list(response.headers.multi_items())
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                _read_events(response, exchange, started)
            else:
                _read_body(response, exchange)
    except httpx.HTTPError as error:
        exchange.error = f"{type(error).__name__}: {error}"
    exchange.seconds = time.perf_counter() - started
    return exchange


def _read_body(response: httpx.Response, exchange: RemoteExchange) -> None:
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RECORDED_BYTES:
            exchange.truncated = True
            break
    exchange.body = b"".join(chunks).decode("utf-8", errors="replace")


def _read_events(response: httpx.Response, exchange: RemoteExchange, started: float) -> None:
    lines: list[str] = []
    size = 0
    for line in response.iter_lines():
        size += len(line) + 1
        if size > MAX_RECORDED_BYTES:
            exchange.truncated = True
            break
        if line:
            lines.append(line)
            continue
        if lines:
            exchange.frames.append(_frame(lines, time.perf_counter() - started))
            lines = []
    if lines and not exchange.truncated:
        exchange.frames.append(_frame(lines, time.perf_counter() - started))


def _frame(lines: list[str], at: float) -> SseFrame:
    data = "\n".join(line[5:].lstrip(" ") for line in lines if line.startswith("data:"))
    try:
        parsed = json.loads(data) if data and data != "[DONE]" else None
    except ValueError:
        parsed = None
    return SseFrame(at, "\n".join(lines), parsed if isinstance(parsed, dict) else None)
