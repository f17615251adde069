"""The engine: the one place that runs the model, batching every caller's work step by step.

``shared_engine(loaded)`` returns the process's engine for a loaded model. Token generation is
submitted as an ``EngineRequest`` (continuous batching, chunked prefill, prefix caching); jobs that
need the Hugging Face model's insides (attention hooks) run exclusively through ``Engine.run``.
"""

from lifecycle.engine.origin import Origin, current_origin, origin
from lifecycle.engine.prefix import PrefixStats
from lifecycle.engine.scheduler import (
    Engine,
    EngineFull,
    EngineHandle,
    EngineRequest,
    EngineState,
    EngineTimeout,
    EngineUnavailable,
    RequestTooLarge,
    RunningRequest,
    StepRecord,
    WaitingRequest,
    engine_problem,
    shared_engine,
)

__all__ = [
    "Engine",
    "EngineFull",
    "EngineHandle",
    "EngineRequest",
    "EngineState",
    "EngineTimeout",
    "EngineUnavailable",
    "Origin",
    "PrefixStats",
    "RequestTooLarge",
    "RunningRequest",
    "StepRecord",
    "WaitingRequest",
    "current_origin",
    "engine_problem",
    "origin",
    "shared_engine",
]
