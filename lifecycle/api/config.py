"""What the API serves with: its keys (by name), who may read every call, limits, and the call log's retention.

Every setting comes from an environment variable or the same name in Streamlit secrets (given as a
mapping); with no key anywhere a development key is generated for the process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lifecycle.errors import LifecycleError
from lifecycle.api.calllog import default_call_log_path
from lifecycle.api.keys import KEYS_ENV, new_api_key, parse_api_keys

MAX_BODY_BYTES = 1024 * 1024
DEFAULT_REQUESTS_PER_MINUTE = 60
DEFAULT_TOKENS_PER_MINUTE = 40_000
ADMIN_KEYS_ENV = "LIFECYCLE_ADMIN_KEYS"
SHOW_ALL_CALLS_ENV = "LIFECYCLE_SHOW_ALL_CALLS"
_TRUE = {"1", "true", "yes", "on"}


@dataclass
class ApiConfig:
    """What the API serves with. ``keys`` maps key names to secrets; only names are ever logged.

    ``admin_keys`` names the keys whose holders see every call (the operator); ``show_all_calls``
    lets every visitor see every call (a private workshop). Requests without a valid key are limited
    per client address (``unauthenticated_per_minute``) and never written to the log, which keeps at
    most ``log_max_rows`` calls, none older than ``log_max_days``.
    """

    keys: dict[str, str]
    requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE
    tokens_per_minute: int = DEFAULT_TOKENS_PER_MINUTE
    max_body_bytes: int = MAX_BODY_BYTES
    body_seconds: float = 30.0
    unauthenticated_per_minute: int = 30
    call_log: Path = field(default_factory=default_call_log_path)
    log_max_rows: int = 10_000
    log_max_days: float = 7.0
    admin_keys: frozenset[str] = frozenset({"admin"})
    show_all_calls: bool = False
    development_key: bool = False  # True when no key was configured and one was generated

    def is_admin(self, key_name: str | None) -> bool:
        return key_name is not None and key_name in self.admin_keys


def _setting(name: str, secrets_: Mapping, environ: Mapping[str, str]) -> object:
    return environ.get(name) or secrets_.get(name)


def _number(name: str, default: float, kind: type, secrets_: Mapping, environ: Mapping[str, str]):
    value = _setting(name, secrets_, environ)
    if value in (None, ""):
        return default
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise LifecycleError(f"{name} must be a positive number, got {str(value)[:40]!r}.", param=name)
    return number


def api_config(secrets_: Mapping | None = None, environ: Mapping[str, str] = os.environ) -> ApiConfig:
    """Configuration from the environment and Streamlit secrets. Keys: ``LIFECYCLE_API_KEYS`` (a
    "name:key,..." string, or in secrets a table of name = key). Limits: ``LIFECYCLE_RPM``,
    ``LIFECYCLE_TPM``, ``LIFECYCLE_UNAUTHENTICATED_RPM``. Log retention: ``LIFECYCLE_LOG_MAX_ROWS``,
    ``LIFECYCLE_LOG_MAX_DAYS``. Who sees every call: ``LIFECYCLE_ADMIN_KEYS`` (key names, default
    "admin") and ``LIFECYCLE_SHOW_ALL_CALLS``."""
    secrets_ = secrets_ or {}
    configured = _setting(KEYS_ENV, secrets_, environ)
    if isinstance(configured, Mapping):
        keys = parse_api_keys(",".join(f"{name}:{key}" for name, key in configured.items()))
    else:
        keys = parse_api_keys(configured if isinstance(configured, str) else None)
    development = not keys
    if development:
        keys = {"dev": new_api_key()}
    admins = str(_setting(ADMIN_KEYS_ENV, secrets_, environ) or "admin")
    return ApiConfig(
        keys=keys,
        requests_per_minute=_number("LIFECYCLE_RPM", DEFAULT_REQUESTS_PER_MINUTE, int, secrets_, environ),
        tokens_per_minute=_number("LIFECYCLE_TPM", DEFAULT_TOKENS_PER_MINUTE, int, secrets_, environ),
        unauthenticated_per_minute=_number("LIFECYCLE_UNAUTHENTICATED_RPM", 30, int, secrets_, environ),
        log_max_rows=_number("LIFECYCLE_LOG_MAX_ROWS", 10_000, int, secrets_, environ),
        log_max_days=_number("LIFECYCLE_LOG_MAX_DAYS", 7.0, float, secrets_, environ),
        admin_keys=frozenset(name.strip() for name in admins.split(",") if name.strip()),
        show_all_calls=str(_setting(SHOW_ALL_CALLS_ENV, secrets_, environ) or "").strip().lower() in _TRUE,
        development_key=development,
    )
