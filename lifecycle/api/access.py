"""Who may read which calls: a visitor sees the calls of the key they present, the operator sees all.

The operator is the holder of an admin key (``LIFECYCLE_ADMIN_KEYS``), or everyone when the
operator says so (``LIFECYCLE_SHOW_ALL_CALLS`` for a private workshop), or the only user of a
server that listens on localhost alone and runs with its generated development key.
"""

from __future__ import annotations

from dataclasses import dataclass

from lifecycle.api.calllog import CallRecord
from lifecycle.api.config import ApiConfig
from lifecycle.api.keys import check_api_key


@dataclass(frozen=True)
class CallReader:
    """What one visitor may read. ``key_name``: the key they presented (None: none or a wrong one)."""

    key_name: str | None
    sees_all: bool
    reason: str

    @property
    def only_key(self) -> str | None:
        """The key whose calls are listed, or None when every call is."""
        return None if self.sees_all else self.key_name

    @property
    def sees_any(self) -> bool:
        return self.sees_all or self.key_name is not None

    def may_read(self, record: CallRecord) -> bool:
        return self.sees_all or (self.key_name is not None and record.key_name == self.key_name)


def call_reader(presented: str | None, config: ApiConfig, local_only: bool) -> CallReader:
    """The reader for a visitor presenting ``presented`` (a key typed on the page, or None).

    ``local_only``: the server listens on localhost alone, so every visitor is on this machine.
    """
    decision = check_api_key(presented, config.keys) if presented else None
    name = decision.key_name if decision is not None and decision.allowed else None
    if config.is_admin(name):
        return CallReader(name, True, f"the key '{name}' is an operator key")
    if config.show_all_calls:
        return CallReader(name, True, "this server is set up for a private workshop (LIFECYCLE_SHOW_ALL_CALLS)")
    if local_only and config.development_key:
        return CallReader(name, True, "this server runs with a development key and listens on localhost only")
    if name is not None:
        return CallReader(name, False, f"you presented the key '{name}'")
    reason = "the key you presented is not valid" if presented else "you have not presented a key"
    return CallReader(None, False, reason)
