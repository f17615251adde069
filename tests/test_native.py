"""The compiled matrix-vector product of the engine's one-token steps: built here, equal to F.linear on
the model's own weights, sharing PyTorch's OpenMP runtime, and absent when switched off."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lifecycle.engine import shared_engine
from lifecycle.engine.native import DISABLE_ENV, compiled_gemv


@pytest.fixture(scope="module")
def gemv(tmp_path_factory):
    built = compiled_gemv(tmp_path_factory.mktemp("kernels"))
    assert built is not None, "the C compiler of `make install` should build gemv.c on this machine"
    return built


def test_it_equals_f_linear_on_every_matrix_of_a_decode_step(loaded, gemv):
    stack = shared_engine(loaded).stack
    x = torch.randn(1, stack.hidden, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        for weight in (stack.blocks[0].qkv, stack.blocks[0].o, stack.blocks[0].gate_up, stack.lm_head):
            expected = F.linear(x, weight)
            assert torch.allclose(gemv(x, weight, None), expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))
        down = stack.blocks[0].down
        wide = torch.randn(1, down.shape[1], generator=torch.Generator().manual_seed(2))
        bias = torch.randn(down.shape[0])
        assert torch.allclose(gemv(wide, down, bias), F.linear(wide, down, bias), rtol=1e-4, atol=1e-3)


def test_the_engines_product_equals_f_linear_for_one_row_and_for_more(loaded, gemv):
    stack = shared_engine(loaded).stack
    weight = stack.blocks[0].o
    for rows in (1, 3):
        x = torch.randn(rows, stack.hidden, generator=torch.Generator().manual_seed(rows))
        with torch.inference_mode():
            assert torch.allclose(stack.linear(x, weight, None), F.linear(x, weight), rtol=1e-4, atol=1e-4)


def test_a_few_rows_over_packed_codes_give_each_row_its_one_row_result_bit_for_bit(loaded, gemv):
    """A request's numbers do not depend on who shares its step: every row of a small batch is computed as
    it would be alone (tiles of four rows and each remainder), with and without a bias, and equals F.linear."""
    stack = shared_engine(loaded).stack
    assert gemv.reads_packed, "this machine has AVX2: the engine packs the GGUF's codes"
    with torch.inference_mode():
        for weight in (stack.blocks[0].qkv, stack.blocks[0].down, stack.lm_head):
            codes = stack.packed[id(weight)]
            bias = torch.randn(weight.shape[0], generator=torch.Generator().manual_seed(3))
            for rows in (2, 3, 4, 5, 8, 11):
                x = torch.randn(rows, weight.shape[1], generator=torch.Generator().manual_seed(rows))
                for b in (None, bias):
                    together = gemv(x, codes, b)
                    assert together.shape == (rows, weight.shape[0])
                    assert torch.equal(together, torch.cat([gemv(x[i:i + 1], codes, b) for i in range(rows)]))
                    expected = F.linear(x, weight, b)
                    assert torch.allclose(together, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


def test_fp32_weights_are_read_for_one_row_only(loaded, gemv):
    weight = shared_engine(loaded).stack.blocks[0].o
    with pytest.raises(ValueError, match="one row"):
        gemv(torch.randn(2, weight.shape[1]), weight, None)


def test_one_openmp_runtime_is_loaded(gemv):
    runtimes = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "libgomp" in line}
    assert len(runtimes) == 1, runtimes


def test_switched_off_it_is_not_built(monkeypatch, tmp_path):
    monkeypatch.setenv(DISABLE_ENV, "0")
    assert compiled_gemv(tmp_path) is None
    assert not list(tmp_path.iterdir())


def test_a_broken_compiler_leaves_onednn(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "false")  # exits 1 for any arguments, as a failing compile does
    assert compiled_gemv(tmp_path) is None


def test_a_cache_directory_that_cannot_be_written_leaves_onednn(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert compiled_gemv(blocked / "kernels") is None
