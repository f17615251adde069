"""The model's weight matrices stored as the small integers they were made of, without losing a bit.

The shipped model is a GGUF file quantised in blocks of 32 weights: each layer matrix as Q4_1
(``weight = scale * code + offset``, a 4-bit code and two half-precision numbers a block) and the
token embedding, which is also the output head, as Q8_0 (``weight = scale * code``, an 8-bit code).
The fp32 cache holds those products, so every block still is exactly ``scale * code (+ offset)``:
packing finds the scale, offset and codes back from the fp32 weights and keeps them only if they
rebuild every weight exactly. A decode step of one request reads its weights once, so reading
about 6.6 bits a weight instead of 32 is what makes it faster (``gemv.c`` rebuilds them in
registers). A matrix that is not of that form (another model, a fine-tune) is not packed and is
read as fp32.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

BLOCK = 32  # weights sharing one scale (and offset): GGUF's Q4_1 and Q8_0 block
CHUNK_ROWS = 4096  # rows packed at a time, so the working tensors stay small beside the head's 113 MB


@dataclass(frozen=True)
class Affine4:
    """``scale * code + offset`` per block; byte j of a block's 16 holds code j (low 4 bits) and j + 16."""

    codes: torch.Tensor  # uint8 [rows, n / 2]
    scale: torch.Tensor  # fp32 [rows, n / 32]
    offset: torch.Tensor  # fp32 [rows, n / 32]

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape[0], self.codes.shape[1] * 2

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.scale, self.offset))


@dataclass(frozen=True)
class Scaled8:
    """``scale * code`` per block, one signed byte a weight."""

    codes: torch.Tensor  # int8 [rows, n]
    scale: torch.Tensor  # fp32 [rows, n / 32]

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.scale))


Packed = Affine4 | Scaled8


def pack(weight: torch.Tensor) -> Packed | None:
    """``weight`` (fp32 [rows, n]) as 4-bit or 8-bit codes that rebuild it exactly, or None."""
    if weight.dim() != 2 or weight.dtype != torch.float32 or weight.shape[1] % BLOCK or not weight.numel():
        return None
    with torch.inference_mode():
        for packer in (_affine4, _scaled8):
            if packer(weight[:4]) is None:  # a cheap look at a few rows before the whole matrix
                continue
            parts = [packer(chunk) for chunk in weight.split(CHUNK_ROWS)]
            return None if any(part is None for part in parts) else _join(parts)
    return None


def unpack(packed: Packed) -> torch.Tensor:
    """The fp32 matrix the codes stand for."""
    rows, n = packed.shape
    if isinstance(packed, Affine4):
        codes = _unshuffle(packed.codes).float()
        return (_blocks(codes) * packed.scale[..., None] + packed.offset[..., None]).reshape(rows, n)
    return (_blocks(packed.codes.float()) * packed.scale[..., None]).reshape(rows, n)


def _affine4(weight: torch.Tensor) -> Affine4 | None:
    # In Q4_1 a block's smallest weight has code 0 and its largest code 15 (ggml's quantiser maps
    # min and max to them), so the offset is the minimum and the scale a fifteenth of the range,
    # rounded to the half precision it was stored in.
    blocks = _blocks(weight)
    offset = blocks.amin(dim=-1)
    scale = ((blocks.amax(dim=-1) - offset) / 15).half().float()
    codes = torch.where(scale[..., None] > 0, (blocks - offset[..., None]) / scale[..., None], 0.0)
    codes = codes.round().clamp(0, 15)
    if not torch.equal(codes * scale[..., None] + offset[..., None], blocks):
        return None
    return Affine4(interleave(codes.to(torch.uint8).reshape(weight.shape)), scale.contiguous(), offset.contiguous())


def _scaled8(weight: torch.Tensor) -> Scaled8 | None:
    # In Q8_0 a block's largest magnitude has code +-127.
    blocks = _blocks(weight)
    scale = (blocks.abs().amax(dim=-1) / 127).half().float()
    codes = torch.where(scale[..., None] > 0, blocks / scale[..., None], 0.0).round().clamp(-128, 127)
    if not torch.equal(codes * scale[..., None], blocks):
        return None
    return Scaled8(codes.to(torch.int8).reshape(weight.shape).contiguous(), scale.contiguous())


def _join(parts: list[Packed]) -> Packed:
    kind = type(parts[0])
    return kind(*(torch.cat([getattr(part, f.name) for part in parts]) for f in fields(kind)))


def _blocks(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1, BLOCK)


def interleave(codes: torch.Tensor) -> torch.Tensor:
    """[rows, n] 4-bit codes in weight order -> ``Affine4``'s bytes, [rows, n / 2]."""
    blocks = _blocks(codes)
    return (blocks[..., :16] | (blocks[..., 16:] << 4)).reshape(codes.shape[0], -1).contiguous()


def _unshuffle(codes: torch.Tensor) -> torch.Tensor:
    """``Affine4``'s bytes, [rows, n / 2] -> [rows, n] codes in weight order."""
    pairs = codes.reshape(codes.shape[0], -1, 16)
    return torch.cat((pairs & 0x0F, pairs >> 4), dim=-1).reshape(codes.shape[0], -1)
