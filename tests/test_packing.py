"""Packed weights: the model's matrices as the 4-bit and 8-bit codes the GGUF shipped, rebuilding
every fp32 weight exactly, and the compiled product over them equal to the fp32 one bit for bit."""

from pathlib import Path

import pytest
import torch

from lifecycle.engine import shared_engine
from lifecycle.engine.native import compiled_gemv
from lifecycle.engine.packing import Affine4, Scaled8, pack, unpack


def _has_avx2() -> bool:
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return False
    return "avx2" in flags.split()


# The packed kernels are AVX2 code; elsewhere the engine reads fp32 weights (tests/test_native.py).
needs_avx2 = pytest.mark.skipif(not _has_avx2(), reason="this CPU has no AVX2: the engine reads fp32 weights")


@pytest.fixture(scope="module")
def stack(loaded):
    return shared_engine(loaded).stack


@pytest.fixture(scope="module")
def gemv(tmp_path_factory):
    built = compiled_gemv(tmp_path_factory.mktemp("kernels"))
    assert built is not None and built.reads_packed, "this machine's CPU has AVX2 and its C compiler builds gemv.c"
    return built


@needs_avx2
def test_every_matrix_of_a_decode_step_packs_exactly_at_under_a_third_of_the_bytes(stack):
    matrices = stack.matrices()
    assert len(matrices) == 4 * stack.layers + 1
    assert all(id(m) in stack.packed for m in matrices)
    for m in matrices[:4] + matrices[-1:]:
        assert torch.equal(unpack(stack.packed[id(m)]), m)
    assert all(isinstance(stack.packed[id(m)], Affine4) for m in matrices[:-1])
    assert isinstance(stack.packed[id(stack.lm_head)], Scaled8)  # the tied head: GGUF's Q8_0 embedding
    dense = sum(m.numel() * m.element_size() for m in matrices)
    packed = sum(p.nbytes for p in stack.packed.values())
    assert packed < 0.3 * dense


@needs_avx2
def test_the_packed_product_is_the_fp32_product_bit_for_bit(stack, gemv):
    block = stack.blocks[3]
    with torch.inference_mode():
        for weight in (block.qkv, block.o, block.gate_up, block.down, stack.lm_head):
            x = torch.randn(1, weight.shape[1], generator=torch.Generator().manual_seed(weight.shape[0]))
            bias = torch.randn(weight.shape[0])
            assert torch.equal(gemv(x, stack.packed[id(weight)], bias), gemv(x, weight, bias))
            kernel, operand, _ = stack.choice.by_matrix[id(weight)]  # whichever was measured fastest here
            assert torch.equal(stack.linear(x, weight, None), kernel(x, operand, None))


def test_a_matrix_not_made_of_blocks_of_codes_is_not_packed(stack):
    weight = stack.blocks[0].o[:64].clone()
    nudged = weight.clone()
    nudged[5, 7] = torch.nextafter(nudged[5, 7], torch.tensor(1.0))  # one ulp off in one weight
    assert pack(weight) is not None
    assert pack(nudged) is None
    assert pack(torch.randn(64, 576, generator=torch.Generator().manual_seed(0))) is None
    assert pack(weight[:, :100].contiguous()) is None  # rows not a whole number of 32-weight blocks
