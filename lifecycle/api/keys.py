"""API keys: named secrets from ``LIFECYCLE_API_KEYS`` and the constant-time check of a presented key.

Decisions carry a key's *name*, never its secret.
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Mapping

from lifecycle.errors import LifecycleError
from lifecycle.api.errors import error_envelope

KEYS_ENV = "LIFECYCLE_API_KEYS"
_KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True)
class AuthDecision:
    """The key check's answer. ``key_name`` is the matching key's name; the secret is never kept."""

    allowed: bool
    status: int
    key_name: str | None
    message: str

    def error(self) -> dict | None:
        return None if self.allowed else error_envelope(self.message, code="invalid_api_key")


def parse_api_keys(env_value: str | None) -> dict[str, str]:
    """Keys from ``LIFECYCLE_API_KEYS``: comma-separated ``secret`` or ``name:secret`` entries.

    Unnamed entries are called key1, key2, ... by position. Error messages never quote a secret.
    """
    keys: dict[str, str] = {}
    entries = [entry.strip() for entry in (env_value or "").split(",")]
    for position, entry in enumerate((e for e in entries if e), start=1):
        name, colon, secret = entry.partition(":")
        if not colon:
            name, secret = f"key{position}", entry
        name, secret = name.strip(), secret.strip()
        if not _KEY_NAME.fullmatch(name) or not secret:
            raise LifecycleError(
                f"{KEYS_ENV} entry {position} must be 'secret' or 'name:secret' "
                "(name: letters, digits, '_', '.', '-').",
                param=KEYS_ENV,
                code="invalid_api_keys",
            )
        if name in keys:
            raise LifecycleError(f"{KEYS_ENV} names the key {name!r} twice.", param=KEYS_ENV, code="invalid_api_keys")
        keys[name] = secret
    return keys


def new_api_key() -> str:
    """A fresh random key, e.g. the local development key printed when none is configured."""
    return "sk-lifecycle-" + secrets.token_urlsafe(24)


def key_sheet(count: int, prefix: str = "participant", admin: str = "admin") -> dict[str, str]:
    """``count`` named keys (participant01, ...) plus one operator key named ``admin``, all fresh."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 999:
        raise LifecycleError(f"count must be a whole number from 1 to 999, got {count!r}.", param="count")
    if not _KEY_NAME.fullmatch(prefix + "000") or not _KEY_NAME.fullmatch(admin):
        raise LifecycleError("Key names may hold letters, digits, '_', '.' and '-' only.", param="prefix")
    width = max(2, len(str(count)))
    sheet = {f"{prefix}{n:0{width}d}": new_api_key() for n in range(1, count + 1)}
    if admin in sheet:
        raise LifecycleError(f"The operator key's name {admin!r} collides with a participant's.", param="prefix")
    return {admin: new_api_key(), **sheet}


def bearer_token(authorization: str | None) -> str | None:
    """The key in an ``Authorization: Bearer <key>`` header value, or None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def check_api_key(presented: str | None, keys: Mapping[str, str]) -> AuthDecision:
    """Compare ``presented`` with every configured secret in constant time (no early exit)."""
    if not presented:
        return AuthDecision(
            False, 401, None,
            "You didn't provide an API key. Send it in an Authorization header: 'Authorization: Bearer YOUR_KEY'.",
        )
    offered = presented.encode("utf-8")
    matched = None
    for name, secret in keys.items():
        if hmac.compare_digest(offered, secret.encode("utf-8")) and matched is None:
            matched = name
    if matched is None:
        return AuthDecision(False, 401, None, "Incorrect API key provided.")
    return AuthDecision(True, 200, matched, f"Key '{matched}' accepted.")
