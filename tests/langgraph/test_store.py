"""LangGraphStore's own promises: namespaces, errors, ranking, ttl, batches, threads, files.

What it shares with LangGraph's InMemoryStore is held to it by
``test_differential``; these are the promises the oracle cannot check (an
index, TTLConfig, errors, files, threads), each through the public API.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    PutOp,
    SearchOp,
    TTLConfig,
)
from langgraph.store.memory import InMemoryStore

from loopctl_memory import InvalidArgumentError, ReadOnlyStoreError, sync
from loopctl_memory.langgraph import LangGraphStore
from tests.embedders import WordsEmbedder


@pytest.fixture
def store() -> Any:
    with LangGraphStore.from_conn_string(":memory:") as opened:
        yield opened


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_labels_holding_slashes_and_percents_round_trip_as_namespaces_of_their_own(store):
    namespaces = [("a/b",), ("a", "b"), ("a%2Fb",), ("a", "%"), ("a", "%25"), ("ü", "*")]
    for number, namespace in enumerate(namespaces):
        store.put(namespace, "k", {"n": number})
    for number, namespace in enumerate(namespaces):
        found = store.get(namespace, "k")
        assert (found.namespace, found.value) == (namespace, {"n": number})
    assert store.list_namespaces() == sorted(namespaces)
    assert [item.value["n"] for item in store.search(("a",))] == [4, 3, 1]
    assert store.list_namespaces(prefix=("a", "*"), max_depth=1) == [("a",)]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put((), "k", {}),
        lambda s: s.put(("langgraph", "x"), "k", {}),
        lambda s: s.put(("a.b",), "k", {}),
        lambda s: s.put(("a", ""), "k", {}),
        lambda s: s.put(("a", 1), "k", {}),
        lambda s: s.put(("a\x00",), "k", {}),
        lambda s: s.get(("a.b",), "k"),
        lambda s: s.search(("a", "")),
        lambda s: s.delete(("x.y",), "k"),
        lambda s: s.list_namespaces(prefix=("a.b",)),
    ],
)
def test_an_invalid_namespace_raises_what_langgraph_raises_and_changes_nothing(store, call):
    with pytest.raises(InvalidNamespaceError) as mine:
        call(store)
    with pytest.raises(InvalidNamespaceError) as theirs:
        call(InMemoryStore())
    assert str(mine.value) == str(theirs.value)
    assert store.list_namespaces() == []


@pytest.mark.parametrize(
    "ops",
    [
        [PutOp(("a.b",), "k", {})],
        [PutOp((), "k", {})],
        [GetOp(("ok",), "k"), SearchOp(("a\x00",))],
    ],
)
def test_ops_given_to_batch_are_checked_as_the_methods_check_them(store, ops):
    # LangGraph asks stores to (validate_op_namespace); its InMemoryStore does not.
    with pytest.raises(InvalidNamespaceError):
        store.batch(ops)
    assert store.list_namespaces() == []


def test_a_namespace_too_long_for_a_scope_is_an_invalid_namespace(store):
    with pytest.raises(InvalidNamespaceError, match="too long"):
        store.put(("x" * 200, "y" * 60), "k", {})


def test_a_batch_reads_first_then_writes_and_the_last_put_of_an_item_wins(store):
    store.put(("n",), "k", {"v": 0})
    results = store.batch(
        [
            PutOp(("n",), "k", {"v": 1}),
            GetOp(("n",), "k"),
            PutOp(("n",), "k", {"v": 2}),
            SearchOp(("n",)),
            PutOp(("n",), "gone", None),
        ]
    )
    assert results[0] is None
    assert results[1].value == {"v": 0}
    assert [item.value for item in results[3]] == [{"v": 0}]
    assert store.get(("n",), "k").value == {"v": 2}


def test_a_value_that_cannot_be_stored_stores_nothing_of_its_batch(store):
    with pytest.raises(InvalidArgumentError):
        store.batch([PutOp(("n",), "a", {"ok": 1}), PutOp(("n",), "b", {"bad": object()})])
    assert store.search(("n",)) == []


def test_without_an_index_a_query_ranks_by_bm25_and_the_unranked_follow(store):
    store.put(("docs",), "tea", {"text": "green tea and more tea"})
    store.put(("docs",), "coffee", {"text": "strong coffee"})
    store.put(("docs",), "both", {"text": "tea or coffee"})
    found = store.search(("docs",), query="tea", limit=10)
    assert store.ranking == "bm25"
    assert [item.key for item in found] == ["tea", "both", "coffee"]
    assert found[0].score > found[1].score > 0
    assert found[2].score is None
    assert [item.key for item in store.search(("docs",), query="tea", limit=1, offset=1)] == [
        "both"
    ]


@pytest.mark.parametrize(
    "index",
    [
        {"embed": WordsEmbedder(dims=32), "fields": ["text"]},
        {"embed": DeterministicFakeEmbedding(size=32), "dims": 32, "fields": ["text"]},
        {"embed": lambda texts: [[float(len(t)), 1.0] for t in texts], "dims": 2},
    ],
    ids=["embedder", "langchain-embeddings", "function"],
)
def test_with_an_index_a_query_ranks_by_hybrid_and_index_false_is_never_ranked(index):
    with LangGraphStore.from_conn_string(":memory:", index=index) as store:
        store.put(("docs",), "tea", {"text": "green tea", "other": "coffee"})
        store.put(("docs",), "hidden", {"text": "green tea"}, index=False)
        found = store.search(("docs",), query="green tea", limit=10)
        assert store.ranking == "hybrid"
        assert [(item.key, item.score is None) for item in found] == [
            ("tea", False),
            ("hidden", True),
        ]


def test_the_indexed_fields_are_the_text_and_put_can_name_its_own():
    embedder = WordsEmbedder(dims=32)
    index = {"embed": embedder, "fields": ["title", "notes[*].text"]}
    with LangGraphStore.from_conn_string(":memory:", index=index, ranking="bm25") as store:
        store.put(("d",), "a", {"title": "alpha", "notes": [{"text": "beta"}, {"text": "gamma"}]})
        store.put(("d",), "b", {"title": "delta", "body": "gamma"}, index=["body"])
        assert {i.key for i in store.search(("d",), query="gamma") if i.score} == {"a", "b"}
        assert [i.key for i in store.search(("d",), query="delta") if i.score] == []
        assert [i.key for i in store.search(("d",), query="beta") if i.score] == ["a"]


def test_a_ranking_needing_vectors_without_an_index_is_refused():
    with pytest.raises(InvalidArgumentError, match="embedder"):
        LangGraphStore.from_conn_string(":memory:", ranking="vector")
    with pytest.raises(InvalidArgumentError, match="index="):
        LangGraphStore.from_conn_string(":memory:", embedder=WordsEmbedder())


def test_ttl_config_sets_default_ttl_and_whether_reads_refresh():
    clock = Clock()
    ttl = TTLConfig(default_ttl=10, refresh_on_read=False)
    with LangGraphStore.from_conn_string(":memory:", ttl=ttl, clock=clock) as store:
        store.put(("t",), "default", {"v": 1})
        store.put(("t",), "forever", {"v": 2}, ttl=None)
        store.put(("t",), "short", {"v": 3}, ttl=2)
        clock.now += timedelta(minutes=1.5)
        assert store.get(("t",), "short") is not None  # no refresh: refresh_on_read=False
        store.get(("t",), "default", refresh_ttl=True)  # expires 10 minutes from now
        clock.now += timedelta(minutes=0.5)
        assert store.get(("t",), "short") is None  # 2 minutes after its put
        clock.now += timedelta(minutes=9)
        assert {item.key for item in store.search(("t",))} == {"default", "forever"}
        clock.now += timedelta(minutes=1)
        assert {item.key for item in store.search(("t",))} == {"forever"}
        assert store.sweep_ttl() == 2
        assert store.sweep_ttl() == 0
        assert store.list_namespaces() == [("t",)]


def test_ttl_config_sweeps_expired_items_on_a_timer(tmp_path: Path):
    clock = Clock()
    path = tmp_path / "memory.db"
    # LangGraph types it an int of minutes; this store takes any positive number.
    ttl = TTLConfig(sweep_interval_minutes=0.001)  # type: ignore[typeddict-item]
    with (
        LangGraphStore.from_conn_string(path, ttl=ttl, clock=clock) as store,
        sync.open_store(path) as beside,
    ):
        store.put(("t",), "old", {"v": 1}, ttl=1)
        store.put(("t",), "kept", {"v": 2})
        clock.now += timedelta(minutes=1)
        # The rows stay until a sweep: another store counts them, expired or not.
        deadline = time.monotonic() + 120
        while beside.scopes() != [("t", 1)]:
            assert time.monotonic() < deadline, "the sweeper never swept"
            time.sleep(0.05)
        assert [item.key for item in store.search(("t",))] == ["kept"]


def test_a_refreshing_search_moves_the_expiry_of_what_it_returns_only():
    clock = Clock()
    with LangGraphStore.from_conn_string(":memory:", clock=clock) as store:
        store.put(("t", "a"), "k", {"v": 1}, ttl=1)
        store.put(("t", "b"), "k", {"v": 2}, ttl=1)
        clock.now += timedelta(seconds=50)
        assert [item.value for item in store.search(("t", "a"))] == [{"v": 1}]
        clock.now += timedelta(seconds=50)
        assert [item.value for item in store.search(("t",))] == [{"v": 1}]
        assert store.list_namespaces() == [("t", "a")]


def _got(store: LangGraphStore, namespace: tuple[str, ...], key: str) -> Item:
    found = store.get(namespace, key)
    assert found is not None
    return found


def test_a_file_keeps_items_their_times_and_ttls_across_opens(tmp_path: Path):
    clock = Clock()
    path = tmp_path / "memory.db"
    with LangGraphStore.from_conn_string(path, clock=clock) as store:
        store.put(("u", "ada"), "prefs", {"theme": "dark"}, ttl=5)
        put_at = _got(store, ("u", "ada"), "prefs").created_at
    assert put_at == clock.now
    clock.now += timedelta(minutes=4)
    with LangGraphStore.from_conn_string(path, clock=clock) as store:
        assert _got(store, ("u", "ada"), "prefs").value == {"theme": "dark"}  # refreshed
    clock.now += timedelta(minutes=4)
    with LangGraphStore.from_conn_string(path, clock=clock, read_only=True) as store:
        assert _got(store, ("u", "ada"), "prefs").created_at == put_at
        with pytest.raises(ReadOnlyStoreError):
            store.put(("u", "ada"), "prefs", {})


def test_sync_and_async_calls_from_many_threads_and_loops_all_land(store):
    def writer(number: int) -> None:
        for key in range(20):
            store.put(("w", str(number)), str(key), {"n": key})

    async def async_writer(number: int) -> None:
        await asyncio.gather(
            *(store.aput(("a", str(number)), str(key), {"n": key}) for key in range(20))
        )

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=asyncio.run, args=(async_writer(n),)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.search((), limit=1000)) == 160
    assert len(store.list_namespaces(limit=100)) == 8


async def test_the_async_api_answers_as_the_sync_one(store):
    await store.aput(("n",), "k", {"text": "tea"})
    assert (await store.aget(("n",), "k")).value == {"text": "tea"}
    assert [item.key for item in await store.asearch(("n",), query="tea")] == ["k"]
    assert await store.alist_namespaces() == [("n",)]
    await store.adelete(("n",), "k")
    assert await store.aget(("n",), "k") is None


def test_the_core_never_imports_langgraph():
    code = (
        "import sys, loopctl_memory, loopctl_memory.sync, loopctl_memory.cli.app,"
        " loopctl_memory.mcp_server;"
        "from loopctl_memory import open_store, InMemoryStore;"
        "print(sorted(m for m in sys.modules if m.startswith(('langgraph', 'langchain'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


def test_a_closed_store_refuses_work():
    opened = LangGraphStore.from_conn_string(":memory:")
    opened.close()
    opened.close()
    with pytest.raises(Exception, match="closed"):
        opened.put(("n",), "k", {})
