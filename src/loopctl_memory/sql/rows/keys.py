"""Keys in SQL: which stored entries a batch's keyed entries replace.

A key is unique within a scope (``uq_entries_scope_id_key``, partial: entries
without a key are not in it). A write removes the entries of the same scope
holding its entries' keys in the transaction that inserts them, so no two live
entries ever share a key and a reader sees the old memory or the new one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sqlalchemy import ColumnElement, and_

from loopctl_memory.flat import FlatBatch
from loopctl_memory.keys import keys_of_batch
from loopctl_memory.sql.tables import entries

_KEYS_PER_STATEMENT = 500


def replaced(batch: FlatBatch, scope_ids: Mapping[str, int]) -> Iterator[ColumnElement[bool]]:
    """Conditions on ``entries`` for what the batch's keys replace, a few keys at a time.

    ``scope_ids``: the id of each scope name the batch holds.

    Raises:
        InvalidArgumentError: two entries of the batch have one key in one scope.

    """
    given: dict[int, list[str | None]] = {}
    for entry in batch.entries:
        given.setdefault(scope_ids[entry[10]], []).append(entry[12])
    for scope_id, in_scope in given.items():
        keys = sorted(keys_of_batch(in_scope))
        for start in range(0, len(keys), _KEYS_PER_STATEMENT):
            chunk = keys[start : start + _KEYS_PER_STATEMENT]
            yield and_(entries.c.scope_id == scope_id, entries.c.key.in_(chunk))


def holding(scope_id: int, key: str) -> ColumnElement[bool]:
    """The entry of scope ``scope_id`` holding ``key``, as a condition on ``entries``."""
    return and_(entries.c.scope_id == scope_id, entries.c.key == key)
