"""Stored responses, so ``previous_response_id`` can continue a conversation without resending it.

The store is what makes the Responses API stateful where chat completions are not: the server
keeps each stored response's whole conversation (input and output messages, never its
``instructions``). It is bounded: the oldest entries are dropped past ``capacity``, and an entry
is only ever visible to the API key that created it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

DEFAULT_CAPACITY = 512


@dataclass(frozen=True)
class StoredResponse:
    key_name: str
    messages: tuple[dict, ...]  # the conversation up to and including this response's answer
    body: dict


class ResponseStore:
    """A bounded, thread-safe map from response id to its conversation, per API key."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        self.capacity = capacity
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, response_id: str, key_name: str, messages: list[dict], body: dict) -> None:
        with self._lock:
            self._entries[response_id] = StoredResponse(key_name, tuple(dict(m) for m in messages), body)
            self._entries.move_to_end(response_id)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def get(self, response_id: str, key_name: str) -> StoredResponse | None:
        """The stored response, or None when unknown, dropped, or created with another key."""
        with self._lock:
            entry = self._entries.get(response_id)
        return entry if entry is not None and entry.key_name == key_name else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
