"""Statelessness: the chat-completions API keeps nothing between calls, so every turn resends it all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lifecycle.stages.request import chat_request


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
