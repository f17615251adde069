"""Stage 1, the request: the chat-completions call a client sends, validated and shown on the wire.

``validate_request`` checks arbitrary decoded JSON with the OpenAI API's rules and raises a
``LifecycleError`` naming the parameter; the HTTP API uses it for every incoming body.
``chat_request`` builds a request from the app's settings. The renderers show the same request
as raw HTTP, curl, Python (openai SDK) and JavaScript (openai npm SDK) without ever showing an
API key, and ``build_response`` gives the ``chat.completion`` object a client receives back.
"""

from __future__ import annotations

import http
import json
import math
import pprint
import secrets
import shlex
import string
import textwrap
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence
from urllib.parse import urlsplit

from lifecycle.errors import LifecycleError
from lifecycle.model import model_name

ROLES = ("system", "user", "assistant", "tool")
# OpenAI's newer name for the system role; accepted and stored as "system" (the ChatML template
# of the local model only knows system/user/assistant/tool).
ROLE_ALIASES = {"developer": "system"}
FINISH_REASONS = ("stop", "length", "content_filter", "tool_calls", "cancelled")
MAX_STOP_SEQUENCES = 4
MAX_TOP_LOGPROBS = 20
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
DEFAULT_BASE_URL = "http://localhost:8501/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MAX_TOKENS = 128
# Fields the openai SDKs do not know as keyword arguments: the Python snippet sends them in extra_body.
EXTENSIONS = ("top_k", "min_p", "repetition_penalty")
_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass
class ChatRequest:
    """One validated chat-completions request. ``max_tokens`` None means "as many as fit"."""

    model: str
    messages: list[dict]
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    stream: bool = False
    stream_options: dict | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    n: int = 1
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: bool = False
    top_logprobs: int | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.get("include_usage"))

    def to_payload(self) -> dict:
        """The JSON body a client sends: required fields, the common ones, and anything non-default."""
        payload: dict = {
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        payload["stream"] = self.stream
        optional = {
            "stream_options": (self.stream_options, None),
            "seed": (self.seed, None),
            "stop": (list(self.stop), []),
            "n": (self.n, 1),
            "presence_penalty": (self.presence_penalty, 0.0),
            "frequency_penalty": (self.frequency_penalty, 0.0),
            "logprobs": (self.logprobs, False),
            "top_logprobs": (self.top_logprobs, None),
            "top_k": (self.top_k, 0),
            "min_p": (self.min_p, 0.0),
            "repetition_penalty": (self.repetition_penalty, 1.0),
        }
        payload.update({name: value for name, (value, default) in optional.items() if value != default})
        return payload

    def wire_body(self) -> bytes:
        """The body exactly as the openai Python SDK (httpx) puts it on the wire: compact UTF-8 JSON."""
        return json.dumps(self.to_payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# --- validation -------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _invalid_type(param: str, expected: str, value: object) -> LifecycleError:
    return LifecycleError(
        f"Invalid type for '{param}': expected {expected}, but got {_type_name(value)} instead.",
        param=param,
        code="invalid_type",
    )


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an integer too long for str() (Python's 4300-digit limit)
        return "a very large integer"
    return text if len(text) <= 40 else text[:37] + "..."


def _number(
    payload: Mapping, param: str, default: float, low: float, high: float, *, low_open: bool = False
) -> float:
    """A finite number in [low, high] (or (low, high] when ``low_open``); bools are not numbers."""
    value = payload.get(param)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _invalid_type(param, "a number", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise LifecycleError(f"Invalid '{param}': expected a finite number, got {value}.", param, "invalid_value")
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        bracket = "(" if low_open else "["
        raise LifecycleError(
            f"Invalid '{param}': expected a value in {bracket}{low:g}, {high:g}], got {_shown(value)}.",
            param=param,
            code="decimal_below_min_value" if too_low else "decimal_above_max_value",
        )
    return float(value)


def _integer(payload: Mapping, param: str, low: int, high: int = INT64_MAX) -> int | None:
    value = payload.get(param)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(param, "an integer", value)
    if value < low or value > high:
        raise LifecycleError(
            f"Invalid '{param}': expected an integer in [{low}, {high}], got {_shown(value)}.",
            param=param,
            code="integer_below_min_value" if value < low else "integer_above_max_value",
        )
    return value


def _boolean(payload: Mapping, param: str) -> bool:
    value = payload.get(param)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _invalid_type(param, "a boolean", value)
    return value


def _content(message: Mapping, where: str) -> str:
    """A message's text: a string, or an array of text parts joined by newlines (text-only model)."""
    param = f"{where}.content"
    if "content" not in message:
        raise LifecycleError(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
    content = message["content"]
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid_type(param, "a string or an array of text parts", content)
    texts = []
    for index, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            raise LifecycleError(
                f"Invalid '{param}[{index}]': this model accepts only text parts "
                '({"type": "text", "text": "..."}).',
                param=f"{param}[{index}]",
                code="invalid_value",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _message(message: object, index: int) -> dict:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _invalid_type(where, "an object with 'role' and 'content'", message)
    if "role" not in message:
        raise LifecycleError(
            f"Missing required parameter: '{where}.role'.", f"{where}.role", "missing_required_parameter"
        )
    role = message["role"]
    if not isinstance(role, str):
        raise _invalid_type(f"{where}.role", "a string", role)
    role = ROLE_ALIASES.get(role, role)
    if role not in ROLES:
        raise LifecycleError(
            f"Invalid value for '{where}.role': {_shown(role)}. Supported values are: "
            + ", ".join(f"'{r}'" for r in ROLES + tuple(ROLE_ALIASES)) + ".",
            param=f"{where}.role",
            code="invalid_value",
        )
    content = _content(message, where)
    if role == "user" and not content.strip():
        raise LifecycleError(
            f"Invalid '{where}.content': a user message must not be empty or whitespace only.",
            param=f"{where}.content",
            code="empty_content",
        )
    return {"role": role, "content": content}


def _messages(payload: Mapping) -> list[dict]:
    if "messages" not in payload:
        raise LifecycleError("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
    messages = payload["messages"]
    if not isinstance(messages, list):
        raise _invalid_type("messages", "an array of messages", messages)
    if not messages:
        raise LifecycleError(
            "Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages", "empty_array"
        )
    return [_message(message, index) for index, message in enumerate(messages)]


def _model(payload: Mapping, known_models: Sequence[str] | None) -> str:
    model = payload.get("model")
    if model is None:
        raise LifecycleError("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    if not isinstance(model, str) or not model.strip():
        raise _invalid_type("model", "a non-empty string", model)
    if known_models is not None and model not in known_models:
        raise LifecycleError(
            f"The model {_shown(model)} does not exist or you do not have access to it.", "model", "model_not_found"
        )
    return model


def _stop(payload: Mapping) -> list[str]:
    stop = payload.get("stop")
    if stop is None:
        return []
    sequences = [stop] if isinstance(stop, str) else stop
    if not isinstance(sequences, list) or not all(isinstance(s, str) for s in sequences):
        raise _invalid_type("stop", "a string or an array of strings", stop)
    if len(sequences) > MAX_STOP_SEQUENCES:
        raise LifecycleError(
            f"Invalid 'stop': at most {MAX_STOP_SEQUENCES} sequences, got {len(sequences)}.",
            "stop",
            "array_above_max_length",
        )
    if any(s == "" for s in sequences):
        raise LifecycleError("Invalid 'stop': a stop sequence must not be empty.", "stop", "invalid_value")
    return list(sequences)


def _max_tokens(payload: Mapping) -> int | None:
    # max_completion_tokens is the newer name; when both are sent it wins, but both must be valid.
    legacy = _integer(payload, "max_tokens", 1)
    newer = _integer(payload, "max_completion_tokens", 1)
    return newer if newer is not None else legacy


def _stream_options(payload: Mapping, stream: bool) -> dict | None:
    options = payload.get("stream_options")
    if options is None:
        return None
    if not stream:
        raise LifecycleError(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            "invalid_value",
        )
    if not isinstance(options, dict):
        raise _invalid_type("stream_options", "an object", options)
    include_usage = options.get("include_usage")
    if include_usage is not None and not isinstance(include_usage, bool):
        raise _invalid_type("stream_options.include_usage", "a boolean", include_usage)
    return {"include_usage": bool(include_usage)}


def _logprobs(payload: Mapping) -> tuple[bool, int | None]:
    logprobs = _boolean(payload, "logprobs")
    top = _integer(payload, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise LifecycleError(
            "Invalid 'top_logprobs': it can only be used when 'logprobs' is true.", "top_logprobs", "invalid_value"
        )
    return logprobs, top


def validate_request(payload: object, *, known_models: Sequence[str] | None = None) -> ChatRequest:
    """Check decoded JSON against the chat-completions rules; unknown extra fields are ignored.

    Raises ``LifecycleError`` with ``param`` naming the offending field; ``code`` follows OpenAI's
    ("invalid_type", "decimal_above_max_value", "empty_array", ...) and is "model_not_found" for a
    model outside ``known_models`` (a 404 on the API).
    """
    if not isinstance(payload, dict):
        raise LifecycleError(
            f"The request body must be a JSON object, got {_type_name(payload)}.", None, "invalid_request_body"
        )
    stream = _boolean(payload, "stream")
    n = _integer(payload, "n", 1, INT64_MAX)
    if n not in (None, 1):
        raise LifecycleError(f"Invalid 'n': only n=1 is supported (one choice), got {n}.", "n", "unsupported_value")
    logprobs, top_logprobs = _logprobs(payload)
    return ChatRequest(
        model=_model(payload, known_models),
        messages=_messages(payload),
        temperature=_number(payload, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(payload, "top_p", 1.0, 0.0, 1.0, low_open=True),
        max_tokens=_max_tokens(payload),
        stream=stream,
        stream_options=_stream_options(payload, stream),
        seed=_integer(payload, "seed", INT64_MIN),
        stop=_stop(payload),
        top_k=_integer(payload, "top_k", 0) or 0,
        min_p=_number(payload, "min_p", 0.0, 0.0, 1.0),
        repetition_penalty=_number(payload, "repetition_penalty", 1.0, 0.0, 2.0, low_open=True),
        presence_penalty=_number(payload, "presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=_number(payload, "frequency_penalty", 0.0, -2.0, 2.0),
        logprobs=logprobs,
        top_logprobs=top_logprobs,
    )


def chat_request(
    prompt: str,
    system: str | None = None,
    history: Sequence[Mapping] = (),
    *,
    model: str | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float = 0.0,
    repetition_penalty: float = 1.0,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    stream: bool = False,
    include_usage: bool = False,
    seed: int | None = None,
    stop: Sequence[str] = (),
) -> ChatRequest:
    """The request the app sends for ``prompt``: optional system prompt, earlier turns, then the prompt."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise LifecycleError("The prompt is empty: type a message to send.", "prompt", "empty_content")
    messages = ([{"role": "system", "content": system}] if system else []) + [dict(m) for m in history]
    payload = {
        "model": model or model_name(),
        "messages": messages + [{"role": "user", "content": prompt}],
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "min_p": min_p,
        "repetition_penalty": repetition_penalty,
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": include_usage} if stream else None,
        "seed": seed,
        "stop": list(stop) or None,
    }
    return validate_request(payload)


# --- statelessness ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ResentTurn:
    """Turn ``turn`` of a conversation: everything before it is sent again, because the API keeps no state."""

    turn: int
    messages: list[dict]
    payload_bytes: int
    new_bytes: int  # bytes of this turn's new user message alone


def resend_sizes(
    turns: Sequence[tuple[str, str]], system: str | None = None, model: str | None = None
) -> list[ResentTurn]:
    """For (user, assistant) turns, the request each new user message needs and its size on the wire."""
    resent = []
    history: list[dict] = []
    for index, (user, assistant) in enumerate(turns, start=1):
        request = chat_request(user, system=system, history=history, model=model)
        resent.append(
            ResentTurn(
                turn=index,
                messages=request.messages,
                payload_bytes=len(request.wire_body()),
                new_bytes=len(user.encode("utf-8")),
            )
        )
        history = history + [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return resent


# --- rendering --------------------------------------------------------------------------------


def redact_key(api_key: str | None) -> str:
    """What a page may show of a key: a short prefix for long keys, never enough to use or guess it."""
    if not api_key:
        return "<your API key>"
    return f"{api_key[:3]}…<redacted>" if len(api_key) >= 20 else "<redacted>"


def _check_key_env(key_env: str) -> None:
    if not key_env.isidentifier():
        raise LifecycleError(f"Invalid environment variable name {_shown(key_env)}.", "key_env", "invalid_value")


def _endpoint(base_url: str) -> tuple[str, str, str]:
    """(url, host, path) of the chat-completions endpoint; user:password in the URL is dropped."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LifecycleError(
            f"Invalid base URL {_shown(base_url)}: expected http(s)://host[:port]/path.", "base_url", "invalid_value"
        )
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    if ":" in parts.hostname:  # IPv6 literal
        host = f"[{parts.hostname}]" + ("" if parts.port is None else f":{parts.port}")
    path = parts.path.rstrip("/") + "/chat/completions"
    return f"{parts.scheme}://{host}{path}", host, path


def render_http_request(req: ChatRequest, base_url: str = DEFAULT_BASE_URL, api_key: str | None = None) -> str:
    """The request as HTTP/1.1 text (lines shown with \\n; the wire uses \\r\\n), key redacted.

    The body is pretty-printed for reading and Content-Length is that body's byte length.
    """
    _, host, path = _endpoint(base_url)
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


def render_curl(req: ChatRequest, base_url: str = DEFAULT_BASE_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """A curl command; the key is read from the environment variable ``key_env``."""
    _check_key_env(key_env)
    url, _, _ = _endpoint(base_url)
    body = json.dumps(req.to_payload(), ensure_ascii=False, indent=2)
    lines = [f"curl {'-N ' if req.stream else ''}{shlex.quote(url)}"]
    lines += [
        '-H "Content-Type: application/json"',
        f'-H "Authorization: Bearer ${key_env}"',
        f"-d {shlex.quote(body)}",
    ]
    return " \\\n  ".join(lines)


def _python_kwargs(payload: Mapping) -> list[tuple[str, object]]:
    extra = {name: payload[name] for name in EXTENSIONS if name in payload}
    kwargs = [(name, value) for name, value in payload.items() if name not in EXTENSIONS]
    return kwargs + ([("extra_body", extra)] if extra else [])


def _python_argument(name: str, value: object) -> str:
    literal = pprint.pformat(value, width=88, sort_dicts=False)
    return textwrap.indent(f"{name}={literal},", "    ") + "\n"


def render_python(req: ChatRequest, base_url: str = DEFAULT_BASE_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """The same call with the official openai Python SDK; extensions travel in ``extra_body``."""
    _check_key_env(key_env)
    url, _, _ = _endpoint(base_url)
    base = url.removesuffix("/chat/completions")
    arguments = "".join(_python_argument(name, value) for name, value in _python_kwargs(req.to_payload()))
    if req.stream:
        call = f"stream = client.chat.completions.create(\n{arguments})\n"
        use = (
            "for chunk in stream:\n"
            "    if chunk.choices and chunk.choices[0].delta.content:\n"
            '        print(chunk.choices[0].delta.content, end="", flush=True)\n'
            "    if chunk.usage:\n"
            "        print()\n"
            "        print(chunk.usage)\n"
        )
    else:
        call = f"response = client.chat.completions.create(\n{arguments})\n"
        use = "print(response.choices[0].message.content)\nprint(response.usage)\n"
    header = (
        "import os\n\nfrom openai import OpenAI\n\n"
        f"client = OpenAI(base_url={base!r}, api_key=os.environ[{key_env!r}])\n\n"
    )
    return header + call + use


def render_javascript(req: ChatRequest, base_url: str = DEFAULT_BASE_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """The same call with the official openai npm SDK (an ES module; extra fields pass through)."""
    _check_key_env(key_env)
    url, _, _ = _endpoint(base_url)
    base = url.removesuffix("/chat/completions")
    body = json.dumps(req.to_payload(), ensure_ascii=False, indent=2)
    header = (
        'import OpenAI from "openai";\n\n'
        f"const client = new OpenAI({{ baseURL: {json.dumps(base)}, apiKey: process.env.{key_env} }});\n\n"
    )
    if req.stream:
        return header + (
            f"const stream = await client.chat.completions.create({body});\n"
            "for await (const chunk of stream) {\n"
            '  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");\n'
            "  if (chunk.usage) console.log(\"\\n\", chunk.usage);\n"
            "}\n"
        )
    return header + (
        f"const completion = await client.chat.completions.create({body});\n"
        "console.log(completion.choices[0].message.content);\n"
        "console.log(completion.usage);\n"
    )


SECRET_HEADERS = ("authorization", "api-key", "x-api-key", "proxy-authorization", "cookie", "set-cookie")


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
        shown = "<redacted>" if name.lower() in SECRET_HEADERS else escape_control(str(value))
        lines.append(f"{escape_control(str(name))}: {shown}")
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", errors="replace")
    if not isinstance(body, str):
        body = json.dumps(body, ensure_ascii=False, indent=2)
    return "\n".join(lines + ["", body])


# --- response ---------------------------------------------------------------------------------


def new_completion_id() -> str:
    """A fresh id in OpenAI's form: ``chatcmpl-`` and 29 random letters and digits."""
    return "chatcmpl-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(29))


def build_response(
    completion_id: str,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    created: int | None = None,
) -> dict:
    """The ``chat.completion`` object for one generated answer, usage included."""
    if finish_reason not in FINISH_REASONS:
        raise LifecycleError(f"Unknown finish_reason {_shown(finish_reason)}.", "finish_reason", "invalid_value")
    for name, count in (("prompt_tokens", prompt_tokens), ("completion_tokens", completion_tokens)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise LifecycleError(f"{name} must be a non-negative integer, got {_shown(count)}.", name, "invalid_value")
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else int(created),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
