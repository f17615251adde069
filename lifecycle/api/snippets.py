"""Client code for a request: curl, the official openai Python SDK and the openai npm SDK.

One renderer per client serves both endpoints (chat completions and Responses): only the SDK
method and how the answer is read differ. The key is always read from an environment variable,
never written into a snippet. Fields the SDKs do not know as keyword arguments (this server's
extensions) travel in the Python SDK's ``extra_body``.
"""

from __future__ import annotations

import json
import pprint
import shlex
import textwrap
from collections.abc import Mapping

from lifecycle.errors import LifecycleError
from lifecycle.stages.request import EXTENSIONS
from lifecycle.stages.json_fields import shown
from lifecycle.api.wire import DEFAULT_BASE_URL, WireRequest, endpoint_url

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_PYTHON = {
    "chat/completions": (
        "client.chat.completions.create",
        "for chunk in stream:\n"
        "    if chunk.choices and chunk.choices[0].delta.content:\n"
        '        print(chunk.choices[0].delta.content, end="", flush=True)\n'
        "    if chunk.usage:\n"
        "        print()\n"
        "        print(chunk.usage)\n",
        "print(response.choices[0].message.content)\nprint(response.usage)\n",
    ),
    "responses": (
        "client.responses.create",
        "for event in stream:\n"
        '    if event.type == "response.output_text.delta":\n'
        '        print(event.delta, end="", flush=True)\n'
        '    elif event.type == "response.completed":\n'
        "        print()\n"
        "        print(event.response.usage)\n",
        "print(response.output_text)\nprint(response.usage)\n",
    ),
}
_JAVASCRIPT = {
    "chat/completions": (
        "client.chat.completions.create",
        "for await (const chunk of stream) {\n"
        '  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");\n'
        '  if (chunk.usage) console.log("\\n", chunk.usage);\n'
        "}\n",
        "console.log(response.choices[0].message.content);\nconsole.log(response.usage);\n",
    ),
    "responses": (
        "client.responses.create",
        "for await (const event of stream) {\n"
        '  if (event.type === "response.output_text.delta") process.stdout.write(event.delta);\n'
        '  if (event.type === "response.completed") console.log("\\n", event.response.usage);\n'
        "}\n",
        "console.log(response.output_text);\nconsole.log(response.usage);\n",
    ),
}


def _check_key_env(key_env: str) -> None:
    if not key_env.isidentifier():
        raise LifecycleError(f"Invalid environment variable name {shown(key_env)}.", "key_env", "invalid_value")


def _base(base_url: str, endpoint: str) -> str:
    url, _, _ = endpoint_url(base_url, endpoint)
    return url.removesuffix("/" + endpoint)


def render_curl(req: WireRequest, base_url: str = DEFAULT_BASE_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """A curl command; the key is read from the environment variable ``key_env``."""
    _check_key_env(key_env)
    url, _, _ = endpoint_url(base_url, req.endpoint)
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


def python_call(req: WireRequest) -> str:
    """The SDK call and how its answer is read: what differs between the two endpoints."""
    method, stream_use, use = _PYTHON[req.endpoint]
    arguments = "".join(_python_argument(name, value) for name, value in _python_kwargs(req.to_payload()))
    name = "stream" if req.stream else "response"
    return f"{name} = {method}(\n{arguments})\n" + (stream_use if req.stream else use)


def render_python(req: WireRequest, base_url: str = DEFAULT_BASE_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """The same call with the official openai Python SDK; extensions travel in ``extra_body``."""
    _check_key_env(key_env)
    header = (
        "import os\n\nfrom openai import OpenAI\n\n"
        f"client = OpenAI(base_url={_base(base_url, req.endpoint)!r}, api_key=os.environ[{key_env!r}])\n\n"
    )
    return header + python_call(req)


def render_javascript(req: WireRequest, base_url: str = DEFAULT_BASE_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """The same call with the official openai npm SDK (an ES module; extra fields pass through)."""
    _check_key_env(key_env)
    method, stream_use, use = _JAVASCRIPT[req.endpoint]
    body = json.dumps(req.to_payload(), ensure_ascii=False, indent=2)
    name = "stream" if req.stream else "response"
    header = (
        'import OpenAI from "openai";\n\n'
        f"const client = new OpenAI({{ baseURL: {json.dumps(_base(base_url, req.endpoint))}, "
        f"apiKey: process.env.{key_env} }});\n\n"
    )
    return header + f"const {name} = await {method}({body});\n" + (stream_use if req.stream else use)
