"""OpenAI's error envelope: the one shape every refusal of the HTTP API takes on the wire."""

from __future__ import annotations

from collections.abc import Mapping


def error_envelope(message: str, *, type: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None) -> dict:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class ApiError(Exception):
    """An error answer of the HTTP API: a status and OpenAI's error envelope (plus headers)."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: Mapping[str, str] | None = None,
                 outcome: str = "invalid_request"):
        super().__init__(message)
        self.status = status
        self.body = error_envelope(message, type=type, param=param, code=code)
        self.headers = dict(headers or {})
        self.outcome = outcome
