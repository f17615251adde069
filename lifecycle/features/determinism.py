"""Temperature 0 is not a promise: the same prompt's logits through the engine's different roads.

A greedy answer is chosen by the largest logit at every step, and a logit is a sum of hundreds of
products. Float addition is not associative, so a kernel that adds in another order (the compiled
``gemv.c`` over packed codes for one token, oneDNN's blocked products for a batch or a prompt
chunk, another thread count splitting the work) gives slightly different numbers. Whether that
changes an answer depends on the gap between the two best tokens.

``compare_roads`` takes the answer the engine gives the prompt alone (prefill, then one-token
steps) and recomputes the same positions through the other roads, all in one engine job on the
engine's own fused model (``LlamaStack.forward``):

- ``batch``: every decode step beside other requests' tokens (a [B, d] product: oneDNN),
- ``one pass``: prompt and answer in one [T, d] product, as a prefill computes them,
- ``chunked prefill``: the prompt fed in chunks of ``chunk`` tokens, then one-token steps,
- ``other threads``: the alone road again with PyTorch on another thread count (1, or 2 when the server
  already runs on 1).

For each: the largest logit difference from the alone road, at which steps the greedy pick
differs, and against it the alone road's narrowest gap between its two best logits.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lifecycle.engine import shared_engine
from lifecycle.engine.llama import LlamaStack, Segment
from lifecycle.errors import LifecycleError
from lifecycle.stages.vocabulary import token_bytes

ANSWER_TOKENS = 12
CHUNK = 8
BATCH_PROMPTS = ("Once upon a time, there was a", "The three primary colours are", "def fibonacci(n):")
ROADS = ("batch", "one pass", "chunked prefill", "other threads")


@dataclass(frozen=True)
class Road:
    """One road's logits against the alone road's: the largest absolute difference per step and
    overall, and the steps whose greedy pick differs."""

    name: str
    kernel: str
    step_differences: list[float]
    changed_steps: list[int]

    @property
    def largest(self) -> float:
        return max(self.step_differences, default=0.0)

    @property
    def exact(self) -> bool:
        return self.largest == 0.0


@dataclass(frozen=True)
class SummationOrder:
    """One logit (the first step's chosen token) added up three ways from the same fp32 products."""

    forward: float
    backward: float
    exact: float
    terms: int


@dataclass(frozen=True)
class DeterminismRun:
    prompt_tokens: int
    answer_ids: list[int]
    answer_text: str
    margins: list[float]  # the alone road's gap between its best and second-best logit, per step
    roads: list[Road]
    summation: SummationOrder
    kernel: str

    @property
    def narrowest(self) -> tuple[int, float]:
        """The step (from 1) with the smallest top-two gap, and that gap."""
        index = int(np.argmin(self.margins))
        return index + 1, self.margins[index]

    def road(self, name: str) -> Road:
        return next(road for road in self.roads if road.name == name)


def _alone(stack: LlamaStack, prompt: list[int], answer: list[int] | None, steps: int,
           chunk: int | None = None) -> Generator:
    """Prefill (in chunks of ``chunk`` when given), then one-token steps; greedy unless ``answer`` is
    given (then its tokens are fed). Yields after each forward pass; returns the logits rows and the
    tokens fed."""
    cache = stack.new_cache(len(prompt) + steps)
    size = chunk or len(prompt)
    for start in range(0, len(prompt), size):
        part = prompt[start:start + size]
        row = stack.forward([Segment(part, start, cache, start + len(part) == len(prompt))])
        yield
    rows, fed = [row[0].clone()], []
    for index in range(steps - 1):
        token = answer[index] if answer is not None else int(torch.argmax(rows[-1]))
        fed.append(token)
        rows.append(stack.forward([Segment([token], len(prompt) + index, cache, True)])[0].clone())
        yield
    if answer is None:
        fed.append(int(torch.argmax(rows[-1])))
    return torch.stack(rows), fed


def _whole(slices: Generator):
    """Run a generator of slices to its end here; return what it returns."""
    try:
        while True:
            next(slices)
    except StopIteration as finished:
        return finished.value


def _batched(stack: LlamaStack, prompt: list[int], answer: list[int], others: list[list[int]]) -> Generator:
    """The alone road's steps, each decoded beside one token of every other prompt (yielding after
    each step); returns this prompt's logits rows."""
    steps = len(answer)
    caches = [stack.new_cache(len(ids) + steps) for ids in others]
    tokens = [int(torch.argmax(stack.forward([Segment(ids, 0, c, True)])[0])) for ids, c in zip(others, caches)]
    cache = stack.new_cache(len(prompt) + steps)
    rows = [stack.forward([Segment(prompt, 0, cache, True)])[0].clone()]
    yield
    for index in range(steps - 1):
        middle = len(others) // 2  # ours among the others, as a batch is ordered by arrival
        segments = [Segment([t], len(ids) + index, c, True) for t, ids, c in zip(tokens, others, caches)]
        segments.insert(middle, Segment([answer[index]], len(prompt) + index, cache, True))
        out = stack.forward(segments)
        rows.append(out[middle].clone())
        yield
        tokens = [int(torch.argmax(out[i if i < middle else i + 1])) for i in range(len(others))]
    return torch.stack(rows)


def _one_pass(stack: LlamaStack, prompt: list[int], answer: list[int]) -> torch.Tensor:
    """Prompt and answer in a single forward pass: one [T, d] product per matrix."""
    cache = stack.new_cache(len(prompt) + len(answer))
    segments = [Segment(prompt, 0, cache, True)]
    segments += [Segment([token], len(prompt) + index, cache, True) for index, token in enumerate(answer[:-1])]
    return stack.forward(segments)


def _compare(name: str, kernel: str, reference: torch.Tensor, rows: torch.Tensor) -> Road:
    differences = (rows - reference).abs().amax(dim=1)
    changed = torch.nonzero(rows.argmax(dim=1) != reference.argmax(dim=1)).flatten()
    return Road(name, kernel, [float(d) for d in differences], [int(i) + 1 for i in changed])


def _summation(stack: LlamaStack, prompt: list[int], token: int) -> SummationOrder:
    """The first step's logit of ``token`` as the head's dot product, added forwards, backwards
    (both sequential fp32) and exactly (float64 of the same fp32 products)."""
    cache = stack.new_cache(len(prompt))
    hidden: dict = {}
    original = stack.linear

    def keep(x, weight, bias):
        if weight is stack.lm_head:
            hidden["y"] = x[-1].clone()
        return original(x, weight, bias)

    stack.linear = keep
    try:
        stack.forward([Segment(prompt, 0, cache, True)])
    finally:
        stack.linear = original
    with torch.inference_mode():
        products = (hidden["y"] * stack.lm_head[token]).numpy().astype(np.float32)
    return SummationOrder(float(np.cumsum(products, dtype=np.float32)[-1]),
                          float(np.cumsum(products[::-1], dtype=np.float32)[-1]),
                          float(np.sum(products.astype(np.float64))), len(products))


def compare_roads(loaded, prompt_ids: Sequence[int], steps: int = ANSWER_TOKENS, chunk: int = CHUNK) -> DeterminismRun:
    """The alone road's greedy answer of ``steps`` tokens after ``prompt_ids`` and every other road's
    logits at the same positions, in one engine job (a road at a time; the model's weights do not change)."""
    prompt = [int(i) for i in prompt_ids]
    if not prompt:
        raise LifecycleError("The prompt is empty.", param="prompt")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 2 <= steps <= 64:
        raise LifecycleError("The answer length must be a whole number from 2 to 64 tokens.", param="steps")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk < len(prompt):
        raise LifecycleError(f"The prefill chunk must be from 1 to {len(prompt) - 1} tokens (shorter than the prompt).",
                             param="chunk")
    engine = shared_engine(loaded)
    stack = engine.stack
    with loaded.tokenizer_lock:
        others = [loaded.tokenizer(text, add_special_tokens=False)["input_ids"] for text in BATCH_PROMPTS]
    if len(prompt) + steps > stack.max_positions:
        raise LifecycleError(f"The prompt and answer must fit the model's {stack.max_positions:,}-token window.",
                             param="prompt")

    def job(_model):  # one forward pass a slice: other requests step in between, and the engine sees progress
        stack.few_rows()  # the kernels settled first: the engine's timing of them must not end between two roads
        reference, answer = yield from _alone(stack, prompt, None, steps)
        threads = torch.get_num_threads()
        other = 2 if threads == 1 else 1
        torch.set_num_threads(other)
        try:  # in one slice: no other request's step may run on the other thread count
            single, _ = _whole(_alone(stack, prompt, answer, steps))
        finally:
            torch.set_num_threads(threads)
        chunked, _ = yield from _alone(stack, prompt, answer, steps, chunk)
        batched = yield from _batched(stack, prompt, answer, others)
        yield
        whole = _one_pass(stack, prompt, answer)
        top = torch.topk(reference, 2, dim=1).values
        batch_rows, pass_rows = len(others) + 1, len(prompt) + steps - 1
        roads = [
            _compare("batch", f"{stack.products_of(batch_rows)}, {batch_rows} rows a step", reference, batched),
            _compare("one pass", f"{stack.products_of(pass_rows)}, {pass_rows} rows at once", reference, whole),
            _compare("chunked prefill", f"prompt in chunks of {chunk}", reference, chunked),
            _compare("other threads", f"torch threads {other} (not {threads})", reference, single),
        ]
        return answer, [float(m) for m in top[:, 0] - top[:, 1]], roads, _summation(stack, prompt, answer[0])

    answer, margins, roads, summation = engine.run_sliced(job)
    table = token_bytes(loaded)
    text = b"".join(table.of(token) for token in answer).decode("utf-8", errors="replace")
    return DeterminismRun(len(prompt), answer, text, margins, roads, summation, stack.kernels_named)

