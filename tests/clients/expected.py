"""What a greedy Responses call must report, recomputed without the server: the prompt through the
tokenizer's own chat template, the answer through transformers' own greedy generate."""

from __future__ import annotations

from dataclasses import dataclass

from tests.pages.recompute import template_ids, transformers_greedy
from tests.reference import reference_tokenizer

# The event order a streamed text Response follows (openai-python's and openai-node's stream helpers, litellm
# and the llm CLI read it): the response opens, one message item with one output_text part, its deltas, the
# part and item closed, then the finished response.
OPENING = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
CLOSING = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


@dataclass(frozen=True)
class GreedyAnswer:
    """One question's prompt tokens, the answer's text and tokens (the end-of-sequence token counted,
    as usage counts it), and how it ended."""

    prompt_tokens: int
    text: str
    output_tokens: int
    status: str  # "completed": it ended with the end-of-sequence token; "incomplete": max_output_tokens ran out

    @property
    def cache_serves_on_a_repeat(self) -> int:
        """What the prefix cache serves when the same prompt comes again: all but its last token, which
        runs to give the first answer token's logits."""
        return self.prompt_tokens - 1


def greedy_answer(loaded, question: str, max_output_tokens: int) -> GreedyAnswer:
    ids = template_ids(loaded, question)
    new, _ = transformers_greedy(loaded, ids, max_output_tokens)
    end = {reference_tokenizer(loaded).convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    ended = bool(new) and new[-1] in end
    text = reference_tokenizer(loaded).decode(new[:-1] if ended else new)
    return GreedyAnswer(len(ids), text, len(new), "completed" if ended else "incomplete")


def text_stream_kinds(deltas: int, final: str) -> list[str]:
    """The event types of a streamed text Response with ``deltas`` text deltas, ending with ``final``."""
    return OPENING + ["response.output_text.delta"] * deltas + CLOSING + [final]
