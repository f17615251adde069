"""The real wire to an OpenAI-compatible server: send one chat-completions request, record it raw,
going only where the operator allows.

Given a base URL (``https://api.openai.com/v1``, this app's own ``/v1``, a vLLM or llama.cpp
server...) the request is sent with httpx and the exchange is kept as it happened: the status,
the response headers, and for a stream every server-sent event with the time it arrived.

A visitor types the URL, and the *server* makes the request, so an ``OutboundPolicy`` decides
where it may go: every address the host name resolves to is checked, and the connection goes to
the address that was checked (no second lookup a DNS answer could change). Public addresses are
allowed; loopback and private ones only where the operator allows them; link-local and cloud
metadata addresses never. Redirects are not followed, one deadline bounds the whole exchange, and
the bytes recorded and the length of one line are capped. The API key goes into the
``Authorization`` header and nowhere else (never logged, stored or put in the URL).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from lifecycle.errors import LifecycleError
from lifecycle.stages.streaming import delta_content

if TYPE_CHECKING:
    import httpx

REDACTED = "Bearer ***"
OUTBOUND_ENV = "LIFECYCLE_OUTBOUND_ALLOW"
# A misbehaving server cannot exhaust memory or hold a thread: bytes, one line and time are capped.
MAX_RECORDED_BYTES = 2 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
DEADLINE_SECONDS = 30.0

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# Never reachable, whatever the operator allows: cloud metadata services sit on link-local addresses.
_METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")}
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "::1/128", "fc00::/7",
))


@dataclass(frozen=True)
class OutboundPolicy:
    """Where the server may send a visitor's request besides public internet hosts.

    ``allowed``: loopback/private networks the operator allows. ``own_ports``: ports of this app's
    own server, reachable on loopback always (its API checks keys like any other).
    """

    allowed: tuple[IpNetwork, ...] = ()
    own_ports: frozenset[int] = frozenset()

    @classmethod
    def from_setting(cls, value: str | None, local_only: bool, own_ports: Iterable[int] = ()) -> OutboundPolicy:
        """``LIFECYCLE_OUTBOUND_ALLOW``: "private" (every loopback and private range), "none", or
        networks such as "127.0.0.1/32,10.1.0.0/16". Unset: "private" for a server listening on
        localhost only, else "none"."""
        text = (value or "").strip().lower() or ("private" if local_only else "none")
        if text == "none":
            return cls((), frozenset(own_ports))
        if text == "private":
            return cls(PRIVATE_NETWORKS, frozenset(own_ports))
        try:
            networks = tuple(ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part.strip())
        except ValueError as error:
            raise LifecycleError(f"{OUTBOUND_ENV} must be 'private', 'none' or networks like 10.0.0.0/8: {error}",
                                 param=OUTBOUND_ENV) from error
        return cls(networks, frozenset(own_ports))

    def refusal(self, address: IpAddress, port: int) -> str | None:
        """Why ``address:port`` may not be reached ("a loopback address; ..."), or None when it may."""
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in _NAT64:
            address = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address in _METADATA or address.is_link_local:
            return "a link-local address (where cloud metadata services live), never reachable from this server"
        if address.is_multicast or address.is_unspecified or (address.is_reserved and not address.is_loopback):
            return "not a unicast host address"
        if address.is_global:
            return None
        if address.is_loopback and port in self.own_ports:
            return None
        if any(address in network for network in self.allowed if network.version == address.version):
            return None
        kind = "loopback" if address.is_loopback else "private"
        return f"a {kind} address; this server sends requests there only when its operator allows it ({OUTBOUND_ENV})"


@dataclass
class SseFrame:
    """One server-sent event as received: its raw lines, the parsed JSON (None for ``[DONE]`` or
    non-JSON data) and the seconds since the request was sent."""

    at: float
    raw: str
    data: dict | None


@dataclass
class RemoteExchange:
    """One real request/response. ``error`` is set when no HTTP response arrived (network, timeout);
    ``stopped`` says why the response was not read to its end (a cap, the deadline, a redirect)."""

    url: str
    request_headers: dict[str, str]
    request_body: dict
    address: str | None = None  # the checked address the connection went to
    status: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    body: str = ""  # the raw body of a non-streamed (or error) response
    frames: list[SseFrame] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str | None = None
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
        raise LifecycleError(f"base URL must start with http:// or https://, got {base_url[:100]!r}", param="base_url")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise LifecycleError(
            "base URL must not carry credentials, a query or a fragment (the key goes in a header)",
            param="base_url",
        )
    try:
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError as error:
        raise LifecycleError(f"base URL has a bad port: {error}", param="base_url") from error
    return base_url.strip().rstrip("/") + "/chat/completions"


Resolver = Callable[..., list]


def checked_address(url: str, policy: OutboundPolicy, resolve: Resolver = socket.getaddrinfo) -> IpAddress:
    """The address to connect to for ``url``: every address its host resolves to must be allowed.

    Raises LifecycleError (code "outbound_refused") with a one-line reason otherwise."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise LifecycleError(f"Refused: the host name {host[:100]!r} does not resolve ({error}).",
                             param="base_url", code="outbound_refused") from error
    addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in found))
    if not addresses:
        raise LifecycleError(f"Refused: the host name {host[:100]!r} has no address.", param="base_url",
                             code="outbound_refused")
    for address in addresses:
        reason = policy.refusal(address, port)
        if reason is not None:
            said = f"{address} is" if host == str(address) else f"{host[:100]} resolves to {address},"
            raise LifecycleError(f"Refused: {said} {reason}.", param="base_url", code="outbound_refused")
    return addresses[0]


def send_chat_completion(
    base_url: str,
    payload: dict,
    api_key: str | None = None,
    policy: OutboundPolicy | None = None,
    deadline: float = DEADLINE_SECONDS,
    resolve: Resolver = socket.getaddrinfo,
) -> RemoteExchange:
    """POST ``payload`` to ``{base_url}/chat/completions`` and record the exchange raw.

    Streams (``payload["stream"]`` true) are read event by event with a timestamp per event.
    HTTP errors are recorded, not raised; a malformed base URL or a destination the policy refuses
    raises LifecycleError before anything is sent. ``deadline`` bounds the whole exchange.
    """
    import httpx  # here, not at the top: the app imports this module at start, and httpx costs ~0.1 s

    url = completions_url(base_url)
    address = checked_address(url, policy or OutboundPolicy(), resolve)
    parts = urlsplit(url)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
    shown = {**headers, "Authorization": REDACTED} if api_key else dict(headers)
    exchange = RemoteExchange(url, shown, payload, address=str(address))
    headers["Host"] = parts.netloc
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    literal = f"[{address}]" if address.version == 6 else str(address)
    pinned = parts._replace(netloc=f"{literal}:{parts.port}" if parts.port else literal).geturl()
    started = time.monotonic()
    client = httpx.Client(timeout=httpx.Timeout(deadline, connect=min(5.0, deadline)), follow_redirects=False,
                          trust_env=False)
    # One deadline for the whole exchange: a server that answers a byte at a time is cut off by closing the
    # connection under the blocked read.
    watchdog = threading.Timer(deadline, client.close)
    watchdog.start()
    try:
        with client, client.stream(
            "POST", pinned, json=payload, headers=headers, extensions={"sni_hostname": parts.hostname},
        ) as response:
            exchange.status = response.status_code
            exchange.response_headers = list(response.headers.multi_items())
            if response.is_redirect:
                location = response.headers.get("location", "")[:200]
                exchange.stopped = f"The server redirected to {location!r}; redirects are not followed."
            elif response.headers.get("content-type", "").startswith("text/event-stream"):
                _read_events(response, exchange, started, deadline)
            else:
                _read_body(response, exchange, started, deadline)
    except (httpx.HTTPError, RuntimeError) as error:  # RuntimeError: the watchdog closed the client mid-read
        if time.monotonic() - started >= deadline:
            exchange.stopped = f"The answer took longer than {deadline:g} s; the rest was not read."
            if exchange.status is None:
                exchange.error = f"No answer within {deadline:g} s."
        else:
            exchange.error = f"{type(error).__name__}: {str(error)[:300]}"
    finally:
        watchdog.cancel()
    exchange.seconds = time.monotonic() - started
    return exchange


def _chunks(response: httpx.Response, exchange: RemoteExchange, started: float, deadline: float):
    """The raw body in chunks until it ends, the byte cap is reached or the deadline passes."""
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_RECORDED_BYTES:
            exchange.stopped = f"The answer passed {MAX_RECORDED_BYTES // 1024:,} KiB; the rest was not read."
            yield chunk[: len(chunk) - (size - MAX_RECORDED_BYTES)]
            return
        yield chunk
        if time.monotonic() - started > deadline:
            exchange.stopped = f"The answer took longer than {deadline:g} s; the rest was not read."
            return


def _read_body(response: httpx.Response, exchange: RemoteExchange, started: float, deadline: float) -> None:
    exchange.body = b"".join(_chunks(response, exchange, started, deadline)).decode("utf-8", errors="replace")


def _read_events(response: httpx.Response, exchange: RemoteExchange, started: float, deadline: float) -> None:
    lines: list[str] = []
    pending = b""
    for chunk in _chunks(response, exchange, started, deadline):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if line:
                lines.append(line)
            elif lines:
                exchange.frames.append(_frame(lines, time.monotonic() - started))
                lines = []
        if len(pending) > MAX_LINE_BYTES:
            exchange.stopped = f"A line passed {MAX_LINE_BYTES // 1024} KiB without ending; the rest was not read."
            return
    if pending.strip():
        lines.append(pending.rstrip(b"\r").decode("utf-8", errors="replace"))
    if lines and exchange.stopped is None:
        exchange.frames.append(_frame(lines, time.monotonic() - started))


def _frame(lines: list[str], at: float) -> SseFrame:
    data = "\n".join(line[5:].lstrip(" ") for line in lines if line.startswith("data:"))
    try:
        parsed = json.loads(data) if data and data != "[DONE]" else None
    except ValueError:
        parsed = None
    return SseFrame(at, "\n".join(lines), parsed if isinstance(parsed, dict) else None)
