"""Warming a class: a teacher's prompt list computed on the running server before the workshop.

``python -m lifecycle warm prompts.txt --url http://host:8501`` posts the prompts to the server's
``POST /lifecycle/warm`` (authenticated with an API key, like /v1). The server runs every stage
the pages show (inspection pass and generation) into the same caches the pages read, so the
class's first clicks are instant. It answers with one JSON line per prompt as each one is ready
(NDJSON), then a summary line; this module reads those lines for the command line.

The body is ``{"prompts": [...], "settings": {...}, "pages": true}``; ``settings`` uses the sidebar's
names (temperature, top_p, top_k, min_p, repetition_penalty, max_tokens, seed, system_prompt,
include_usage) and omitted ones take the pages' defaults, so warmed prompts match what the class
opens with the default sidebar. ``"pages": false`` warms the journey only, not the work some pages do
of their own (the Agents page's loop and measurements, the KV cache page's turns, ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from lifecycle.errors import LifecycleError

WARM_PATH = "/lifecycle/warm"
MAX_WARM_PROMPTS = 200
SETTING_TYPES: dict[str, tuple[type, ...]] = {
    "temperature": (int, float),
    "top_p": (int, float),
    "top_k": (int,),
    "min_p": (int, float),
    "repetition_penalty": (int, float),
    "max_tokens": (int,),
    "seed": (int,),
    "system_prompt": (str,),
    "include_usage": (bool,),
}


def read_prompts(path: Path) -> list[str]:
    """One prompt per line; blank lines and lines starting with ``#`` are skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LifecycleError(f"Cannot read the prompt list {str(path)[:200]!r}: {type(error).__name__}.",
                             param="prompts") from error
    prompts = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return parse_prompts(prompts)


def parse_prompts(prompts: object) -> list[str]:
    """The warm request's prompt list, checked: 1 to MAX_WARM_PROMPTS non-empty strings."""
    if not isinstance(prompts, list) or not prompts:
        raise LifecycleError("'prompts' must be a non-empty list of strings.", param="prompts")
    if len(prompts) > MAX_WARM_PROMPTS:
        raise LifecycleError(f"At most {MAX_WARM_PROMPTS} prompts per warm call ({len(prompts)} given).",
                             param="prompts")
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, str) or not prompt.strip():
            raise LifecycleError(f"Prompt {index + 1} is not a non-empty string.", param="prompts")
    return list(dict.fromkeys(prompts))  # a prompt listed twice is computed once


def parse_settings(settings: object) -> dict:
    """The warm request's shared settings, checked by name and type (values are checked by the journey)."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise LifecycleError("'settings' must be an object.", param="settings")
    checked = {}
    for name, value in settings.items():
        if name not in SETTING_TYPES:
            raise LifecycleError(f"Unknown setting {str(name)[:40]!r}; known: {', '.join(SETTING_TYPES)}.",
                                 param="settings")
        kinds = SETTING_TYPES[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise LifecycleError(f"Setting {name!r} must be {' or '.join(k.__name__ for k in kinds)}.",
                                 param=name)
        checked[name] = float(value) if float in kinds else value
    return checked


def warm_server(base_url: str, api_key: str | None, prompts: Sequence[str], settings: Mapping | None = None,
                timeout: float = 3600.0, pages: bool = True) -> Iterator[dict]:
    """Ask the server at ``base_url`` to warm ``prompts`` (``pages``: each page's own work too); yield its report
    line by line as prompts finish.

    Raises LifecycleError for a server that refuses (with its message) or cannot be reached.
    """
    url = base_url.rstrip("/") + WARM_PATH
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"prompts": list(prompts), "settings": dict(settings or {}), "pages": pages}
    import httpx  # here, not at the top: the app imports this module at start, and httpx costs ~0.1 s

    try:
        with httpx.stream("POST", url, json=body, headers=headers, timeout=httpx.Timeout(timeout, connect=10)) as reply:
            if reply.status_code != 200:
                raise LifecycleError(f"The server answered {reply.status_code}: {_message(reply.read())}",
                                     param="url")
            for line in reply.iter_lines():
                if line.strip():
                    yield json.loads(line)
    except httpx.HTTPError as error:
        raise LifecycleError(f"Cannot warm {url[:200]}: {type(error).__name__}: {str(error)[:200]}",
                             param="url") from error


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])[:500]
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", errors="replace")
