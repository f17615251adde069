"""The one-token step's kernel, chosen per matrix by timing the candidates on this machine at start.

Which product reads a matrix fastest for one token depends on the CPU and on the weights: on a
2-core Xeon (AVX-512) ``gemv.c`` over fp32 beat oneDNN, but on an AVX2 AMD machine it measured
slower than oneDNN on 4 of 5 matrices (the output head 10,669 us against 7,344), and the Hub's bf16
checkpoint or a fine-tune has no packed codes at all. So when the engine is built, every available candidate
runs on one matrix of each distinct shape (and packing) of the step, and every matrix of that kind
gets the fastest. The measurement is cheap: one warm-up call and at most ``CALLS`` timed rounds of
the candidates in turn per shape, fewer once ``BUDGET_SECONDS`` a candidate is spent (the 113 MB
fp32 head costs ~10 ms a call), and the time of one call is the fastest of them (the least
disturbed by other work).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from lifecycle.engine.packing import Affine4, Packed, Scaled8

CALLS = 5
BUDGET_SECONDS = 0.004  # per candidate and shape, after the first timed call

Kernel = Callable[[torch.Tensor, "torch.Tensor | Packed", "torch.Tensor | None"], torch.Tensor]
Timer = Callable[[dict[str, Callable[[int], object]]], dict[str, float]]


@dataclass(frozen=True)
class Candidate:
    """A kernel for one-row products; ``packed``: it reads a matrix's packed codes, not its fp32
    weights; ``contiguous_only``: it reads fp32 weights only when they are contiguous."""

    name: str
    kernel: Kernel
    packed: bool = False
    contiguous_only: bool = False


@dataclass(frozen=True)
class ShapeChoice:
    """What was measured for one kind of matrix (shape and packing) and what its matrices run."""

    shape: tuple[int, int]
    packing: str  # "4-bit codes", "8-bit codes" or "fp32"
    matrices: int
    seconds: dict[str, float]  # candidate name -> one call, measured
    chosen: str


@dataclass(frozen=True)
class KernelChoice:
    """Each matrix's kernel and operand (its packed codes or its fp32 weights), by ``id`` of the weight."""

    by_matrix: dict[int, tuple[Kernel, torch.Tensor | Packed, str]]
    shapes: list[ShapeChoice]
    measuring_seconds: float

    def counts(self) -> dict[str, int]:
        """How many matrices each candidate runs."""
        counts: dict[str, int] = {}
        for shape in self.shapes:
            counts[shape.chosen] = counts.get(shape.chosen, 0) + shape.matrices
        return counts


def fastest_calls(calls: dict[str, Callable[[int], object]]) -> dict[str, float]:
    """Seconds of one call of each: the fastest of a few, after a warm-up, taken in turns (so a
    burst of other work slows every candidate alike), until ``CALLS`` rounds or the budget is spent.
    ``call(i)`` is the i-th call (0: the warm-up), so the caller can give each one another matrix."""
    best = {name: float("inf") for name in calls}
    for call in calls.values():
        call(0)
    spent = 0.0
    for index in range(1, CALLS + 1):
        for name, call in calls.items():
            started = time.perf_counter()
            call(index)
            took = time.perf_counter() - started
            best[name], spent = min(best[name], took), spent + took
        if spent > BUDGET_SECONDS * len(calls):
            break
    return best


def choose_kernels(matrices: list[torch.Tensor], packed: dict[int, Packed], candidates: list[Candidate],
                   timer: Timer = fastest_calls) -> KernelChoice:
    """Time every candidate that can read it on one matrix of each kind; every matrix of the kind
    gets the fastest (the first candidate on a tie)."""
    started = time.perf_counter()
    kinds: dict[tuple, list[torch.Tensor]] = {}
    for matrix in matrices:
        kind = (tuple(matrix.shape), _packing(packed.get(id(matrix))), matrix.is_contiguous())
        kinds.setdefault(kind, []).append(matrix)
    by_matrix: dict[int, tuple[Kernel, torch.Tensor | Packed, str]] = {}
    shapes = []
    with torch.inference_mode():
        for (shape, packing, _), group in kinds.items():
            sample = group[0]
            x = torch.randn(1, shape[1], generator=torch.Generator().manual_seed(0))
            usable = [c for c in candidates if (id(sample) in packed if c.packed else
                                                (sample.is_contiguous() or not c.contiguous_only))]
            calls = {c.name: partial(_call, c, group, packed, x, k, len(usable)) for k, c in enumerate(usable)}
            seconds = timer(calls)
            best = min(usable, key=lambda c: seconds[c.name])
            for matrix in group:
                by_matrix[id(matrix)] = (best.kernel, packed[id(matrix)] if best.packed else matrix, best.name)
            shapes.append(ShapeChoice(shape, packing, len(group), seconds, best.name))
    return KernelChoice(by_matrix, shapes, time.perf_counter() - started)


def _call(candidate: Candidate, group: list[torch.Tensor], packed: dict[int, Packed], x: torch.Tensor,
          turn: int, turns: int, index: int) -> torch.Tensor:
    """The candidate's ``index``-th call, on a matrix of the group no other call of this measuring
    read (while the group has enough): a decode step reads each matrix once, from memory, and a
    matrix read again from the cache would favour the kernel that does the least arithmetic."""
    matrix = group[(index * turns + turn) % len(group)]
    return candidate.kernel(x, packed[id(matrix)] if candidate.packed else matrix, None)


def _packing(codes: Packed | None) -> str:
    if isinstance(codes, Affine4):
        return "4-bit codes"
    if isinstance(codes, Scaled8):
        return "8-bit codes"
    return "fp32"


def describe(choice: KernelChoice, batched: str, measured: bool = True) -> str:
    """The Live calls sentence: which kernel runs how many matrices, with the times measured (without
    them when ``measured`` is false: a caption elsewhere names the kernels only)."""
    total = sum(s.matrices for s in choice.shapes)
    runs = ", ".join(f"{name} for {count} of {total} matrices" for name, count in choice.counts().items())
    if not measured:
        return f"one-token steps: {runs}; batched steps and prefill: {batched}"
    timings = "; ".join(
        f"{s.shape[0]}×{s.shape[1]} {s.packing} (×{s.matrices}): "
        + ", ".join(f"{name} {seconds * 1e6:,.0f} µs" for name, seconds in s.seconds.items())
        for s in choice.shapes)
    return (f"one-token steps: {runs}, the fastest measured at start per kind of matrix "
            f"({choice.measuring_seconds * 1000:.0f} ms of measuring: {timings}); "
            f"batched steps and prefill: {batched}")
