"""A guardrail outside the model: an output check in post-processing that can end an answer.

The model obeys its system prompt only as a tendency, so a rule that must hold is checked on
what it writes, after sampling and detokenization, before the text leaves the server. This one is a
block list: phrases matched case-insensitively in the answer as it is generated. The text that
could still grow into a blocked phrase is held back (like a stop sequence), so no blocked phrase
is ever sent, even in a stream; when one appears the generation ends there with finish_reason
"content_filter" and the phrase and everything after it are withheld.

On the API a chat-completions request opts in with the extension field
``"guardrail": {"block": ["phrase", ...]}`` (with the openai SDK: ``extra_body={"guardrail": ...}``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lifecycle.errors import LifecycleError

MAX_PHRASES = 64
MAX_PHRASE_CHARS = 80
FINISH_REASON = "content_filter"


@dataclass(frozen=True)
class Guardrail:
    """The blocked phrases (as given, at least one) and the pattern that finds any of them."""

    block: tuple[str, ...]

    @property
    def pattern(self) -> re.Pattern:
        return re.compile("|".join(re.escape(phrase) for phrase in self.block), re.IGNORECASE)

    def first_match(self, text: str) -> int | None:
        """Where the first blocked phrase starts in ``text``, or None."""
        found = self.pattern.search(text)
        return found.start() if found else None

    def held(self, text: str) -> int:
        """How many trailing characters of ``text`` could still become a blocked phrase."""
        folded = text.casefold()
        return max((k for phrase in self.block for k in range(1, len(phrase))
                    if folded.endswith(phrase[:k].casefold())), default=0)


def check_seconds(guardrail: Guardrail, pieces: Sequence[str]) -> float:
    """What the check costs per piece of text (one per token), measured by running it as generation
    does over ``pieces``: after each piece, search the pending text and measure what to hold back."""
    pending, started = "", time.perf_counter()
    for piece in pieces:
        pending += piece
        if guardrail.first_match(pending) is not None:
            break
        pending = pending[len(pending) - guardrail.held(pending):]
    return (time.perf_counter() - started) / max(len(pieces), 1)


def parse_guardrail(value: object, param: str = "guardrail") -> Guardrail | None:
    """Validate ``{"block": [phrases]}`` (absent or null: no guardrail) with a message naming ``param``."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"block"}:
        raise LifecycleError(f"Invalid '{param}': expected {{\"block\": [phrases]}}.", param, "invalid_type")
    block = value["block"]
    where = f"{param}.block"
    if not isinstance(block, list) or not all(isinstance(phrase, str) for phrase in block):
        raise LifecycleError(f"Invalid '{where}': expected an array of strings.", where, "invalid_type")
    phrases = tuple(phrase.strip() for phrase in block)
    if not phrases:
        raise LifecycleError(f"Invalid '{where}': the block list is empty; block at least one phrase.", where,
                             "empty_array")
    if len(phrases) > MAX_PHRASES:
        raise LifecycleError(f"Invalid '{where}': at most {MAX_PHRASES} phrases, got {len(phrases)}.", where,
                             "array_above_max_length")
    if not all(phrases):
        raise LifecycleError(f"Invalid '{where}': a blocked phrase must not be empty.", where, "invalid_value")
    too_long = next((phrase for phrase in phrases if len(phrase) > MAX_PHRASE_CHARS), None)
    if too_long is not None:
        raise LifecycleError(f"Invalid '{where}': a phrase has {len(too_long)} characters, at most {MAX_PHRASE_CHARS}.",
                             where, "string_above_max_length")
    return Guardrail(phrases)
