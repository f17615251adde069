"""Prefix caching: the keys and values of recently run token sequences, bounded in bytes.

Chat APIs are stateless, so a conversation re-sends its whole history every turn. Each entry keeps
the KV of one sequence (a prompt, or a prompt with its generated answer); a new prompt that starts
with the same tokens copies those positions instead of recomputing them. Least recently used
entries are dropped once the total exceeds the budget (``LIFECYCLE_PREFIX_CACHE_MB``).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch

DEFAULT_BUDGET_MB = 192
BUDGET_ENV = "LIFECYCLE_PREFIX_CACHE_MB"


def budget_bytes() -> int:
    value = os.environ.get(BUDGET_ENV, "").strip()
    return int(float(value) * 2**20) if value else DEFAULT_BUDGET_MB * 2**20


@dataclass(frozen=True)
class PrefixStats:
    entries: int
    bytes: int
    budget_bytes: int
    hits: int
    misses: int
    tokens_served: int


@dataclass
class _Entry:
    tokens: np.ndarray
    keys: torch.Tensor  # (layers, kv_heads, len(tokens), head_dim)
    values: torch.Tensor

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes


class PrefixCache:
    """Sequences -> their KV; ``match`` finds the longest stored prefix of a new prompt."""

    def __init__(self, budget: int):
        self.budget = budget
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next = 0
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.tokens_served = 0

    def match(self, prompt: list[int], usable: int) -> tuple[int, _Entry | None]:
        """The longest stored prefix of ``prompt``, at most ``usable`` tokens: (length, entry)."""
        query = np.asarray(prompt[:usable], dtype=np.int64)
        best, best_key = 0, None
        with self._lock:
            for key, entry in self._entries.items():
                n = min(len(query), len(entry.tokens))
                if n <= best:
                    continue
                differ = np.flatnonzero(entry.tokens[:n] != query[:n])
                length = int(differ[0]) if differ.size else n
                if length > best:
                    best, best_key = length, key
            if best_key is None:
                self.misses += 1
                return 0, None
            self._entries.move_to_end(best_key)
            self.hits += 1
            self.tokens_served += best
            return best, self._entries[best_key]

    def store(self, tokens: list[int], keys: torch.Tensor, values: torch.Tensor) -> None:
        """Keep a compact copy of the first ``len(tokens)`` positions of a request's KV."""
        n = len(tokens)
        if n == 0:
            return
        entry = _Entry(np.asarray(tokens, dtype=np.int64), keys[:, :, :n].clone(), values[:, :, :n].clone())
        if entry.nbytes > self.budget:
            return
        with self._lock:
            for key, old in list(self._entries.items()):
                # An entry that is a prefix of the new one adds nothing.
                if len(old.tokens) <= n and np.array_equal(old.tokens, entry.tokens[: len(old.tokens)]):
                    self._drop(key)
            self._entries[self._next] = entry
            self._next += 1
            self._bytes += entry.nbytes
            while self._bytes > self.budget:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: int) -> None:
        self._bytes -= self._entries.pop(key).nbytes

    def stats(self) -> PrefixStats:
        with self._lock:
            return PrefixStats(len(self._entries), self._bytes, self.budget, self.hits, self.misses, self.tokens_served)
