"""The Request page's lesson: what the settings became on the wire, and what the server made of them."""

from __future__ import annotations


def request_lesson(body_bytes: int, messages: int, parameters: int, prompt_tokens: int, completion_tokens: int,
                   finish_reason: str) -> str:
    """The page's lesson: the JSON body's size, its messages and parameters (every field but model and
    messages), the prompt tokens the server made of them and the answer's tokens and finish_reason."""
    return (
        f"Your settings became a JSON body of **{body_bytes:,} bytes** holding **{messages} "
        f"message(s)** and {parameters} parameters. The server turned those messages into "
        f"**{prompt_tokens:,} prompt tokens** (chat template included) and answered with "
        f"**{completion_tokens:,} tokens**, stopping with finish_reason "
        f"**{finish_reason}**."
    )
