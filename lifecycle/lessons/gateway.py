"""The Gateway page's lesson: what the gateway decides before the model sees a token, with this call's
token cost."""

from __future__ import annotations


def gateway_lesson(prompt_tokens: int, max_tokens: int, model_name: str) -> str:
    """The page's lesson: the key, the bucket's request and tokens (the prompt's plus max_tokens, reserved
    up front), the backend for ``model_name`` and the log."""
    cost = prompt_tokens + max_tokens
    return (
        f"Before the model sees a single token, the gateway decides: is the key valid (401 if not), does the "
        f"key's bucket hold **1 request** and **{cost:,} tokens** for this call (its {prompt_tokens:,} "
        f"prompt tokens plus max_tokens {max_tokens:,}, reserved up front; 429 if not), which "
        f"backend serves **{model_name}** (404 for a model nobody serves), and then it writes the call "
        "to the log under the key's name. Send the request below and watch each decision."
    )
