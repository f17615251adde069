"""The model loader: the fp32 cache of the shipped GGUF is checked, rebuilt when damaged, never used half-written."""

import json
import shutil

import pytest
import torch

from lifecycle import model as lm


@pytest.fixture
def cache_copy(loaded, tmp_path, monkeypatch):
    """A private copy of the converted cache, pointed to by LIFECYCLE_CACHE_DIR."""
    monkeypatch.delenv("LIFECYCLE_MODEL", raising=False)
    monkeypatch.setenv("LIFECYCLE_CACHE_DIR", str(tmp_path))
    shutil.copytree(loaded.source, lm.default_cache_dir())
    return lm.default_cache_dir()


def _logits(loaded_model, ids=(1, 504, 3458, 282)):
    with torch.inference_mode():
        return loaded_model.model(torch.tensor([list(ids)])).logits[0, -1]


def test_the_shared_model_loaded_from_a_valid_cache(loaded):
    assert loaded.name == lm.DEFAULT_MODEL
    assert lm.cache_is_valid(lm.default_cache_dir())
    manifest = json.loads((lm.default_cache_dir() / lm.MANIFEST).read_text())
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(manifest["files"])


def test_a_valid_copy_is_used_as_it_is(cache_copy, loaded):
    again = lm.load_model()
    assert again.from_cache and again.source == str(cache_copy)
    assert torch.equal(_logits(again), _logits(loaded))


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_manifest"])
def test_a_damaged_cache_is_detected(cache_copy, damage):
    weights = cache_copy / "model.safetensors"
    if damage == "truncate":
        with weights.open("r+b") as handle:
            handle.truncate(weights.stat().st_size // 2)
    elif damage == "flip":
        with weights.open("r+b") as handle:
            handle.seek(weights.stat().st_size - 100)
            byte = handle.read(1)
            handle.seek(-1, 1)
            handle.write(bytes([byte[0] ^ 0xFF]))
    else:
        (cache_copy / lm.MANIFEST).unlink()
    assert not lm.cache_is_valid(cache_copy)


@pytest.mark.slow  # converts the GGUF again (~20 s quiet, minutes on a busy machine)
def test_a_corrupt_cache_is_rebuilt_from_the_gguf_with_identical_logits(cache_copy, loaded):
    with (cache_copy / "model.safetensors").open("r+b") as handle:
        handle.truncate(1000)
    rebuilt = lm.load_model()
    assert not rebuilt.from_cache
    assert lm.cache_is_valid(cache_copy)
    assert torch.equal(_logits(rebuilt), _logits(loaded))
    assert [p.name for p in cache_copy.parent.iterdir()] == [cache_copy.name]  # no staging folder left


def test_lifecycle_model_names_another_model_by_path(loaded, monkeypatch):
    monkeypatch.setenv("LIFECYCLE_MODEL", loaded.source)
    other = lm.load_model()
    assert other.name == loaded.source and not other.from_cache
    assert torch.equal(_logits(other), _logits(loaded))


def test_a_missing_model_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("LIFECYCLE_MODEL", str(tmp_path / "no-such-model"))
    with pytest.raises(lm.ModelLoadError, match="no-such-model"):
        lm.load_model()


@pytest.mark.slow  # loads the GGUF (~20 s quiet)
def test_a_cache_folder_that_cannot_be_written_loads_the_gguf_in_memory_with_a_warning(loaded, tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")  # nothing can be created below it, even by root (chmod would not stop root)
    monkeypatch.delenv("LIFECYCLE_MODEL", raising=False)
    monkeypatch.setenv("LIFECYCLE_CACHE_DIR", str(blocked / "cache"))
    from_gguf = lm.load_model()
    assert not from_gguf.from_cache and from_gguf.source == str(lm.gguf_path())
    assert "LIFECYCLE_CACHE_DIR" in from_gguf.warning and str(blocked / "cache") in from_gguf.warning
    assert torch.equal(_logits(from_gguf), _logits(loaded))
    assert loaded.warning is None
