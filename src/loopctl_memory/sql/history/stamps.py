"""What a write's history events are stamped with, and the raw statements of the driver lanes.

The one-hop SQLite lane (:mod:`loopctl_memory.sql.backend.sqlite`) writes its
events with these statements on the driver's own connection; every other path
writes through :mod:`loopctl_memory.sql.history.record`. This module imports
nothing of the store's SQL layer, so that a backend can use it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Stamp:
    """When a write happens and which operation it is: what each of its events records."""

    at_us: int
    cause: str


def details(**values: Any) -> str:
    """An event's details as the JSON text the table holds."""
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


# The raw statements of the lanes that write on the driver's own connection (``?``).
RECORD_STORED_ROW = (
    "INSERT INTO history (entry_seq, scope_id, at_us, event, cause) VALUES (?, ?, ?, 'stored', ?)"
)
"""The ``stored`` event of one entry: (seq, scope_id, at_us, cause)."""
RECORD_REPLACED = (
    "INSERT INTO history (entry_seq, entry_id, scope_id, at_us, event, cause, relevance, detail)"
    " SELECT seq, id, scope_id, ?, 'replaced', ?, relevance, ?"
    " FROM entries WHERE scope_id = ? AND key = ?"
)
"""The ``replaced`` event of the entry holding a key: (at_us, cause, details, scope_id, key)."""


def replaced_rows(
    stamp: Stamp, keyed: Sequence[tuple[int, Any]], by: Sequence[uuid.UUID]
) -> list[tuple[Any, ...]]:
    """The arguments of :data:`RECORD_REPLACED` for each (scope_id, key) a write replaces."""
    return [
        (stamp.at_us, stamp.cause, details(by=str(new)), scope_id, key)
        for (scope_id, key), new in zip(keyed, by, strict=True)
    ]
