"""An item's value as a memory: its text for ranking, and LangGraph's filters over it.

The value is the memory's metadata, whole. The memory's text is what the
index's ``fields`` select from it (LangGraph's path syntax, its own
``get_text_at_path``), one line a text; an item put with ``index=False``, or
whose fields select nothing, has no text: it is stored and found by key, by
namespace and by filter, and ranked by nothing.

A ``filter`` means what it means to LangGraph's ``InMemoryStore``: each key a
top-level key of the value; a plain value equals (Python's ``==``), a dict
without operators matches the keys it gives, a list equals item by item;
``$eq``, ``$ne``, and ``$gt``/``$gte``/``$lt``/``$lte`` comparing as numbers
(``float()`` of both sides). Where ``InMemoryStore`` raises (a range on a
missing value or a string that is not a number), the condition is false here,
as in LangGraph's database stores. :func:`matches` is that definition;
:func:`pushed_down` is a metadata filter the database applies first, one that
passes every value :func:`matches` passes (and maybe more), so the store reads
no more than it must.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.store.base import get_text_at_path, tokenize_path

from loopctl_memory.errors import InvalidArgumentError

_RANGES = {
    "$gt": float.__gt__,
    "$gte": float.__ge__,
    "$lt": float.__lt__,
    "$lte": float.__le__,
}
_OPERATORS = ("$eq", "$ne", *_RANGES)
_INT64 = 2**63
# get_text_at_path's json.dumps(sort_keys=True, ensure_ascii=False) for "$", made once.
_WHOLE = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def paths_of(fields: Sequence[str] | None) -> list[tuple[str, str | list[str]]]:
    """Each indexed field with its tokens (``"$"``: the whole value), as LangGraph parses them."""
    return [(field, field if field == "$" else tokenize_path(field)) for field in fields or ["$"]]


def text_of(value: Mapping[str, Any], paths: list[tuple[str, str | list[str]]]) -> str:
    """The memory's text: every text the paths select in ``value``, one a line."""
    # The default: the whole value, as LangGraph spells it.
    if len(paths) == 1 and paths[0][1] == "$":
        return _WHOLE.encode(value if type(value) is dict else dict(value))
    return "\n".join(text for _, path in paths for text in get_text_at_path(value, path))


def check_filter(conditions: object) -> Mapping[str, Any] | None:
    """``conditions`` if it is a filter (None or a dict) whose operators are all known.

    Raises:
        InvalidArgumentError: it is not a dict, or names an operator LangGraph has
            not (``InMemoryStore`` raises only once an item is there to test; here a
            bad filter fails whatever the store holds).

    """
    if conditions is None:
        return None
    if not isinstance(conditions, Mapping):
        raise InvalidArgumentError(f"a filter is a dict, not {type(conditions).__name__}")
    for wanted in conditions.values():
        _check_condition(wanted)
    return conditions


def _check_condition(wanted: Any) -> None:
    if isinstance(wanted, dict):
        if any(isinstance(key, str) and key.startswith("$") for key in wanted):
            unknown = sorted(str(key) for key in wanted if key not in _OPERATORS)
            if unknown:
                raise InvalidArgumentError(
                    f"Unsupported operator: {unknown[0]} (a filter knows {', '.join(_OPERATORS)})"
                )
            return
        for inner in wanted.values():
            _check_condition(inner)
    elif isinstance(wanted, list | tuple):
        for inner in wanted:
            _check_condition(inner)


def matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` passes a LangGraph filter (see the module's docstring)."""
    return not conditions or all(
        _compare(value.get(key), wanted) for key, wanted in conditions.items()
    )


def _compare(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(key.startswith("$") for key in wanted):
            return all(_operator(found, op, operand) for op, operand in wanted.items())
        if not isinstance(found, dict):
            return False
        return all(_compare(found.get(key), inner) for key, inner in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_compare(one, other) for one, other in zip(found, wanted, strict=False))
        )
    return bool(found == wanted)


def _operator(found: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(found == operand)
    if operator == "$ne":
        return bool(found != operand)
    compare = _RANGES.get(operator)
    if compare is None:
        raise ValueError(f"Unsupported operator: {operator}")
    try:
        return compare(float(found), float(operand))
    except (TypeError, ValueError):
        return False


def pushed_down(conditions: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A metadata filter that passes at least what :func:`matches` passes (None: no condition).

    See :mod:`loopctl_memory.metadata_filter`; what it cannot say typed is left to
    :func:`matches`.
    """
    found: dict[str, Any] = {}
    for key, wanted in (conditions or {}).items():
        if _nameable(key):
            _push(found, key, wanted)
    return found or None


def _nameable(key: object) -> bool:
    # A metadata path splits at "." and "$" starts an operator: such keys are not paths.
    return isinstance(key, str) and bool(key) and "." not in key and not key.startswith("$")


def _push(found: dict[str, Any], path: str, wanted: Any) -> None:
    if isinstance(wanted, dict):
        if not wanted:
            found[path] = {}  # an object, any keys
        elif any(isinstance(key, str) and key.startswith("$") for key in wanted):
            said = _operators(wanted)
            if said:
                found[path] = said
        else:
            for key, inner in wanted.items():
                if _nameable(key):
                    _push(found, f"{path}.{key}", inner)
        return
    equal = _equal_to(wanted)
    if equal is not None:
        found[path] = _equality(equal)


def _equality(equal: list[Any]) -> dict[str, Any]:
    # Null is said with "$eq", which also holds where the path is missing (as None does).
    return {"$eq": None} if equal == [None] else {"$in": equal}


def _operators(wanted: Mapping[str, Any]) -> dict[str, Any]:
    said: dict[str, Any] = {}
    equal = _equal_to(wanted["$eq"]) if "$eq" in wanted else None
    if equal is not None:
        said.update(_equality(equal))
    unequal = _equal_to(wanted["$ne"]) if "$ne" in wanted else None
    # "$ne" of a value Python finds equal to two typed ones (1 and True) is not said typed.
    if unequal is not None and len(unequal) == 1:
        said["$nin"] = unequal
    return said


def _equal_to(wanted: Any) -> list[Any] | None:
    """The typed values equal to ``wanted`` under Python's ``==``, or None if not said so."""
    equal: list[Any] | None = None
    if wanted is None or isinstance(wanted, str):
        equal = [wanted]
    elif isinstance(wanted, bool):
        equal = [wanted, int(wanted)]
    elif isinstance(wanted, int):
        if -_INT64 <= wanted < _INT64:
            equal = [wanted, bool(wanted)] if wanted in (0, 1) else [wanted]
    elif isinstance(wanted, float) and math.isfinite(wanted):
        equal = [wanted, bool(wanted)] if wanted in (0, 1) else [wanted]
    return equal
