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

A decode step of a few requests has a few rows, and there the batched kernel (oneDNN) reads the
fp32 weights once for all of them, while the packed kernel reads a fifth of the bytes and rebuilds
each block once for up to four rows. Which wins depends on the rows: on a 2-core AVX2 AMD machine
the packed one was 2-3x faster at 2-4 rows and even at about 16 (``gemv.c``'s ``gemm_*``). So each packed kind
of matrix is also timed at ``BATCH_ROWS`` rows, in turn, against the batched kernel, until the batched one
wins; its matrices take the packed kernel up to the last size it won (``few_rows_timing``, which the engine
runs one product at a time after its first work, not at start: while idle, or between two steps within
a fifth of its time).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from lifecycle.engine.packing import Affine4, Packed, Scaled8

CALLS = 5
BUDGET_SECONDS = 0.004  # per candidate and shape, after the first timed call
MIN_ROUNDS = 3
BATCH_ROWS = (2, 4, 8, 16)  # rows at which a packed kind of matrix is timed against the batched kernel

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
    batch_seconds: dict[int, dict[str, float]] = field(default_factory=dict)  # rows -> name -> one call
    packed_up_to: int = 1  # the most rows a step gives this kind's packed kernel rather than the batched one


@dataclass(frozen=True)
class KernelChoice:
    """Each matrix's kernel and operand (its packed codes or its fp32 weights), by ``id`` of the weight."""

    by_matrix: dict[int, tuple[Kernel, torch.Tensor | Packed, str]]
    shapes: list[ShapeChoice]
    measuring_seconds: float
    few_rows: dict[int, tuple[Kernel, Packed, int]] = field(default_factory=dict)  # id -> packed kernel, codes, rows
    few_rows_seconds: float = 0.0  # the timing at a few rows (``few_rows_timing``), after start

    def packed_matrices(self, rows: int) -> int:
        """How many matrices a step of ``rows`` rows reads with the packed kernel (rows > 1)."""
        return sum(1 for _, _, up_to in self.few_rows.values() if rows <= up_to)

    def counts(self) -> dict[str, int]:
        """How many matrices each candidate runs."""
        counts: dict[str, int] = {}
        for shape in self.shapes:
            counts[shape.chosen] = counts.get(shape.chosen, 0) + shape.matrices
        return counts


def call_clock() -> Callable[[], float]:
    """The clock a measurement reads: with one PyTorch thread (the app's), the calling thread's CPU time, which
    a wait for the core does not count (right after start, beside the app's other threads, products of 0.15-0.3 ms
    took 0.9-22 ms of wall time, whole rounds alike: wall times chose oneDNN where the codes are 2.5x faster);
    with more threads, wall time (another thread's share of the work is not the caller's CPU time)."""
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def fastest_calls(calls: dict[str, Callable[[int], object]],
                  clock: Callable[[], float] | None = None) -> dict[str, float]:
    """Seconds of one call of each: the fastest of a few, after a warm-up, taken in turns (so a
    burst of other work slows every candidate alike), until ``CALLS`` rounds or the budget is spent, but
    at least ``MIN_ROUNDS`` rounds of calls shorter than the budget: on a busy machine a call of 0.25 ms
    took 10-12 ms once (its thread waited out another's time slice), and one such call would otherwise
    spend the budget and be the only one timed. ``call(i)`` is the i-th call (0: the warm-up), so the
    caller can give each one another matrix."""
    clock = clock or call_clock()
    best = {name: float("inf") for name in calls}
    for call in calls.values():
        call(0)
    spent = 0.0
    for index in range(1, CALLS + 1):
        for name, call in calls.items():
            started = clock()
            call(index)
            took = clock() - started
            best[name], spent = min(best[name], took), spent + took
        if spent > BUDGET_SECONDS * len(calls) and (index >= MIN_ROUNDS or min(best.values()) > BUDGET_SECONDS):
            break
    return best


def choose_kernels(matrices: list[torch.Tensor], packed: dict[int, Packed], candidates: list[Candidate],
                   timer: Timer = fastest_calls) -> KernelChoice:
    """Time every candidate that can read it on one matrix of each kind; every matrix of the kind
    gets the fastest (the first candidate on a tie)."""
    started = time.perf_counter()
    by_matrix: dict[int, tuple[Kernel, torch.Tensor | Packed, str]] = {}
    shapes = []
    with torch.inference_mode():
        for (shape, packing, contiguous), group in _kinds(matrices, packed).items():
            usable = [c for c in candidates if (id(group[0]) in packed if c.packed else
                                                (contiguous or not c.contiguous_only))]
            seconds = timer(_calls(usable, group, packed, _rows(1, shape[1])))
            best = min(usable, key=lambda c: seconds[c.name])
            for matrix in group:
                by_matrix[id(matrix)] = (best.kernel, packed[id(matrix)] if best.packed else matrix, best.name)
            shapes.append(ShapeChoice(shape, packing, len(group), seconds, best.name))
    return KernelChoice(by_matrix, shapes, time.perf_counter() - started)


def few_rows_timing(choice: KernelChoice, matrices: list[torch.Tensor], packed: dict[int, Packed],
                    reader: Candidate, batched: Candidate,
                    timer: Timer = fastest_calls) -> Generator[None, None, KernelChoice]:
    """``choice`` with each packed kind of matrix also timed at ``BATCH_ROWS`` rows, ``reader`` (a packed
    candidate) against ``batched``, in turn until ``batched`` wins; its matrices take ``reader`` up to the
    last size it won. One kind at one number of rows per ``next`` (at most 0.2 s on a 2-core AMD machine), so
    the engine times them while idle or between two steps and a request arriving meanwhile waits for one such
    product only; the generator returns the choice, with ``few_rows_seconds`` the time spent timing."""
    spent = 0.0
    few_rows: dict[int, tuple[Kernel, Packed, int]] = {}
    measured = {}
    for (shape, packing, contiguous), group in _kinds(matrices, packed).items():
        if packing == "fp32" or not contiguous:
            continue
        batch_seconds, up_to = {}, 1
        for rows in BATCH_ROWS:
            started = time.perf_counter()
            with torch.inference_mode():
                seconds = timer(_calls([reader, batched], group, packed, _rows(rows, shape[1])))
            spent += time.perf_counter() - started
            yield
            batch_seconds[rows] = seconds
            if seconds[reader.name] >= seconds[batched.name]:
                break
            up_to = rows
        measured[(shape, packing)] = (batch_seconds, up_to)
        for matrix in group if up_to > 1 else ():
            few_rows[id(matrix)] = (reader.kernel, packed[id(matrix)], up_to)
    shapes = [replace(s, batch_seconds=measured[s.shape, s.packing][0], packed_up_to=measured[s.shape, s.packing][1])
              if (s.shape, s.packing) in measured else s for s in choice.shapes]
    return replace(choice, shapes=shapes, few_rows=few_rows, few_rows_seconds=spent)


def _kinds(matrices: list[torch.Tensor], packed: dict[int, Packed]) -> dict[tuple, list[torch.Tensor]]:
    """The matrices grouped by shape, packing and whether they are contiguous, in order of first appearance."""
    kinds: dict[tuple, list[torch.Tensor]] = {}
    for matrix in matrices:
        kind = (tuple(matrix.shape), _packing(packed.get(id(matrix))), matrix.is_contiguous())
        kinds.setdefault(kind, []).append(matrix)
    return kinds


def _rows(rows: int, n: int) -> torch.Tensor:
    return torch.randn(rows, n, generator=torch.Generator().manual_seed(rows))


def _calls(usable: list[Candidate], group: list[torch.Tensor], packed: dict[int, Packed],
           x: torch.Tensor) -> dict[str, Callable[[int], object]]:
    return {c.name: partial(_call, c, group, packed, x, k, len(usable)) for k, c in enumerate(usable)}


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
    few = _few_rows_sentence(choice, total, measured)
    if not measured:
        return f"one-token steps: {runs}; {few}batched steps and prefill: {batched}"
    timings = "; ".join(
        f"{s.shape[0]}×{s.shape[1]} {s.packing} (×{s.matrices}): "
        + ", ".join(f"{name} {seconds * 1e6:,.0f} µs" for name, seconds in s.seconds.items())
        for s in choice.shapes)
    return (f"one-token steps: {runs}, the fastest measured at start per kind of matrix "
            f"({choice.measuring_seconds * 1000:,.0f} ms of measuring: {timings}); "
            f"{few}batched steps and prefill: {batched}")


def _few_rows_sentence(choice: KernelChoice, total: int, measured: bool) -> str:
    """``"steps of a few rows: packed codes for 90 of 121 matrices up to 16 rows, 31 up to 4 rows; "``, with the
    times measured at each number of rows when ``measured``."""
    limits = sorted(Counter(up_to for _, _, up_to in choice.few_rows.values()).items(), reverse=True)
    if not limits:
        return ""
    parts = [f"{count} of {total} matrices up to {rows} rows" if index == 0 else f"{count} up to {rows} rows"
             for index, (rows, count) in enumerate(limits)]
    if not measured:
        return f"steps of a few rows: packed codes for {', '.join(parts)}; "
    timings = "; ".join(
        f"{s.shape[0]}×{s.shape[1]} at {'/'.join(map(str, s.batch_seconds))} rows: "
        + ", ".join(f"{name} {'/'.join(f'{t[name] * 1e6:,.0f}' for t in s.batch_seconds.values())} µs"
                    for name in next(iter(s.batch_seconds.values())))
        for s in choice.shapes if s.batch_seconds)
    return (f"steps of a few rows: packed codes for {', '.join(parts)}, timed one product at a time after the "
            f"engine's first work ({choice.few_rows_seconds * 1000:,.0f} ms of timing: {timings}); ")
