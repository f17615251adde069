"""Log-probabilities in OpenAI's shape: for each generated token its text, logprob, UTF-8 bytes
and the most likely alternatives at that position (``choices[].logprobs.content``).

The numbers are the model's own distribution (softmax of the raw logits) before sampling moved
or removed anything, as vLLM and llama.cpp report them. A token that is only part of a UTF-8
character shows its bytes as ``\\xNN`` escapes in ``token``; ``bytes`` always has the real ones.

The entries are the tokens of the content, so their ``token`` strings join into it: the
end-of-sequence token that ended a generation is counted in ``usage.completion_tokens`` (vLLM
keeps it in its output token ids) but has no entry, as it has no text in the answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# OpenAI reports -9999.0 for a probability too small to represent; JSON has no -Infinity.
FLOOR = -9999.0


def _logprob(value: float) -> float:
    return max(value, FLOOR) if math.isfinite(value) else FLOOR


def _token(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def content_steps(steps: Iterable) -> list:
    """The steps whose tokens belong to the content: all but an end-of-sequence token."""
    return [step for step in steps if not step.end_of_sequence]


def token_logprob(step, top: int) -> dict:
    """One token's entry: token, logprob, bytes and its ``top`` most likely alternatives."""
    return {
        "token": _token(step.token_bytes),
        "logprob": _logprob(step.logprob),
        "bytes": list(step.token_bytes),
        "top_logprobs": [
            {"token": _token(alt.token_bytes), "logprob": _logprob(alt.logprob), "bytes": list(alt.token_bytes)}
            for alt in step.top_logprobs[:top]
        ],
    }


def logprobs_content(steps: Iterable, top: int | None) -> dict | None:
    """``choice.logprobs`` for these steps: None when logprobs were not asked for (``top`` None)."""
    if top is None:
        return None
    return {"content": [token_logprob(step, top) for step in content_steps(steps)], "refusal": None}
