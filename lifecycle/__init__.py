"""LLM Request Lifecycle: every stage of one chat-completions call, computed on a real local model.

The stages (``lifecycle.stages``) are plain data in, plain data out, with no Streamlit import; the
journey runs them in order on the one engine (``lifecycle.engine``); ``lifecycle.api`` is the HTTP
side. The names most code starts from::

    from lifecycle import JourneyInput, run_journey, tokenize

    journey = run_journey(JourneyInput(prompt="Why is the sky blue?"))
    tokenize("Why is the sky blue?", "o200k_base").ids

Each name is imported on first use, so ``import lifecycle`` costs nothing.
"""

from importlib import import_module

_PUBLIC = {
    "JourneyInput": "lifecycle.journey",
    "Journey": "lifecycle.journey",
    "run_journey": "lifecycle.journey",
    "tokenize": "lifecycle.stages.tokenization",
    "render_messages": "lifecycle.stages.context_window",
    "SamplingSettings": "lifecycle.stages.sampling",
    "apply_sampling": "lifecycle.stages.sampling",
    "shared_model": "lifecycle.model",
    "LifecycleError": "lifecycle.errors",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'lifecycle' has no attribute {name!r}")
    return getattr(import_module(_PUBLIC[name]), name)


def __dir__() -> list[str]:
    return __all__
