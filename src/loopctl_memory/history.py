"""Each memory's history: what happened to it, when, and which operation did it.

A SQL store records an event in the transaction of the write that caused it
(a write that rolls back records nothing), unless opened with
``history=False``. The events, in :data:`EVENTS`:

- ``stored``: the entry was written (``cause``: ``store``; ``upgrade`` for the
  entries a store held before it kept history, dated at their ``created_at``).
- ``updated``: ``details["changed"]`` holds each field changed, ``[old, new]``
  (times as ISO 8601 text).
- ``accessed``: a retrieval returned it (``track_access=True`` only): one event
  a UTC day, ``count`` the retrievals that day, not a row for every read.
- ``merged``: a consolidation folded it into another: ``details["into"]``.
- ``absorbed``: the memory others were merged into: ``details["merged"]``, their ids.
- ``pruned``: a consolidation dropped it (``relevance``: its relevance then).
- ``forgotten``: ``forget`` deleted it: ``details["rule"]``, the conditions given.
- ``deleted``: deleted by id, or by key (``details["key"]``).
- ``replaced``: an entry stored with its key took its place: ``details["by"]``.
- ``expired``: its ``expires_at`` passed and a sweep removed it.
- ``reembedded``: ``reembed`` made its vector with another embedder: ``details["embedder"]``.

Every event that removes an entry (:data:`REMOVALS`) keeps its id and last
relevance, not its text: what is deleted, forgotten or pruned is gone (and its
room given back); an ``updated`` event keeps the old and new values. A store
keeps its events ``keep_history`` long (default 90 days); a consolidation
deletes the older ones of the scopes it passes over.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.entry_json import timestamp

if TYPE_CHECKING:
    from loopctl_memory.filters import MemoryFilter
    from loopctl_memory.lifecycle import ForgetRule

STORED: Final = "stored"
UPDATED: Final = "updated"
ACCESSED: Final = "accessed"
MERGED: Final = "merged"
ABSORBED: Final = "absorbed"
PRUNED: Final = "pruned"
FORGOTTEN: Final = "forgotten"
DELETED: Final = "deleted"
REPLACED: Final = "replaced"
EXPIRED: Final = "expired"
REEMBEDDED: Final = "reembedded"

EVENTS: Final = (
    STORED,
    UPDATED,
    ACCESSED,
    MERGED,
    ABSORBED,
    PRUNED,
    FORGOTTEN,
    DELETED,
    REPLACED,
    EXPIRED,
    REEMBEDDED,
)
"""Every event a history holds, in the order they usually come."""

REMOVALS: Final = frozenset((MERGED, PRUNED, FORGOTTEN, DELETED, REPLACED, EXPIRED))
"""The events after which the entry is gone."""

KEEP_HISTORY: Final = timedelta(days=90)
"""How long a store keeps events by default."""


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One thing that happened to one memory.

    Attributes:
        entry_id: the memory's id.
        event: one of :data:`EVENTS`.
        at: when (UTC), by the store's clock.
        scope: the memory's scope, relative to the store asked (``""``: its own).
        cause: the operation that did it (``store``, ``update``, ``forget``,
            ``consolidate``, ...), or None.
        relevance: the memory's relevance when a removal took it, else None.
        count: ``accessed``: the retrievals that returned it that UTC day.
        details: what the event changed (see :mod:`loopctl_memory.history`).

    """

    entry_id: uuid.UUID
    event: str
    at: datetime
    scope: str = ""
    cause: str | None = None
    relevance: float | None = None
    count: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def removed(self) -> bool:
        """Whether the memory was gone after this event."""
        return self.event in REMOVALS

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-ready values (``at`` as ISO 8601 text; unset fields left out)."""
        shown: dict[str, Any] = {
            "id": str(self.entry_id),
            "event": self.event,
            "at": timestamp(self.at),
            "scope": self.scope,
        }
        for name in ("cause", "relevance", "count"):
            value = getattr(self, name)
            if value is not None:
                shown[name] = value
        if self.details:
            shown["details"] = dict(self.details)
        return shown


def changed_fields(before: MemoryEntry, after: MemoryEntry) -> dict[str, list[Any]]:
    """Each field ``update`` may change that differs, as ``[old, new]`` JSON-ready values."""
    changed: dict[str, list[Any]] = {}
    for name in ("memory", "category", "tags", "relevance", "validated", "metadata", "key"):
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            changed[name] = [_plain(old), _plain(new)]
    if before.expires_at != after.expires_at:
        changed["expires_at"] = [
            None if moment is None else timestamp(moment)
            for moment in (before.expires_at, after.expires_at)
        ]
    return changed


def _plain(value: Any) -> Any:
    if isinstance(value, str):  # a MemoryCategory too: its value
        return str(value)
    if isinstance(value, list | tuple):
        return list(value)
    return value


def rule_details(rule: ForgetRule) -> dict[str, Any]:
    """The conditions of a ``forget``, as JSON-ready values (what its events record)."""
    given: dict[str, Any] = {}
    if rule.created_before is not None:
        given["created_before"] = timestamp(rule.created_before)
    if rule.category is not None:
        given["category"] = str(rule.category)
    if rule.below is not None:
        given["below"] = rule.below
    if rule.filter is not None:
        given["filter"] = filter_details(rule.filter)
    return given


def filter_details(passes: MemoryFilter) -> dict[str, Any]:
    """A filter's conditions, as JSON-ready values."""
    given: dict[str, Any] = {}
    if passes.categories is not None:
        given["categories"] = sorted(str(category) for category in passes.categories)
    for name in ("tags_any", "tags_all"):
        value = getattr(passes, name)
        if value is not None:
            given[name] = list(value)
    for name in ("validated", "min_relevance", "max_relevance"):
        value = getattr(passes, name)
        if value is not None:
            given[name] = value
    for name in ("created_after", "created_before"):
        value = getattr(passes, name)
        if value is not None:
            given[name] = timestamp(value)
    if passes.metadata is not None:
        given["metadata"] = [
            {"path": ".".join(condition.path), "operator": condition.operator, "value": value}
            for condition in passes.metadata
            for value in [_plain(condition.value)]
        ]
    return given


def describe(event: HistoryEvent, *, characters: int = 80) -> str:
    """What ``event`` did, in a line for people: texts cut to ``characters``."""

    def cut(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return text if len(text) <= characters else text[: characters - 1] + "…"

    found = event.details
    if event.event == UPDATED:
        changed = found.get("changed", {})
        return "; ".join(f"{name}: {cut(old)} → {cut(new)}" for name, (old, new) in changed.items())
    if event.event == ACCESSED:
        return f"returned by {event.count} retrieval{'' if event.count == 1 else 's'} that day"
    if event.event == ABSORBED:
        return "merged into it: " + ", ".join(found.get("merged", []))
    if event.event == REEMBEDDED:
        return f"vector made by {found.get('embedder')}"
    said = {
        MERGED: f"into {found.get('into')}",
        FORGOTTEN: f"rule {cut(found.get('rule', {}))}",
        DELETED: f"by key {found['key']!r}" if "key" in found else "by id",
        REPLACED: f"by {found.get('by')}, stored with its key",
    }.get(event.event, "")
    if event.removed and event.relevance is not None:
        last = f"relevance {event.relevance:.4g}"
        return f"{said}; {last}" if said else last
    return said
