"""One field of a JSON body checked the way OpenAI's API checks it: its messages, params and codes.

Shared by the chat-completions and the Responses validation. Every check raises a
``LifecycleError`` naming the parameter; ``None`` (JSON null) always means "not sent".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from lifecycle.errors import LifecycleError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def invalid_type(param: str, expected: str, value: object) -> LifecycleError:
    return LifecycleError(
        f"Invalid type for '{param}': expected {expected}, but got {type_name(value)} instead.",
        param=param,
        code="invalid_type",
    )


def shown(value: object) -> str:
    """A value quoted in an error message, cut to 40 characters."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long for str() (Python's 4300-digit limit)
        return "a very large integer"
    return text if len(text) <= 40 else text[:37] + "..."


def number(payload: Mapping, param: str, default: float, low: float, high: float, *, low_open: bool = False) -> float:
    """A finite number in [low, high] (or (low, high] when ``low_open``); bools are not numbers."""
    value = payload.get(param)
    if value is None:
        return default
    return checked_number(param, value, low, high, low_open=low_open)


def checked_number(param: str, value: object, low: float, high: float, *, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid_type(param, "a number", value)
    if isinstance(value, float) and not math.isfinite(value):
        raise LifecycleError(f"Invalid '{param}': expected a finite number, got {value}.", param, "invalid_value")
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        bracket = "(" if low_open else "["
        raise LifecycleError(
            f"Invalid '{param}': expected a value in {bracket}{low:g}, {high:g}], got {shown(value)}.",
            param=param,
            code="decimal_below_min_value" if too_low else "decimal_above_max_value",
        )
    return float(value)


def integer(payload: Mapping, param: str, low: int, high: int = INT64_MAX) -> int | None:
    value = payload.get(param)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_type(param, "an integer", value)
    if value < low or value > high:
        raise LifecycleError(
            f"Invalid '{param}': expected an integer in [{low}, {high}], got {shown(value)}.",
            param=param,
            code="integer_below_min_value" if value < low else "integer_above_max_value",
        )
    return value


def boolean(payload: Mapping, param: str, default: bool = False) -> bool:
    value = payload.get(param)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid_type(param, "a boolean", value)
    return value


def string(payload: Mapping, param: str, max_length: int) -> str | None:
    value = payload.get(param)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_type(param, "a string", value)
    if len(value) > max_length:
        raise LifecycleError(
            f"Invalid '{param}': string too long. Expected a string with maximum length {max_length}, "
            f"but got a string with length {len(value)} instead.",
            param, "string_above_max_length",
        )
    return value


def metadata(payload: Mapping, param: str = "metadata") -> dict[str, str] | None:
    """OpenAI's metadata: up to 16 string pairs, keys up to 64 characters, values up to 512."""
    value = payload.get(param)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_type(param, "an object of string pairs", value)
    if len(value) > 16:
        raise LifecycleError(f"Invalid '{param}': at most 16 pairs, got {len(value)}.", param, "object_above_max_size")
    for key, item in value.items():
        if not isinstance(item, str):
            raise invalid_type(f"{param}.{key}", "a string", item)
        if len(key) > 64 or len(item) > 512:
            raise LifecycleError(
                f"Invalid '{param}': keys are at most 64 characters and values at most 512.", param, "invalid_value"
            )
    return dict(value)


def one_of(payload: Mapping, param: str, allowed: Iterable[str], why: str) -> str | None:
    """A string that must be one of ``allowed`` here; other values are refused with ``why``."""
    value = payload.get(param)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_type(param, "a string", value)
    allowed = tuple(allowed)
    if value not in allowed:
        raise LifecycleError(
            f"Unsupported value: '{param}' does not support {shown(value)} with this server ({why}). "
            f"Supported: {', '.join(repr(a) for a in allowed)}.",
            param, "unsupported_value",
        )
    return value


def refuse_unknown(payload: Mapping, known: Iterable[str]) -> None:
    """OpenAI answers 400 for a field it does not know (a typo such as ``max_token`` included)."""
    unknown = sorted(set(payload) - set(known))
    if unknown:
        raise LifecycleError(
            f"Unrecognized request argument supplied: {', '.join(unknown)}.",
            param=unknown[0],
            code="unknown_parameter",
        )


def refuse_unsupported(payload: Mapping, refused: Mapping[str, str]) -> None:
    """Parameters this server knows but cannot honour: 400 naming the first one sent (null is fine)."""
    for param, why in refused.items():
        if payload.get(param) is not None:
            raise LifecycleError(f"Unsupported parameter: '{param}' is not supported with this server: {why}.",
                                 param, "unsupported_parameter")
