"""LangGraphStore held to LangGraph's own InMemoryStore over random sequences of operations.

The oracle is ``langgraph.store.memory.InMemoryStore`` with, where LangGraph's
stores disagree, what this store follows (see :mod:`loopctl_memory.langgraph.store`):

- ``search`` without a query lists the last put first (the database stores'
  ``ORDER BY updated_at DESC``): the oracle's matches, re-sorted by put;
- ``list_namespaces`` lists namespaces that hold items (the oracle's own
  namespaces left empty by a delete, or made by a get, are removed first);
- TTL, which InMemoryStore lacks, as LangGraph documents it: an item put with
  ``ttl`` minutes is deleted from the oracle once the injected clock reaches
  its expiry, which a read with ``refresh_ttl`` moves to ``ttl`` after the read.

Everything else is InMemoryStore's answer: gets, filtered searches (every
operator, ``1 == True``, nested dicts, lists, missing keys), the batch's
reads-before-writes and last-put-wins, namespace matching with ``*``,
``max_depth``, ``limit`` and ``offset``. Searches with a query compare sets
(the oracle without an index ignores the query): the same items when the
filter leaves fewer than ``limit``, else as many, all of them matches.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from loopctl_memory.langgraph import LangGraphStore
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres

OPERATIONS = int(os.environ.get("LOOPCTL_MEMORY_LANGGRAPH_OPERATIONS", "2000"))
"""Random operations a run (a batch counts as one per op it holds)."""
SEEDS = [int(seed) for seed in os.environ.get("LOOPCTL_MEMORY_LANGGRAPH_SEEDS", "1").split(",")]
"""The runs' seeds (``LOOPCTL_MEMORY_LANGGRAPH_SEEDS=1,2,3`` for more)."""

NAMESPACES = [
    ("users", "ada"),
    ("users", "ada", "notes"),
    ("users", "bo/b"),
    ("users", "bo", "b"),
    ("users", "%2F"),
    ("users", "50%"),
    ("docs",),
    ("docs", "x y"),
    ("ünï", "çödé"),
    ("*",),
]
KEYS = ["k1", "k2", "k3", "k/4", "ключ", "k 6"]
WORDS = ["tea", "coffee", "cache", "deploy", "refund", "alpha", "beta", "the", "green"]
KINDS = ["note", "fact", "todo", "Note"]


class Oracle:
    """InMemoryStore, with what this store follows where LangGraph's stores disagree."""

    def __init__(self, clock: list[datetime]) -> None:
        self.store = InMemoryStore()
        self.clock = clock
        self.put_number: dict[tuple[tuple[str, ...], str], int] = {}
        self.put_at: dict[tuple[tuple[str, ...], str], datetime] = {}
        self.read_put_at: dict[tuple[tuple[str, ...], str], datetime] = {}
        self.expiry: dict[tuple[tuple[str, ...], str], tuple[datetime, float]] = {}
        self.puts = 0

    def expire(self) -> None:
        now = self.clock[0]
        for item, (expires_at, _) in list(self.expiry.items()):
            if expires_at <= now:
                self.store.delete(*item)
                self._forget(item)

    def _forget(self, item: tuple[tuple[str, ...], str]) -> None:
        self.expiry.pop(item, None)
        self.put_number.pop(item, None)
        self.put_at.pop(item, None)

    def refresh(self, items: list[tuple[tuple[str, ...], str]]) -> None:
        for item in items:
            if item in self.expiry:
                ttl = self.expiry[item][1]
                self.expiry[item] = (self.clock[0] + timedelta(minutes=ttl), ttl)

    def batch(self, ops: list[Op]) -> list[Any]:
        self.expire()
        self.read_put_at = dict(self.put_at)  # the batch's reads see the store before its puts
        results: list[Any] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                found = self.store.get(op.namespace, op.key)
                if found is not None and op.refresh_ttl:
                    self.refresh([(op.namespace, op.key)])
                results.append(found)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list(op))
            else:
                assert isinstance(op, PutOp)
                puts.pop((op.namespace, op.key), None)
                puts[(op.namespace, op.key)] = op
                results.append(None)
        self.store.batch(list(puts.values()))
        for item, op in puts.items():
            if op.value is None:
                self._forget(item)
                continue
            self.puts += 1
            self.put_number[item] = self.puts
            self.put_at[item] = self.clock[0]
            if op.ttl is None:
                self.expiry.pop(item, None)
            else:
                self.expiry[item] = (self.clock[0] + timedelta(minutes=op.ttl), op.ttl)
        return results

    def _search(self, op: SearchOp) -> list[SearchItem]:
        every = self.store.search(op.namespace_prefix, filter=op.filter, limit=10**9)
        every.sort(key=lambda item: -self.put_number[(item.namespace, item.key)])
        if op.query:
            return every  # compared as sets, below
        found = every[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            self.refresh([(item.namespace, item.key) for item in found])
        return found

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        for namespace in [ns for ns, items in self.store._data.items() if not items]:
            del self.store._data[namespace]
        return self.store.list_namespaces(
            prefix=_path_of(op, "prefix"),
            suffix=_path_of(op, "suffix"),
            max_depth=op.max_depth,
            limit=op.limit,
            offset=op.offset,
        )


def _path_of(op: ListNamespacesOp, kind: str) -> tuple[str, ...] | None:
    return next((c.path for c in op.match_conditions or () if c.match_type == kind), None)


def _value(rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {
        "text": " ".join(rng.choices(WORDS, k=rng.randint(0, 5))),
        "n": rng.choice([rng.randint(-3, 5), rng.randint(-3, 5) / 2, 0, 1]),
    }
    if rng.random() < 0.7:
        value["kind"] = rng.choice(KINDS)
    if rng.random() < 0.4:
        value["flag"] = rng.choice([True, False, 1, 0])
    if rng.random() < 0.3:
        value["tags"] = rng.sample(WORDS, rng.randint(0, 2))
    if rng.random() < 0.3:
        value["meta"] = {"a": rng.randint(0, 2), "b": rng.choice(KINDS)}
    if rng.random() < 0.1:
        value["meta"] = rng.choice([None, "flat", [1, 2]])
    return value


def _filter(rng: random.Random) -> dict[str, Any] | None:  # noqa: PLR0911 - one per shape
    shape = rng.randint(0, 12)
    if shape == 0:
        return None
    if shape == 1:
        return {"kind": rng.choice(KINDS)}
    if shape == 2:
        operator = rng.choice(["$gt", "$gte", "$lt", "$lte"])
        return {"n": {operator: rng.choice([0, 1, 1.5, -1, 2])}}
    if shape == 3:
        return {"n": {"$gte": 0, "$lt": rng.choice([1, 2.5])}, "kind": {"$ne": "todo"}}
    if shape == 4:
        return {"flag": rng.choice([True, False, 1, 0])}
    if shape == 5:
        return {"flag": {"$ne": rng.choice([True, 0])}}
    if shape == 6:
        return {"meta": {"a": rng.randint(0, 2)}}
    if shape == 7:
        return {"meta": rng.choice([{}, None, {"a": 1, "b": "note"}])}
    if shape == 8:
        return {"tags": rng.sample(WORDS, rng.randint(0, 2))}
    if shape == 9:
        return {"missing": None, "n": {"$eq": rng.choice([1, 1.0, True, 0.5])}}
    if shape == 10:
        return {"n": rng.choice([0, 1, 2, 0.5, -1])}
    if shape == 11:
        return {"text": {"$eq": rng.choice(WORDS)}}
    return {"kind": {"$eq": rng.choice(KINDS), "$ne": "fact"}}


def _prefix(rng: random.Random) -> tuple[str, ...]:
    namespace = rng.choice(NAMESPACES)
    return namespace[: rng.randint(0, len(namespace))]


def _op(rng: random.Random) -> Op:
    roll = rng.random()
    namespace, key = rng.choice(NAMESPACES), rng.choice(KEYS)
    if roll < 0.38:
        ttl = rng.choice([None, None, None, 1.0, 2.5, 10.0])
        return PutOp(namespace, key, _value(rng), index=rng.choice([None, False]), ttl=ttl)
    if roll < 0.46:
        return PutOp(namespace, key, None)
    if roll < 0.62:
        return GetOp(namespace, key, refresh_ttl=rng.random() < 0.7)
    if roll < 0.88:
        query = " ".join(rng.choices(WORDS, k=2)) if rng.random() < 0.3 else None
        return SearchOp(
            _prefix(rng),
            filter=_filter(rng),
            limit=rng.choice([1, 3, 10, 50]),
            offset=0 if query else rng.choice([0, 0, 1, 4]),
            query=query,
            refresh_ttl=rng.random() < 0.5,
        )
    return ListNamespacesOp(
        match_conditions=_conditions(rng),
        max_depth=rng.choice([None, None, 1, 2, 3]),
        limit=rng.choice([1, 3, 100]),
        offset=rng.choice([0, 0, 1, 2]),
    )


def _conditions(rng: random.Random) -> tuple[MatchCondition, ...] | None:
    conditions = []
    for kind in ("prefix", "suffix"):
        if rng.random() < 0.4:
            path = list(rng.choice(NAMESPACES))
            path = path[: rng.randint(1, len(path))] if kind == "prefix" else path[-1:]
            if rng.random() < 0.4:
                path[rng.randrange(len(path))] = "*"
            conditions.append(MatchCondition(kind, tuple(path)))
    return tuple(conditions) or None


def _operations(seed: int) -> Iterator[list[Op] | timedelta]:
    """Batches of one to five operations, and now and then a step of the clock."""
    rng = random.Random(seed)
    made = 0
    while made < OPERATIONS:
        if rng.random() < 0.08:
            yield timedelta(minutes=rng.choice([0.5, 1, 2, 3, 11]))
            continue
        ops = [_op(rng) for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 5))]
        made += len(ops)
        yield ops


def _same_item(mine: Item, theirs: Item, oracle: Oracle) -> None:
    assert (tuple(mine.namespace), mine.key, mine.value) == (
        tuple(theirs.namespace),
        theirs.key,
        theirs.value,
    )
    put_at = oracle.read_put_at[(tuple(theirs.namespace), theirs.key)]
    assert mine.created_at == mine.updated_at == put_at


def _compare(op: Op, mine: Any, theirs: Any, oracle: Oracle) -> None:
    if isinstance(op, GetOp):
        assert (mine is None) == (theirs is None), (mine, theirs)
        if mine is not None:
            _same_item(mine, theirs, oracle)
    elif isinstance(op, SearchOp) and op.query:
        keys = [(tuple(item.namespace), item.key) for item in mine]
        every = {(tuple(item.namespace), item.key): item for item in theirs}
        assert len(set(keys)) == len(keys)
        assert set(keys) <= set(every), (op, keys, list(every))
        assert len(keys) == min(op.limit, len(every))
        for item in mine:
            _same_item(item, every[(tuple(item.namespace), item.key)], oracle)
        # An item the ranking lists has a score and comes first; the rest have none.
        scores = [item.score for item in mine]
        ranked = [score for score in scores if score is not None]
        assert scores[: len(ranked)] == ranked
        assert ranked == sorted(ranked, reverse=True)
    elif isinstance(op, SearchOp):
        assert [(tuple(i.namespace), i.key) for i in mine] == [
            (tuple(i.namespace), i.key) for i in theirs
        ], op
        for one, other in zip(mine, theirs, strict=True):
            _same_item(one, other, oracle)
            assert one.score is None
    elif isinstance(op, ListNamespacesOp):
        assert mine == theirs, op
    else:
        assert mine is None


def _refresh_for_query_searches(ops: list[Op], mine: list[Any], oracle: Oracle) -> None:
    """The oracle refreshes what a search with a query returned here (its order differs)."""
    for op, found in zip(ops, mine, strict=True):
        if isinstance(op, SearchOp) and op.query and op.refresh_ttl:
            oracle.refresh([(tuple(item.namespace), item.key) for item in found])


LANGGRAPH_BACKENDS = [
    "sqlite-memory",
    "sqlite-file",
    pytest.param("postgresql", marks=NEEDS_POSTGRES),
]


@pytest.mark.parametrize("backend", LANGGRAPH_BACKENDS)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_operations_answer_as_langgraphs_inmemorystore(
    backend: str, seed: int, tmp_path: Path
) -> None:
    if backend == "sqlite-memory":
        target: str | Path = ":memory:"
    elif backend == "sqlite-file":
        target = tmp_path / "memory.db"
    else:
        target = os.environ[POSTGRES_URL_VARIABLE]
        asyncio.run(reset_postgres(target))
    clock = [datetime(2026, 1, 1, tzinfo=UTC)]
    oracle = Oracle(clock)
    checked = 0
    with LangGraphStore.from_conn_string(target, clock=lambda: clock[0]) as store:
        for step in _operations(seed):
            if isinstance(step, timedelta):
                clock[0] += step
                continue
            # Every third batch through the async API: the same store, from another loop.
            mine = asyncio.run(store.abatch(step)) if checked % 3 == 1 else store.batch(step)
            theirs = oracle.batch(step)
            for op, one, other in zip(step, mine, theirs, strict=True):
                _compare(op, one, other, oracle)
            _refresh_for_query_searches(step, mine, oracle)
            checked += len(step)
        listed = store.list_namespaces(limit=1000)
        assert listed == oracle.batch([ListNamespacesOp(limit=1000)])[0]
    assert checked >= OPERATIONS
