"""The packed codes saved beside the fp32 copy: read back only for the very weights they were made
from, found again (and the file rewritten) for anything else, and never needed to be writable."""

import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file, save_file

from lifecycle.engine import packed_store, scheduler, shared_engine
from lifecycle.engine.packed_store import STORE_FILE, packed_matrices
from lifecycle.engine.packing import pack
from lifecycle.model import MANIFEST, verified_copy


@pytest.fixture(scope="module")
def matrices(loaded):
    stack = shared_engine(loaded).stack
    noise = torch.randn(64, stack.hidden, generator=torch.Generator().manual_seed(0))  # packs as nothing
    return [stack.blocks[0].qkv, stack.blocks[0].o, noise]


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return type(a) is type(b) and all(torch.equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)


def _no_packing(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(packed_store, "pack", lambda m: calls.append(m) or pack(m))
    return calls


def test_codes_found_once_are_read_back_for_the_same_weights(tmp_path, matrices, monkeypatch):
    store = tmp_path / STORE_FILE
    first = packed_matrices(matrices, store, "weights-a")
    assert store.is_file() and first[0] is not None and first[2] is None
    calls = _no_packing(monkeypatch)
    again = packed_matrices(matrices, store, "weights-a")
    assert calls == []
    assert all(_same(a, b) for a, b in zip(first, again))


def test_codes_of_other_weights_are_found_again_and_the_file_rewritten(tmp_path, matrices, monkeypatch):
    store = tmp_path / STORE_FILE
    packed_matrices(matrices, store, "weights-a")
    calls = _no_packing(monkeypatch)
    packed_matrices(matrices, store, "weights-b")
    assert len(calls) == len(matrices)
    calls.clear()
    packed_matrices(matrices, store, "weights-b")
    assert calls == []


def test_a_damaged_file_is_never_used(tmp_path, matrices, monkeypatch):
    store = tmp_path / STORE_FILE
    packed_matrices(matrices, store, "weights-a")
    tensors = load_file(store)
    tensors["0.codes"][0, 0] ^= 0x11  # two 4-bit codes of the first row changed
    save_file(tensors, store, metadata={"weights_sha256": "weights-a", "matrices": str(len(matrices))})
    calls = _no_packing(monkeypatch)
    codes = packed_matrices(matrices, store, "weights-a")
    assert len(calls) == len(matrices)
    assert _same(codes[0], pack(matrices[0]))
    store.write_bytes(b"not a safetensors file")
    assert _same(packed_matrices(matrices, store, "weights-a")[1], pack(matrices[1]))


def test_a_folder_that_cannot_be_written_still_gets_the_codes(tmp_path, matrices):
    store = tmp_path / "missing" / STORE_FILE
    codes = packed_matrices(matrices, store, "weights-a")
    assert not store.exists()
    assert _same(codes[0], pack(matrices[0]))


def test_the_engine_keeps_its_codes_beside_the_verified_copy(loaded, monkeypatch):
    copy = verified_copy(loaded)
    assert copy is not None, "the suite's model is read from the fp32 copy"
    directory, sha = copy
    assert sha == json.loads((directory / MANIFEST).read_text())["files"]["model.safetensors"]["sha256"]
    monkeypatch.setattr(scheduler, "LlamaStack", lambda *args: args)
    assert scheduler.build_stack(loaded) == (loaded.model, directory / STORE_FILE, sha)


def test_a_model_not_read_from_the_copy_has_no_store(loaded, monkeypatch):
    elsewhere = replace(loaded, source="/somewhere/else.gguf")
    assert verified_copy(elsewhere) is None
    monkeypatch.setattr(scheduler, "LlamaStack", lambda *args: args)
    assert scheduler.build_stack(elsewhere) == (loaded.model,)
