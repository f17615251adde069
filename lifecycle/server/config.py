"""What the API serves with: its keys (by name), rate limits, body limit and call-log file.

Read from ``LIFECYCLE_API_KEYS`` (or the same name in Streamlit secrets), ``LIFECYCLE_RPM`` and
``LIFECYCLE_TPM``; with no key anywhere a development key is generated for the process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lifecycle.server.calllog import default_call_log_path
from lifecycle.server.keys import KEYS_ENV, new_api_key, parse_api_keys

MAX_BODY_BYTES = 1024 * 1024
DEFAULT_REQUESTS_PER_MINUTE = 60
DEFAULT_TOKENS_PER_MINUTE = 40_000


@dataclass
class ApiConfig:
    """What the API serves with. ``keys`` maps key names to secrets; only names are ever logged."""

    keys: dict[str, str]
    requests_per_minute: int = DEFAULT_REQUESTS_PER_MINUTE
    tokens_per_minute: int = DEFAULT_TOKENS_PER_MINUTE
    max_body_bytes: int = MAX_BODY_BYTES
    call_log: Path = field(default_factory=default_call_log_path)
    development_key: bool = False  # True when no key was configured and one was generated


def api_config(secrets_: Mapping | None = None, environ: Mapping[str, str] = os.environ) -> ApiConfig:
    """Configuration from ``LIFECYCLE_API_KEYS`` (or the same name in Streamlit secrets, given as a
    mapping: a "name:key,..." string or a table of name = key) and ``LIFECYCLE_RPM`` /
    ``LIFECYCLE_TPM``. With no key anywhere, a development key is generated for this process."""
    configured = environ.get(KEYS_ENV) or (secrets_ or {}).get(KEYS_ENV)
    if isinstance(configured, Mapping):
        keys = parse_api_keys(",".join(f"{name}:{key}" for name, key in configured.items()))
    else:
        keys = parse_api_keys(configured if isinstance(configured, str) else None)
    development = not keys
    if development:
        keys = {"dev": new_api_key()}
    return ApiConfig(
        keys=keys,
        requests_per_minute=int(environ.get("LIFECYCLE_RPM", DEFAULT_REQUESTS_PER_MINUTE)),
        tokens_per_minute=int(environ.get("LIFECYCLE_TPM", DEFAULT_TOKENS_PER_MINUTE)),
        development_key=development,
    )
