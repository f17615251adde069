"""A multi-turn chat against a stateless API, and what the prefix cache saves on it.

The chat-completions API keeps no conversation: every turn's request carries the whole history
(system prompt, every earlier question and answer) and the model must read all of it again. A
prefix cache keeps the KV cache of recent prompts, so the part of a new prompt that repeats an
earlier one is not recomputed; OpenAI reports that part as ``usage.prompt_tokens_details.cached_tokens``.

``replay_turns`` plays such a conversation on the real model through ``generate_steps`` (the engine,
which reports the cached tokens), and times the same prompt's prefill from scratch on the engine's
own forward pass beside it, so each turn shows the prefill time the cache saved, measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.errors import LifecycleError
from lifecycle.engine import shared_engine
from lifecycle.stages.generation import Generation, generate_steps
from lifecycle.stages.kv_cache import timed_prefill
from lifecycle.stages.sampling import SamplingSettings

GREEDY = SamplingSettings(temperature=0.0)


@dataclass(frozen=True)
class TurnUsage:
    """One request of the conversation.

    ``prompt_tokens`` is everything sent; ``repeated_tokens`` how many of them open exactly like the
    previous request's prompt and answer (what a prefix cache could serve); ``cached_tokens`` what
    the server reports it did serve. ``prefill_seconds`` is this request's prefill as served,
    ``cold_prefill_seconds`` the same prompt's prefill with no cache at all.
    """

    turn: int
    message: str
    answer: str
    prompt_tokens: int
    repeated_tokens: int
    cached_tokens: int
    prefill_seconds: float
    cold_prefill_seconds: float

    @property
    def saved_seconds(self) -> float:
        return self.cold_prefill_seconds - self.prefill_seconds


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids ``a`` and ``b`` share."""
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


def replay_turns(loaded, messages: Sequence[str], max_tokens: int = 24, system: str | None = None,
                 cold_seconds: Mapping[tuple[int, ...], float] | None = None) -> list[TurnUsage]:
    """Send ``messages`` as consecutive user turns, each request re-sending the whole history.

    Answers are greedy, so a replay is reproducible. ``cold_seconds`` holds prefills from scratch already
    measured the same way (e.g. the KV cache page's own prompt, timed in its latency sweep), by prompt ids:
    a turn whose prompt is there is not prefilled a second time.
    """
    if not messages or not all(isinstance(m, str) and m.strip() for m in messages):
        raise LifecycleError("messages must be a non-empty list of non-empty strings", param="messages")
    engine = shared_engine(loaded)
    history: list[dict] = []
    previous: list[int] = []
    turns = []
    for turn, message in enumerate(messages, start=1):
        ids = render_prompt(Conversation(new_message=message, system=system, history=history)).ids
        timings: dict = {}
        steps = list(generate_steps(loaded, ids, GREEDY, max_tokens, timings=timings))
        answer = Generation.collect(ids, steps, timings.get("prefill_seconds", 0.0))
        cold = (cold_seconds or {}).get(tuple(ids))
        if cold is None:
            cold = engine.run(lambda _model, ids=ids: timed_prefill(engine.stack, ids, engine.prefill_chunk)[0])
        turns.append(TurnUsage(
            turn=turn,
            message=message,
            answer=answer.text,
            prompt_tokens=len(ids),
            repeated_tokens=common_prefix(ids, previous),
            cached_tokens=int(timings.get("cached_tokens", 0)),
            prefill_seconds=answer.prefill_seconds,
            cold_prefill_seconds=cold,
        ))
        previous = ids + answer.token_ids
        history += [{"role": "user", "content": message}, {"role": "assistant", "content": answer.text}]
    return turns

