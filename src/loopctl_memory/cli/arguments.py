"""The arguments several commands read: memory ids, durations, moments (WHEN), categories."""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from loopctl_memory import when
from loopctl_memory.arguments import blank_typed
from loopctl_memory.entry import MemoryCategory, id_range
from loopctl_memory.errors import InvalidArgumentError, InvalidEntryError
from loopctl_memory.names import PROG

if TYPE_CHECKING:
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

CATEGORIES = [category.value for category in MemoryCategory]
"""The choices of ``--category``."""

T = TypeVar("T")
Decorated = TypeVar("Decorated", bound=Callable[..., Any])


def tag_option(help_text: str, *, stored: bool = False) -> Callable[[Decorated], Decorated]:
    """The option ``--tag``/``-t TAG``, repeatable, given to the command as ``tags``.

    ``stored``: the tags are written to a memory, so a blank one is refused.
    """
    return click.option(
        "--tag",
        "-t",
        "tags",
        multiple=True,
        metavar="TAG",
        help=help_text,
        callback=_no_blank_tag if stored else None,
    )


def categories_option(help_text: str) -> Callable[[Decorated], Decorated]:
    """The option ``--category``/``-c CATEGORY``, repeatable, given as ``categories``."""
    return click.option(
        "--category",
        "-c",
        "categories",
        multiple=True,
        type=click.Choice(CATEGORIES),
        help=help_text,
    )


def limit_option(default: int) -> Callable[[Decorated], Decorated]:
    """The option ``--limit``/``-n N``: how many memories to show, at least 1."""
    return click.option(
        "--limit",
        "-n",
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help="How many memories to show at most.",
    )


def where_option(help_text: str) -> Callable[[Decorated], Decorated]:
    """The option ``--where CONDITION``, repeatable, given as ``where`` (see cli.fields)."""
    return click.option("--where", "where", multiple=True, metavar="CONDITION", help=help_text)


def no_blank_text(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str | None
) -> str | None:
    """A memory's text as typed: refused when blank (the library would store it)."""
    mistake = blank_typed(value, None)
    if mistake is not None:
        raise click.BadParameter(mistake)
    return value


def _no_blank_tag(
    _ctx: click.Context | None, _param: click.Parameter | None, value: tuple[str, ...]
) -> tuple[str, ...]:
    mistake = blank_typed(None, value)
    if mistake is not None:
        raise click.BadParameter(mistake)
    return value


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
    return None if value is None else _read(when.age, value)


def moment(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str | None
) -> datetime | None:
    """WHEN: an ISO date or datetime (naive means UTC) or an age back from now, in UTC."""
    return None if value is None else _read(when.moment, value)


def _read(parse: Callable[[str], T], value: str) -> T:
    """``parse(value)``, its refusal a usage error naming the option."""
    try:
        return parse(value)
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc)) from None


class _Share(click.FloatRange):
    """A number from 0 to 1 as typed: ``nan`` (which every comparison lets through) refused."""

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number from 0 to 1", param, ctx)
        return float(number)


SHARE = _Share(0.0, 1.0)
"""The type of a relevance option: a number from 0 to 1, never ``nan``."""
