"""The Request page's lesson: what the settings became on the wire, and what the server made of them."""

from __future__ import annotations

from lifecycle.lessons.words import counted


def request_lesson(body_bytes: int, messages: int, parameters: int, prompt_tokens: int, completion_tokens: int,
                   finish_reason: str) -> str:
    """The page's lesson: the JSON body's size, its messages and parameters (every field but model and
    messages), the prompt tokens the server made of them and the answer's tokens and finish_reason."""
    those = "that message" if messages == 1 else "those messages"
    return (
        f"Your settings became a JSON body of **{body_bytes:,} bytes** holding **{counted(messages, 'message')}** "
        f"and {counted(parameters, 'parameter')}. The server turned {those} into "
        f"**{prompt_tokens:,} prompt tokens** (chat template included) and answered with "
        f"**{completion_tokens:,} tokens**, stopping with finish_reason "
        f"**{finish_reason}**."
    )
