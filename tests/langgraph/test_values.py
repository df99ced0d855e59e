"""The filter pushed into the database never loses a match LangGraph's definition keeps.

``values.pushed_down`` says a LangGraph filter as a metadata filter for the
database to apply first; ``values.matches`` (LangGraph's ``InMemoryStore``
definition) then decides. For any value and filter, whatever ``matches``
passes, the pushed-down filter must pass too, and ``matches`` must agree with
LangGraph's own ``InMemoryStore`` wherever that one answers without raising.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from loopctl_memory import InvalidArgumentError, MemoryCategory, MemoryEntry, MemoryFilter
from loopctl_memory.entry import check_entry
from loopctl_memory.langgraph import LangGraphStore, values

KEYS = st.sampled_from(["a", "b", "n", "a.b", "$x", "tags"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 0.5, -1.5, 2**63, -(2**63) - 1]),
    st.sampled_from(["", "x", "1", "tea", "ß"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)
VALUES = st.dictionaries(KEYS, JSON, max_size=4)
PLAIN_VALUES = st.dictionaries(
    st.sampled_from(["a", "b", "n", "tags"]),
    st.one_of(SCALARS.filter(lambda v: not (isinstance(v, float) and abs(v) >= 2**63)), JSON),
    min_size=1,
    max_size=4,
)
"""Values a store takes, keyed by names a path can hold: most of their conditions push down."""
OPERATORS = st.dictionaries(
    st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), SCALARS, min_size=1, max_size=2
)
CONDITIONS = st.recursive(
    st.one_of(SCALARS, OPERATORS),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(KEYS, inner, max_size=2),
    max_leaves=4,
)
FILTERS = st.dictionaries(KEYS, CONDITIONS, max_size=3)


def _condition_met_by(draw: Any, found: Any) -> Any:
    """A condition ``found`` meets under LangGraph's definition (most of the time)."""
    if isinstance(found, dict) and found and draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(sorted(found)), min_size=1, max_size=2, unique=True))
        return {key: _condition_met_by(draw, found[key]) for key in keys}
    shape = draw(st.sampled_from(["plain", "$eq", "$ne", "range", "other"]))
    if shape == "plain":
        return found
    if shape == "$eq":
        return {"$eq": found}
    if shape == "$ne":
        return {"$ne": draw(SCALARS)}
    if shape == "range" and isinstance(found, int | float):
        return {draw(st.sampled_from(["$gte", "$lte"])): found}
    return draw(CONDITIONS)


@st.composite
def values_with_filters(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A value, and a filter mostly made of conditions it meets."""
    value = draw(PLAIN_VALUES)
    keys = draw(st.lists(st.sampled_from(sorted(value)), min_size=1, max_size=3, unique=True))
    conditions = {key: _condition_met_by(draw, value.get(key)) for key in keys}
    return value, conditions


def _entry(value: dict[str, Any]) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, "", metadata=value)


def _storable(value: dict[str, Any]) -> bool:
    """Whether a store takes ``value`` as metadata (JSON, integers of 64 bits)."""
    try:
        check_entry(_entry(value))
    except ValueError:
        return False
    return True


def _known(conditions: dict[str, Any]) -> bool:
    try:
        values.check_filter(conditions)
    except InvalidArgumentError:
        return False
    return True


def test_a_filter_naming_an_unknown_operator_is_refused_even_with_nothing_to_test():
    with pytest.raises(InvalidArgumentError, match=r"Unsupported operator: \$in"):
        values.check_filter({"a": {"b": {"$in": [1]}}})
    with LangGraphStore.from_conn_string(":memory:") as store, pytest.raises(InvalidArgumentError):
        store.search(("n",), filter={"a": {"$regex": "x"}})
    assert values.check_filter({"$x": 1, "a": [{"b": 2}], "n": {"$gt": 1}}) is not None


@settings(max_examples=1000, derandomize=True, database=None, deadline=None)
@given(made=st.one_of(values_with_filters(), st.tuples(VALUES, FILTERS)))
def test_the_pushed_down_filter_passes_every_value_langgraphs_filter_passes(made):
    value, conditions = made
    if not _storable(value) or not _known(conditions):
        return
    pushed = values.pushed_down(conditions)
    if pushed is None or not values.matches(value, conditions):
        return
    assert MemoryFilter(metadata=pushed).matches(_entry(value)), (value, conditions, pushed)


@settings(max_examples=1000, derandomize=True, database=None, deadline=None)
@given(made=st.one_of(values_with_filters(), st.tuples(VALUES, FILTERS)))
def test_matches_is_inmemorystores_filter_wherever_that_one_answers(made):
    value, conditions = made
    if not _known(conditions):
        return  # an unknown operator: refused here (below), raised there once an item is tested
    oracle = InMemoryStore()
    oracle.put(("n",), "k", value)
    try:
        theirs = bool(oracle.search(("n",), filter=conditions))
    except (TypeError, ValueError, OverflowError):
        return  # InMemoryStore raises on a range over what is not a number: here it is false
    assert values.matches(value, conditions) == theirs


@given(value=VALUES)
def test_the_default_text_is_langgraphs_spelling_of_the_whole_value(value: dict[str, Any]) -> None:
    from types import MappingProxyType  # noqa: PLC0415 - a Mapping that is not a dict

    from langgraph.store.base import get_text_at_path  # noqa: PLC0415

    whole = values.paths_of(None)
    assert values.text_of(value, whole) == get_text_at_path(value, "$")[0]
    assert values.text_of(MappingProxyType(value), whole) == get_text_at_path(value, "$")[0]
    assert values.text_of(value, values.paths_of(["$"])) == get_text_at_path(value, "$")[0]
