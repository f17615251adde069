"""What tests check the app's tokenizer work against, loaded apart from the app: transformers' own
tokenizer of the loaded model's folder. (The app's is ``lifecycle.engine.tokenizer``, which reads the
same files without transformers; tests/test_model_tokenizer.py compares the two.)"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4)
def _tokenizer_of(source: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source)


def reference_tokenizer(loaded):
    """transformers' tokenizer for ``loaded``'s model (one per model folder).

    Taken under the model's build lock: the pages' model may be being built in another thread, importing
    transformers, and a second thread importing it at the same time can find a name not yet there ("cannot import
    name 'AutoTokenizer'", seen with ``pytest -n 0``)."""
    with loaded.build_lock:
        return _tokenizer_of(loaded.source)
