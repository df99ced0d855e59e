"""Conditions on a memory's metadata: what ``MemoryFilter(metadata=...)`` means.

A metadata filter is a dict from a path to a condition; an entry passes when
every condition holds. A path is a key, or keys joined by ``.`` into nested
objects (``"team.lead"``); a condition is

- a plain value: the value at the path equals it (a list: equals that list,
  item by item; ``None``: the value is null or the path is missing);
- a dict of operators, all of which must hold: ``$eq``, ``$ne``, ``$gt``,
  ``$gte``, ``$lt``, ``$lte``, ``$in`` (equals one of a list), ``$nin`` (none
  of them), ``$exists`` (``True``: the path is there, any value, null too);
- a dict without operators: conditions on the keys inside the object at the
  path, whose paths continue from it (``{"team": {"lead": "bo"}}`` is
  ``{"team.lead": "bo"}``); ``{}`` means the value is an object.

Comparisons are typed, as JSON's values are: a number never equals a string
or a bool (``1`` is not ``"1"``, ``True`` is not ``1``); numbers compare as
64-bit floats (``1 == 1.0``); strings by code point; lists and objects equal
when their items do (an object's keys in any order). ``$gt``, ``$gte``,
``$lt`` and ``$lte`` hold between two numbers or two strings; between anything
else (a number and a string, a null, a list, a missing path) they are false,
not an error. ``$ne`` and ``$nin`` hold where the path is missing. Paths walk
objects only: a list is a value, not a level; a key that holds a ``.`` cannot
be named in a path.

:func:`check_metadata_filter` checks a filter once, when the MemoryFilter is
made: a bad one is one :class:`~loopctl_memory.errors.InvalidArgumentError`.
:func:`conditions_hold` is the definition every backend follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.metadata import check_value

EQUALITY: Final = ("$eq", "$ne")
ORDERING: Final = ("$gt", "$gte", "$lt", "$lte")
MEMBERSHIP: Final = ("$in", "$nin")
OPERATORS: Final = (*EQUALITY, *ORDERING, *MEMBERSHIP, "$exists")
IS_OBJECT: Final = "object"
"""The operator of ``{}`` under a path: the value there is an object."""

MISSING: Final = object()
"""What :func:`value_at` gives for a path that is not there."""


@dataclass(frozen=True, slots=True)
class FieldCondition:
    """One operator on the value at one path (keys from the top, never empty).

    ``operator`` is one of :data:`OPERATORS` or :data:`IS_OBJECT`; ``value``
    its checked operand (a tuple for ``$in``/``$nin``, lists inside it as
    given).
    """

    path: tuple[str, ...]
    operator: str
    value: Any


def check_metadata_filter(value: object) -> tuple[FieldCondition, ...] | None:
    """``value`` as its conditions, in the order given; None for None.

    Raises:
        InvalidArgumentError: not a dict of str paths, an empty path or key, an
            unknown operator, operators mixed with keys in one dict, an operand
            of the wrong kind, or a value that is not JSON.

    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"metadata filter must be a dict of paths to conditions, not {type(value).__name__}"
        )
    found: list[FieldCondition] = []
    _collect(value, (), found)
    if not found:
        raise InvalidArgumentError("metadata filter must hold at least one condition")
    return tuple(found)


def _collect(
    conditions: Mapping[Any, Any], above: tuple[str, ...], into: list[FieldCondition]
) -> None:
    for key, condition in conditions.items():
        if not isinstance(key, str):
            raise InvalidArgumentError(
                f"metadata filter paths must be str, not {type(key).__name__} ({key!r})"
            )
        if key.startswith("$"):
            raise InvalidArgumentError(
                f"{key!r} is an operator where a path belongs in the metadata filter{_under(above)}"
            )
        keys = tuple(key.split("."))
        if "" in keys:
            raise InvalidArgumentError(
                f"metadata filter path {key!r} has an empty key{_under(above)}"
            )
        path = above + keys
        if isinstance(condition, Mapping):
            _collect_at(condition, path, into)
        else:
            into.append(FieldCondition(path, "$eq", _operand(condition, path, "$eq")))


def _collect_at(
    condition: Mapping[Any, Any], path: tuple[str, ...], into: list[FieldCondition]
) -> None:
    operators = [key for key in condition if isinstance(key, str) and key.startswith("$")]
    if not operators:
        if not condition:
            into.append(FieldCondition(path, IS_OBJECT, True))
        _collect(condition, path, into)
        return
    if len(operators) != len(condition):
        raise InvalidArgumentError(
            f"metadata filter at {'.'.join(path)!r} mixes operators and keys: "
            "nest the keys in an object of their own"
        )
    for operator, operand in condition.items():
        if operator not in OPERATORS:
            raise InvalidArgumentError(
                f"unknown operator {operator!r} at {'.'.join(path)!r} in the metadata filter "
                f"(one of {', '.join(OPERATORS)})"
            )
        into.append(FieldCondition(path, operator, _operand(operand, path, operator)))


def _operand(value: object, path: tuple[str, ...], operator: str) -> Any:
    where = f"{operator} at {'.'.join(path)!r} in the metadata filter"
    if operator == "$exists":
        if type(value) is not bool:
            raise InvalidArgumentError(f"{where} takes True or False, not {value!r}")
        return value
    if operator in ORDERING:
        if not is_number(value) and not isinstance(value, str):
            raise InvalidArgumentError(f"{where} takes a number or a str, not {value!r}")
        check_value(value, where)
        return value
    if operator in MEMBERSHIP:
        if not isinstance(value, list | tuple):
            raise InvalidArgumentError(f"{where} takes a list of values, not {value!r}")
        check_value(list(value), where)
        return tuple(value)
    check_value(value, where)
    return value


def _under(path: tuple[str, ...]) -> str:
    return f" (under {'.'.join(path)!r})" if path else ""


def is_number(value: object) -> bool:
    """Whether ``value`` is a JSON number (an int or a float, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def value_at(metadata: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``metadata``, walking objects only; :data:`MISSING` if none."""
    found: Any = metadata
    for key in path:
        if not isinstance(found, dict) or key not in found:
            return MISSING
        found = found[key]
    return found


def same(left: Any, right: Any) -> bool:  # noqa: PLR0911 - one return a JSON type
    """Typed JSON equality (see the module): what ``$eq`` and ``$in`` test."""
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if is_number(left) or is_number(right):
        return is_number(left) and is_number(right) and float(left) == float(right)
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same(left[key], right[key]) for key in left)
    return False


def ordered(value: Any, operator: str, operand: Any) -> bool:
    """``value`` ``operator`` ``operand`` for two numbers or two strings; False otherwise."""
    if is_number(value) and is_number(operand):
        left: Any = float(value)
        right: Any = float(operand)
    elif isinstance(value, str) and isinstance(operand, str):
        left, right = value, operand
    else:
        return False
    if operator == "$gt":
        return bool(left > right)
    if operator == "$gte":
        return bool(left >= right)
    if operator == "$lt":
        return bool(left < right)
    return bool(left <= right)


def holds(condition: FieldCondition, metadata: Mapping[str, Any]) -> bool:  # noqa: PLR0911
    """Whether one condition holds for an entry's metadata."""
    value = value_at(metadata, condition.path)
    operator, operand = condition.operator, condition.value
    if operator == "$exists":
        return (value is not MISSING) is operand
    if operator == IS_OBJECT:
        return isinstance(value, dict)
    if value is MISSING:
        # A missing path is null to equality (as LangGraph and MongoDB have it), and
        # fails every ordering.
        value = None if operator not in ORDERING else MISSING
    if operator == "$eq":
        return same(value, operand)
    if operator == "$ne":
        return not same(value, operand)
    if operator == "$in":
        return any(same(value, item) for item in operand)
    if operator == "$nin":
        return not any(same(value, item) for item in operand)
    return ordered(value, operator, operand)


def conditions_hold(conditions: tuple[FieldCondition, ...], metadata: Mapping[str, Any]) -> bool:
    """Whether every condition holds: the definition each backend follows."""
    return all(holds(condition, metadata) for condition in conditions)
