"""A cost ledger for one call: what a client reserves before it (the tokenizer's count of the prompt
plus max_tokens), what the server reported in ``usage``, and the difference, at prices the reader sets.
"""

from __future__ import annotations

from dataclasses import dataclass

PER = 1_000_000  # prices are per million tokens


@dataclass(frozen=True)
class LedgerLine:
    """Input and output tokens of one line of the ledger, and their cost at the given prices."""

    label: str
    input_tokens: int
    output_tokens: int
    input_price: float
    output_price: float

    @property
    def cost(self) -> float:
        return (self.input_tokens * self.input_price + self.output_tokens * self.output_price) / PER


def ledger(prompt_tokens: int, max_tokens: int, usage: dict | None, input_price: float,
           output_price: float) -> list[LedgerLine]:
    """The estimate, the reported usage (when the server sent one) and the difference between them."""
    if input_price < 0 or output_price < 0:
        raise ValueError("prices cannot be negative")
    estimate = LedgerLine("estimate before the call (prompt + max_tokens reserved)", prompt_tokens, max_tokens,
                          input_price, output_price)
    if usage is None:
        return [estimate]
    reported = LedgerLine("usage the server reported", int(usage.get("prompt_tokens") or 0),
                          int(usage.get("completion_tokens") or 0), input_price, output_price)
    difference = LedgerLine("reported minus estimate", reported.input_tokens - estimate.input_tokens,
                            reported.output_tokens - estimate.output_tokens, input_price, output_price)
    return [estimate, reported, difference]
