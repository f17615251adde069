"""Routing: which backend serves the model a request names (404 ``model_not_found`` when none does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from lifecycle.api.wire import escape_control
from lifecycle.api.errors import error_envelope

LOCAL_BACKEND = "local"


@dataclass(frozen=True)
class RoutingDecision:
    """Which backend serves ``model``; 404 ``model_not_found`` when none does."""

    model: str
    allowed: bool
    status: int
    backend: str | None
    message: str

    def error(self) -> dict | None:
        return None if self.allowed else error_envelope(self.message, param="model", code="model_not_found")


def route(model: str, known_models: Mapping[str, str] | Iterable[str]) -> RoutingDecision:
    """Route to the backend of a known model (a mapping model -> backend, or names served locally)."""
    if isinstance(known_models, str):
        known_models = [known_models]
    backends = dict(known_models) if isinstance(known_models, Mapping) else dict.fromkeys(known_models, LOCAL_BACKEND)
    if isinstance(model, str) and model in backends:
        return RoutingDecision(model, True, 200, backends[model], f"Model '{model}' is served by {backends[model]}.")
    shown = escape_control(str(model))[:100]
    return RoutingDecision(
        shown, False, 404, None, f"The model '{shown}' does not exist or you do not have access to it."
    )
