"""The one-token kernel of each matrix is the one measured fastest on this machine at start: the
choice follows the measurements, never a slower kernel, and every candidate computes the same product."""

import random

import pytest
import torch
import torch.nn.functional as F

from lifecycle.engine import shared_engine
from lifecycle.engine.kernel_choice import (BATCH_ROWS, CALLS, Candidate, Timer, choose_kernels, describe,
                                            fastest_calls, few_rows_timing)
from lifecycle.engine.packing import pack


def _kernel(name):
    def kernel(x, weight, bias):
        return F.linear(x, weight if isinstance(weight, torch.Tensor) else torch.zeros(weight.shape), bias)

    kernel.__name__ = name
    return kernel


CANDIDATES = [Candidate("packed", _kernel("packed"), packed=True), Candidate("fp32", _kernel("fp32"), contiguous_only=True),
              Candidate("blas", _kernel("blas"))]


def _timer(table):
    """A timer answering from ``table`` (shape -> name -> seconds) instead of a clock."""
    def timer(calls):
        shape = next(iter(calls.values())).args[1][0].shape  # partial(_call, candidate, group, ...)
        return {name: table[tuple(shape)][name] for name in calls}

    return timer


@pytest.fixture(scope="module")
def matrices(loaded):
    stack = shared_engine(loaded).stack
    return [stack.blocks[0].qkv, stack.blocks[1].qkv, stack.blocks[0].o, stack.blocks[0].down]


def test_each_kind_of_matrix_gets_the_kernel_measured_fastest_for_it(matrices):
    packed = {id(m): pack(m) for m in matrices}
    assert all(packed.values())
    table = {tuple(matrices[0].shape): {"packed": 3e-5, "fp32": 2e-5, "blas": 9e-5},
             tuple(matrices[2].shape): {"packed": 1e-5, "fp32": 2e-5, "blas": 3e-5},
             tuple(matrices[3].shape): {"packed": 5e-5, "fp32": 6e-5, "blas": 4e-5}}
    choice = choose_kernels(matrices, packed, CANDIDATES, timer=_timer(table))
    assert [choice.by_matrix[id(m)][2] for m in matrices] == ["fp32", "fp32", "packed", "blas"]
    assert choice.by_matrix[id(matrices[2])][1] is packed[id(matrices[2])]  # the packed kernel reads the codes
    assert choice.by_matrix[id(matrices[0])][1] is matrices[0]
    assert choice.counts() == {"fp32": 2, "packed": 1, "blas": 1}
    sentence = describe(choice, "blas")
    assert "fp32 for 2 of 4 matrices" in sentence and "packed for 1 of 4 matrices" in sentence
    assert "960×576 4-bit codes (×2): packed 30 µs, fp32 20 µs, blas 90 µs" in sentence
    assert sentence.endswith("batched steps and prefill: blas")
    named = describe(choice, "blas", measured=False)
    assert "fp32 for 2 of 4 matrices" in named and "packed for 1 of 4 matrices" in named
    assert "µs" not in named and "measuring" not in named and named.endswith("batched steps and prefill: blas")


def _rows_timer(table):
    """A timer answering from ``table`` (shape -> rows of x -> name -> seconds)."""
    def timer(calls):
        args = next(iter(calls.values())).args  # partial(_call, candidate, group, packed, x, ...)
        return {name: table[tuple(args[1][0].shape)][args[3].shape[0]][name] for name in calls}

    return timer


def _timed(timing):
    """A few-row timing run to its end, as the engine runs it one product at a time: the choice it returns."""
    while True:
        try:
            next(timing)
        except StopIteration as done:
            return done.value


def test_a_few_rows_read_the_packed_codes_up_to_the_last_size_they_were_timed_faster(matrices):
    packed = {id(m): pack(m) for m in matrices}
    one_row = {"packed": 1e-5, "fp32": 2e-5, "blas": 3e-5}
    faster_until = {tuple(matrices[0].shape): 8, tuple(matrices[2].shape): 1, tuple(matrices[3].shape): 16}
    table = {shape: {1: one_row, **{rows: {"packed": rows * 1e-5, "blas": (2 if rows <= last else 0.5) * rows * 1e-5}
                                    for rows in BATCH_ROWS}} for shape, last in faster_until.items()}
    timer = _rows_timer(table)
    one_row_only = choose_kernels(matrices, packed, CANDIDATES, timer=timer)
    assert not one_row_only.few_rows and "a few rows" not in describe(one_row_only, "blas")
    choice = _timed(few_rows_timing(one_row_only, matrices, packed, CANDIDATES[0], CANDIDATES[-1], timer=timer))
    assert choice.by_matrix == one_row_only.by_matrix and choice.measuring_seconds == one_row_only.measuring_seconds
    assert {s.shape: s.packed_up_to for s in choice.shapes} == faster_until
    assert list(next(s for s in choice.shapes if s.packed_up_to == 8).batch_seconds) == [2, 4, 8, 16]
    assert list(next(s for s in choice.shapes if s.packed_up_to == 1).batch_seconds) == [2]  # stopped once blas won
    assert [choice.few_rows[id(m)][2] if id(m) in choice.few_rows else None for m in matrices] == [8, 8, None, 16]
    assert all(choice.few_rows[id(m)][1] is packed[id(m)] for m in (matrices[0], matrices[3]))
    assert [choice.packed_matrices(rows) for rows in (2, 8, 9, 16, 17)] == [3, 3, 1, 1, 0]
    assert ("; steps of a few rows: packed codes for 1 of 4 matrices up to 16 rows, 2 up to 8 rows; batched steps "
            "and prefill: blas") in describe(choice, "blas", measured=False)
    sentence = describe(choice, "blas")
    assert (f"packed codes for 1 of 4 matrices up to 16 rows, 2 up to 8 rows, timed one product at a "
            f"time after the engine's first work ({choice.few_rows_seconds * 1000:,.0f} ms of timing: ") in sentence
    assert "960×576 at 2/4/8/16 rows: packed 20/40/80/160 µs, blas 40/80/160/80 µs" in sentence  # blas won at 16
    assert "576×576 at 2 rows: packed 20 µs, blas 10 µs" in sentence


def _packed_always_wins(timed: list) -> Timer:
    """A timer under which every non-blas candidate is twice as fast as blas, noting each (shape, rows) it times."""
    def timer(calls):
        args = next(iter(calls.values())).args  # partial(_call, candidate, group, packed, x, ...)
        timed.append((tuple(args[1][0].shape), args[3].shape[0]))
        return {name: 1.0 if name == "blas" else 0.5 for name in calls}

    return timer


def test_matrices_read_as_fp32_only_are_not_timed_at_a_few_rows(matrices):
    packed = {id(matrices[0]): pack(matrices[0])}
    timed = []
    timer = _packed_always_wins(timed)
    choice = choose_kernels(matrices, packed, CANDIDATES, timer=timer)
    timed.clear()
    choice = _timed(few_rows_timing(choice, matrices, packed, CANDIDATES[0], CANDIDATES[-1], timer=timer))
    assert timed == [(tuple(matrices[0].shape), rows) for rows in BATCH_ROWS]  # packed won at every size
    assert set(choice.few_rows) == {id(matrices[0])}  # matrices[1], the same shape, is not packed here


def test_the_few_row_timing_times_one_product_per_step(matrices):
    """The engine times a few rows one product per ``next``: a request arriving meanwhile waits for one
    product, not the whole timing."""
    packed = {id(m): pack(m) for m in matrices}
    timed = []
    timer = _packed_always_wins(timed)
    one_row_only = choose_kernels(matrices, packed, CANDIDATES, timer=timer)
    timed.clear()
    timing = few_rows_timing(one_row_only, matrices, packed, CANDIDATES[0], CANDIDATES[-1], timer=timer)
    steps = 0
    while True:
        try:
            next(timing)
        except StopIteration as done:
            choice = done.value
            break
        steps += 1
        assert len(timed) == steps  # exactly one product timed per step
    kinds = len({tuple(m.shape) for m in matrices})
    assert steps == kinds * len(BATCH_ROWS)  # packed won at every size: every size of every kind timed
    assert set(choice.few_rows) == {id(m) for m in matrices}


def test_a_slower_kernel_is_never_chosen(matrices):
    rng = random.Random(7)
    packed = {id(matrices[0]): pack(matrices[0])}  # the others are read as fp32 only
    for _ in range(20):
        table = {tuple(m.shape): {c.name: rng.uniform(1e-6, 1e-3) for c in CANDIDATES} for m in matrices}
        choice = choose_kernels(matrices, packed, CANDIDATES, timer=_timer(table))
        for shape in choice.shapes:
            assert shape.seconds[shape.chosen] == min(shape.seconds.values())
        assert "packed" not in {s.chosen for s in choice.shapes if s.packing == "fp32"}


def test_a_kernel_that_cannot_read_a_matrix_is_not_offered_for_it(matrices):
    columns = matrices[2][:, :288]  # not contiguous, and not packed
    choice = choose_kernels([columns], {}, CANDIDATES, timer=lambda calls: {name: 1.0 for name in calls})
    assert list(choice.shapes[0].seconds) == ["blas"]


def test_one_disturbed_call_is_not_the_only_one_timed():
    """A short call that waited out another thread's time slice once spends the budget alone; the next rounds
    still time it (a long call, past the budget by itself, is timed once, as before)."""
    import time

    short = fastest_calls({"disturbed": lambda i: time.sleep(0.03 if i == 1 else 0.0005),
                           "quiet": lambda i: time.sleep(0.0005)}, clock=time.perf_counter)
    assert short["disturbed"] < 0.01
    rounds = []
    fastest_calls({"long": lambda i: rounds.append(i) or time.sleep(0.006)}, clock=time.perf_counter)
    assert rounds == [0, 1]  # the warm-up and one timed call


def test_with_one_torch_thread_a_wait_for_the_core_is_not_counted(monkeypatch):
    """The app runs one PyTorch thread: a call is timed by the CPU time of the thread that makes it, so time spent
    waiting (here asleep, as a thread waiting out another's time slice) does not count; with more threads, wall
    time does."""
    import time

    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    waited = fastest_calls({"waits": lambda i: time.sleep(0.02)})
    assert waited["waits"] < 0.005
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert fastest_calls({"waits": lambda i: time.sleep(0.02)})["waits"] >= 0.02


def test_every_call_of_a_measurement_reads_a_matrix_no_other_call_read(matrices):
    """Timed on one matrix again and again, a matrix would be read from the cache, not from memory."""
    group = [matrices[0].clone() for _ in range(2 * (CALLS + 1) + 1)]
    seen = []
    recording = [Candidate(c.name, lambda x, w, b: seen.append(w.data_ptr()) or x) for c in CANDIDATES[1:]]
    choose_kernels(group, {}, recording, timer=fastest_calls)
    assert len(seen) == len(set(seen)) <= len(group)


def test_every_candidate_computes_the_product_and_the_engine_runs_the_chosen_one(loaded):
    stack = shared_engine(loaded).stack
    assert stack.choice is not None, "this machine compiles gemv.c"
    assert stack.choice.counts() and sum(stack.choice.counts().values()) == len(stack.matrices())
    gemv = next(kernel for kernel, _, name in stack.choice.by_matrix.values() if name.startswith("gemv.c")) \
        if any(n.startswith("gemv.c") for n in stack.choice.counts()) else None
    with torch.inference_mode():
        for weight in (stack.blocks[2].qkv, stack.blocks[2].down, stack.lm_head):
            x = torch.randn(1, weight.shape[1], generator=torch.Generator().manual_seed(weight.shape[0]))
            expected = F.linear(x, weight)
            tolerance = 1e-4 * float(expected.abs().max())
            operands = [weight] + ([stack.packed[id(weight)]] if id(weight) in stack.packed else [])
            if gemv is not None:
                for operand in operands:
                    assert torch.allclose(gemv(x, operand, None), expected, rtol=1e-4, atol=tolerance)
            kernel, operand, _ = stack.choice.by_matrix[id(weight)]
            assert torch.equal(stack.linear(x, weight, None), kernel(x, operand, None))
    assert f"{stack.choice.measuring_seconds * 1000:,.0f} ms of measuring" in stack.kernels
