"""The arguments several commands read: memory ids (full or short), durations, categories."""

from __future__ import annotations

import contextlib
import re
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from loopctl_memory.cli.names import PROG
from loopctl_memory.entry import MemoryCategory, id_range
from loopctl_memory.errors import InvalidEntryError

if TYPE_CHECKING:
    from loopctl_memory.sql.store import SqlMemoryStore

CATEGORIES = [category.value for category in MemoryCategory]
"""The choices of ``--category``."""

MIN_PREFIX_DIGITS = 4
"""The fewest hex digits of an id that ``get``, ``update`` and ``delete`` accept."""


def memory_id(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str
) -> uuid.UUID | str:
    """A full id (any form ``uuid.UUID`` reads) as a UUID, or a prefix of its hex digits as given.

    A prefix is 4 to 31 hex digits, any case, dashes ignored; :func:`resolve_id`
    looks it up in the store.
    """
    text = value.strip()
    with contextlib.suppress(ValueError):
        return uuid.UUID(text)
    try:
        id_range(text)  # the store's own rule for a prefix: hex digits, dashes ignored
        digits = len(text.replace("-", ""))
    except InvalidEntryError:
        digits = 0
    if digits < MIN_PREFIX_DIGITS:
        raise click.BadParameter(
            f"{value!r} is not a memory id: give the full id or at least "
            f"{MIN_PREFIX_DIGITS} of its leading hex digits (`{PROG} search` shows them)"
        )
    return text


async def resolve_id(store: SqlMemoryStore, given: uuid.UUID | str) -> uuid.UUID | None:
    """The id ``given`` names in the store's view, or None; a full id is not looked up.

    Raises:
        click.ClickException: the prefix starts the ids of several memories.

    """
    if isinstance(given, uuid.UUID):
        return given
    found = await store.ids_with_prefix(given, limit=2)
    if len(found) > 1:
        raise click.ClickException(
            f"id {given} matches several memories; give more digits "
            f"(`{PROG} search` shows each id with enough of them)"
        )
    return found[0] if found else None


def duration(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str | None
) -> timedelta | None:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or a sum: ``1d12h``) as a timedelta."""
    if value is None:
        return None
    units = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?[wdhms])+", value.strip())
    if parts is None:
        raise click.BadParameter(
            f"{value!r} is not a duration such as 30d, 12h, 90m, 45s, 2w or 1d12h"
        )
    seconds = sum(
        float(number) * units[unit]
        for number, unit in re.findall(r"(\d+(?:\.\d+)?)([wdhms])", value)
    )
    return timedelta(seconds=seconds)
