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
from lifecycle.server.fields import shown

FINISH_REASONS = ("stop", "length", "content_filter", "tool_calls", "cancelled")
_ID_ALPHABET = string.ascii_letters + string.digits


def new_completion_id() -> str:
    """A fresh id in OpenAI's form: ``chatcmpl-`` and 29 random letters and digits."""
    return "chatcmpl-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(29))


@dataclass(frozen=True)
class Choice:
    """One generated answer: its text, why it ended, and its logprobs object (None when not asked)."""

    text: str
    finish_reason: str
    logprobs: dict | None = None


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
) -> dict:
    """The ``chat.completion`` object for ``choices`` (indexes in order), usage over all of them."""
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
                "message": {"role": "assistant", "content": choice.text, "refusal": None},
                "logprobs": choice.logprobs,
                "finish_reason": choice.finish_reason,
            }
            for index, choice in enumerate(choices)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def build_response(
    completion_id: str,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    created: int | None = None,
    logprobs: dict | None = None,
) -> dict:
    """The ``chat.completion`` object for one generated answer, usage included."""
    return completion_body(
        completion_id, model, [Choice(text, finish_reason, logprobs)], prompt_tokens, completion_tokens, created
    )
