"""The packed weights saved once beside the fp32 copy they were found in, so a start reads them.

Finding the codes again (``packing.pack``: every block checked for an exact rebuild) takes
~1.5 s of a 2-core machine's start; reading them back from a file takes a few tens of ms. The
file is tied to the weights it was made from: it records the SHA-256 of the fp32 copy's
``model.safetensors`` (which the loader checks against the copy's manifest on every start) and the
shape of every matrix, and a few rows of each matrix are rebuilt from the stored codes and
compared with the weights before the codes are used. Anything else (another model, a changed
copy, a damaged file) means the codes are found again and the file is written anew.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from lifecycle.engine.packing import Affine4, Packed, Scaled8, pack, unpack

STORE_FILE = "packed-weights-v1.safetensors"
SPOT_ROWS = 4  # rows of each matrix rebuilt from the stored codes before they are trusted

_log = logging.getLogger(__name__)


def packed_matrices(matrices: list[torch.Tensor], store: Path | None = None,
                    weights_sha256: str | None = None) -> list[Packed | None]:
    """Each matrix's exact codes (None where it does not pack), read from ``store`` when it holds the
    codes of these very weights, else found and saved there (when a store and a hash are given)."""
    if store is not None and weights_sha256 is not None:
        stored = _read(store, matrices, weights_sha256)
        if stored is not None:
            return stored
    found = [pack(m) if m.is_contiguous() else None for m in matrices]
    if store is not None and weights_sha256 is not None:
        _write(store, found, weights_sha256)
    return found


def _read(store: Path, matrices: list[torch.Tensor], weights_sha256: str) -> list[Packed | None] | None:
    try:
        with safe_open(store, "pt") as handle:
            meta = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (OSError, ValueError, SafetensorError):
        return None
    if meta.get("weights_sha256") != weights_sha256 or meta.get("matrices") != str(len(matrices)):
        return None
    packed = [_packed_at(tensors, index) for index in range(len(matrices))]
    if not all(_matches(p, m) for p, m in zip(packed, matrices)):
        _log.warning("%s does not hold these weights' codes; finding them again", store)
        return None
    return packed


def _packed_at(tensors: dict[str, torch.Tensor], index: int) -> Packed | None:
    codes = tensors.get(f"{index}.codes")
    if codes is None:
        return None
    scale = tensors[f"{index}.scale"]
    offset = tensors.get(f"{index}.offset")
    return Scaled8(codes, scale) if offset is None else Affine4(codes, scale, offset)


def _matches(packed: Packed | None, weight: torch.Tensor) -> bool:
    if packed is None:
        return True  # a matrix that did not pack is read as fp32: nothing to trust
    if packed.shape != tuple(weight.shape):
        return False
    head = type(packed)(*(getattr(packed, name)[:SPOT_ROWS] for name in packed.__dataclass_fields__))
    return torch.equal(unpack(head), weight[:SPOT_ROWS])


def _write(store: Path, packed: list[Packed | None], weights_sha256: str) -> None:
    tensors: dict[str, torch.Tensor] = {}
    for index, p in enumerate(packed):
        if p is None:
            continue
        tensors[f"{index}.codes"] = p.codes
        tensors[f"{index}.scale"] = p.scale
        if isinstance(p, Affine4):
            tensors[f"{index}.offset"] = p.offset
    meta = {"weights_sha256": weights_sha256, "matrices": str(len(packed))}
    try:
        handle, staging = tempfile.mkstemp(prefix=f".{store.name}-", dir=store.parent)
        os.close(handle)
        try:
            save_file(tensors, staging, metadata=meta)
            os.replace(staging, store)
        finally:
            Path(staging).unlink(missing_ok=True)
    except OSError as error:  # a read-only cache: the codes are found again on every start
        _log.warning("could not save the packed weights in %s: %s", store.parent, error)
