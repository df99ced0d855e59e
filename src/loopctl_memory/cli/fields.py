"""The CLI's words for metadata: ``--meta key=value`` on ``add``, ``--where`` on ``search``.

A value is read as JSON when it is JSON (``3``, ``2.5``, ``true``, ``null``,
``"3"``, ``[1, 2]``, ``{"a": 1}``) and as text otherwise (``ann``), so
``--meta n=3`` stores the number 3 and ``--meta n='"3"'`` the text "3".
``--where`` takes ``PATH=VALUE``, ``PATH!=VALUE``, ``PATH>VALUE``,
``PATH>=VALUE``, ``PATH<VALUE``, ``PATH<=VALUE``, ``PATH?`` (the path is there)
and ``PATH!?`` (it is not); a path is keys joined by dots. Every condition
given must hold (:mod:`loopctl_memory.metadata_filter`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import click

from loopctl_memory.entry import MemoryCategory
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.filters import MemoryFilter

_OPERATORS = {"=": "$eq", "!=": "$ne", ">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte"}
_CONDITION = re.compile(r"^(?P<path>[^=!<>?]+?)\s*(?P<operator>!=|>=|<=|=|>|<)\s*(?P<value>.*)$")
_EXISTS = re.compile(r"^(?P<path>[^=!<>?]+?)\s*(?P<negated>!?)\?$")


def value_of(text: str) -> Any:
    """``text`` as JSON if it is JSON, else as itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def metadata_of(pairs: Iterable[str]) -> dict[str, Any]:
    """``--meta KEY=VALUE`` (repeatable) as a metadata object; a key given twice: the last.

    Raises:
        click.BadParameter: a pair without ``=`` or with an empty key.

    """
    found: dict[str, Any] = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="'--meta'")
        found[key.strip()] = value_of(text)
    return found


def conditions_of(expressions: Iterable[str]) -> dict[str, Any] | None:
    """``--where`` expressions (repeatable) as a metadata filter; None for none.

    Raises:
        click.BadParameter: an expression that is none of the forms (see the module).

    """
    found: dict[str, dict[str, Any]] = {}
    for expression in expressions:
        exists = _EXISTS.match(expression.strip())
        if exists is not None:
            path, operator, operand = exists["path"].strip(), "$exists", not exists["negated"]
        else:
            matched = _CONDITION.match(expression.strip())
            if matched is None:
                raise click.BadParameter(
                    f"{expression!r} is not PATH=VALUE, PATH!=VALUE, PATH>VALUE, PATH>=VALUE,"
                    " PATH<VALUE, PATH<=VALUE, PATH? or PATH!?",
                    param_hint="'--where'",
                )
            path = matched["path"].strip()
            operator = _OPERATORS[matched["operator"]]
            operand = value_of(matched["value"].strip())
        found.setdefault(path, {})[operator] = operand
    return found or None


def checked_conditions(where: tuple[str, ...]) -> dict[str, object] | None:
    """``--where`` as a metadata filter, checked as MemoryFilter checks it.

    Raises:
        click.BadParameter: a condition the filter refuses (its one line).

    """
    conditions = conditions_of(where)
    try:
        MemoryFilter(metadata=conditions)
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc), param_hint="'--where'") from None
    return conditions


def selection(
    categories: tuple[str, ...], tags: tuple[str, ...], where: tuple[str, ...], **more: Any
) -> MemoryFilter:
    """The filter of ``--category``, ``--tag`` and ``--where`` (and ``more`` of its fields).

    Raises:
        click.BadParameter: a ``--where`` condition the filter refuses.

    """
    return MemoryFilter(
        categories=frozenset(map(MemoryCategory, categories)) or None,
        tags_any=tags or None,
        metadata=checked_conditions(where),
        **more,
    )
