"""The answer a client receives: the ``chat.completion`` object, one choice per generation.

Every choice carries ``message.refusal`` (null: this server never refuses in-band) and
``logprobs`` (null unless the request asked for them), as OpenAI's schema requires.
"""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.errors import LifecycleError
from lifecycle.stages.json_fields import shown

FINISH_REASONS = ("stop", "length", "content_filter", "tool_calls", "cancelled")
_ID_ALPHABET = string.ascii_letters + string.digits


def new_completion_id() -> str:
    """A fresh id in OpenAI's form: ``chatcmpl-`` and 29 random letters and digits."""
    return "chatcmpl-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(29))


@dataclass(frozen=True)
class Choice:
    """One generated answer: its text (None when it is a tool call), why it ended, its logprobs
    object (None when not asked) and its tool calls (OpenAI's ``tool_calls`` objects)."""

    text: str | None
    finish_reason: str
    logprobs: dict | None = None
    tool_calls: list[dict] | None = None

    def message(self) -> dict:
        message = {"role": "assistant", "content": self.text, "refusal": None}
        return message | ({"tool_calls": self.tool_calls} if self.tool_calls else {})


def _count(name: str, count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise LifecycleError(f"{name} must be a non-negative integer, got {shown(count)}.", name, "invalid_value")
    return count


def completion_body(
    completion_id: str,
    model: str,
    choices: Sequence[Choice],
    prompt_tokens: int,
    completion_tokens: int,
    created: int | None = None,
    cached_tokens: int | None = None,
) -> dict:
    """The ``chat.completion`` object for ``choices`` (indexes in order), usage over all of them;
    ``cached_tokens`` (prompt tokens the prefix cache served) goes in ``usage.prompt_tokens_details``."""
    for choice in choices:
        if choice.finish_reason not in FINISH_REASONS:
            raise LifecycleError(f"Unknown finish_reason {shown(choice.finish_reason)}.", "finish_reason", "invalid_value")
    prompt_tokens = _count("prompt_tokens", prompt_tokens)
    completion_tokens = _count("completion_tokens", completion_tokens)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else int(created),
        "model": model,
        "choices": [
            {
                "index": index,
                "message": choice.message(),
                "logprobs": choice.logprobs,
                "finish_reason": choice.finish_reason,
            }
            for index, choice in enumerate(choices)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **({} if cached_tokens is None else {"prompt_tokens_details": cached_details(cached_tokens)}),
        },
    }


def cached_details(cached_tokens: int) -> dict:
    """``usage.prompt_tokens_details`` as OpenAI reports it: how many prompt tokens came from the cache."""
    return {"cached_tokens": _count("cached_tokens", cached_tokens)}


def build_response(
    completion_id: str,
    model: str,
    text: str | None,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    created: int | None = None,
    logprobs: dict | None = None,
    tool_calls: list[dict] | None = None,
) -> dict:
    """The ``chat.completion`` object for one generated answer, usage included."""
    return completion_body(
        completion_id, model, [Choice(text, finish_reason, logprobs, tool_calls)], prompt_tokens, completion_tokens,
        created,
    )
