"""The blocking store shared by threads: nothing lost, errors unchanged, nothing left behind.

Each test checks exact outcomes, never timings. pytest turns a ResourceWarning
and an exception in any thread ("Event loop is closed") into a failure.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import (
    ConsolidationConfig,
    DuplicateEntryError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    StorageError,
    sync,
)
from loopctl_memory.sync import SyncMemoryStore
from tests.conftest import integrity_check

THREADS = 8
PER_THREAD = 25
JOIN_TIMEOUT = 60.0  # seconds; only a hang ever reaches it, and then the test fails


def fact(memory: str, **fields: Any) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, memory, **fields)


def marker(thread: int) -> str:
    """A word only thread ``thread`` writes (none is a substring of another)."""
    return f"thread{thread}mark"


def run_in_threads(work: Callable[[int], object], count: int = THREADS) -> None:
    """Run ``work(0)`` ... ``work(count - 1)`` in threads started together; re-raise a failure."""
    start = threading.Barrier(count)
    failures: list[BaseException] = []

    def worker(number: int) -> None:
        try:
            start.wait()
            work(number)
        except BaseException as exc:  # re-raised in the test's thread below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert [] == [thread.name for thread in threads if thread.is_alive()]
    if failures:
        raise failures[0]


def threads_left(before: set[threading.Thread]) -> list[str]:
    """The threads started since ``before`` still alive once each had its chance to end.

    A thread that has finished its work may need a moment to exit (an aiosqlite worker
    after handing back its close): joined, not timed. A leaked one never ends.
    """
    new = [thread for thread in threading.enumerate() if thread not in before]
    for thread in new:
        thread.join(JOIN_TIMEOUT)
    return [thread.name for thread in new if thread.is_alive()]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def store(path: Path) -> Iterator[SyncMemoryStore]:
    with sync.open_store(path) as opened:
        yield opened


# --- many threads, one store ---------------------------------------------------------


def test_eight_threads_storing_and_retrieving_at_once_lose_nothing(store):
    stored: dict[int, set[uuid.UUID]] = {number: set() for number in range(THREADS)}

    def work(number: int) -> None:
        mine = stored[number]
        for index in range(PER_THREAD):
            entry = fact(f"note {index} of {marker(number)}", tags=[f"t{number}"])
            store.store(entry)
            mine.add(entry.id)
            found = store.retrieve_scored(marker(number), PER_THREAD, matched_only=True)
            assert mine == {entry.id for entry, _ in found}
            [best] = store.retrieve(marker(number), 1)
            assert best.id in mine

    run_in_threads(work)

    assert THREADS * PER_THREAD == store.count()
    for number, ids in stored.items():
        assert ids == {entry.id for entry in store.retrieve(marker(number), PER_THREAD)}
        assert PER_THREAD == len(ids)


def test_threads_batching_and_counting_at_once_see_whole_batches(store):
    """A count never sees half a store_many: each batch is one transaction."""

    def work(number: int) -> None:
        for batch in range(5):
            store.store_many(fact(f"{marker(number)} batch {batch} #{i}") for i in range(10))
            assert 0 == store.count() % 10

    run_in_threads(work)

    assert THREADS * 5 * 10 == store.count()


def test_a_scope_view_shared_by_threads_holds_exactly_what_they_stored(store):
    view = store.scope("team/agent")

    def work(number: int) -> None:
        for index in range(PER_THREAD):
            view.store(fact(f"note {index} of {marker(number)}"))
            assert index + 1 == len(
                view.retrieve_scored(marker(number), PER_THREAD, matched_only=True)
            )

    run_in_threads(work)

    assert THREADS * PER_THREAD == view.count()
    assert 0 == store.count()
    assert THREADS * PER_THREAD == store.with_descendants().count()
    assert [("team/agent", THREADS * PER_THREAD)] == store.scopes()


def test_threads_with_views_of_their_own_see_only_their_scope(store):
    def work(number: int) -> None:
        mine = store.scope(f"agents/{number}")
        for index in range(PER_THREAD):
            mine.store(fact(f"note {index} shared words"))
        assert PER_THREAD == mine.count()
        assert PER_THREAD == len(mine.retrieve("shared words", 10 * PER_THREAD))

    run_in_threads(work)

    agents = store.scope("agents", descendants=True)
    assert THREADS * PER_THREAD == agents.count()
    assert [(f"agents/{n}", PER_THREAD) for n in range(THREADS)] == agents.scopes()


# --- the rest of the API, blocking -----------------------------------------------------


def test_every_method_answers_as_the_async_store(store):
    entries = [fact(f"entry {i} cache", relevance=r) for i, r in enumerate([0.5] * 3 + [0.9] * 2)]
    store.store_many(entries)
    store.store(fact("stale", relevance=0.01))

    assert not store.is_empty()
    assert entries[0] == store.get(entries[0].id)
    updated = store.update(entries[0].id, memory="entry 0 renamed", tags=["x"])
    assert updated is not None
    assert (["x"], "entry 0 renamed") == (updated.tags, updated.memory)
    assert updated == store.get(entries[0].id)
    assert store.delete(entries[1].id)
    assert not store.delete(entries[1].id)
    assert 1 == store.consolidate().pruned
    assert 2 == store.forget(category=MemoryCategory.FACT, below=0.6)
    assert [entries[3].id, entries[4].id] == [e.id for e in store.retrieve("cache", 5)]
    assert [entries[3].id] == store.ids_with_prefix(entries[3].id.hex[:16], limit=5)
    assert 2 == store.count()
    assert 2 == store.summary().entries
    assert 0 < store.storage_bytes()
    assert store.schema_revision() is not None
    assert 0 == store.consolidate(ConsolidationConfig.full()).pruned


def test_iter_entries_yields_every_entry_in_order_batch_by_batch(store):
    entries = [fact(f"entry {i}") for i in range(7)]
    store.store_many(entries)

    assert [e.id for e in entries] == [e.id for e in store.iter_entries(batch_size=3)]
    assert [("", e.id) for e in entries] == [
        (scope, e.id) for scope, e in store.iter_scoped_entries(batch_size=2)
    ]


def test_the_store_stays_usable_while_iterating(store):
    store.store_many(fact(f"entry {i}") for i in range(4))

    for entry in store.iter_entries(batch_size=1):
        store.update(entry.id, relevance=0.25)

    assert {0.25} == {entry.relevance for entry in store.iter_entries()}


def test_closing_an_iterator_early_closes_its_async_generator_on_the_loop(
    store, monkeypatch: pytest.MonkeyPatch
):
    closed_in: list[str] = []
    original = SqlMemoryStore.iter_entries

    async def observed(
        self: SqlMemoryStore, batch_size: int = 1_000, **choices: Any
    ) -> AsyncIterator[Any]:
        try:
            async for entry in original(self, batch_size, **choices):
                yield entry
        finally:
            closed_in.append(threading.current_thread().name)

    monkeypatch.setattr(SqlMemoryStore, "iter_entries", observed)
    store.store_many(fact(f"entry {i}") for i in range(5))
    entries = store.iter_entries(batch_size=2)

    next(entries)
    assert [] == closed_in
    entries.close()

    assert ["loopctl-memory-loop"] == closed_in


def test_an_iterator_left_open_is_closed_with_the_store(path):
    before = set(threading.enumerate())
    store = sync.open_store(path)
    store.store_many(fact(f"entry {i}") for i in range(5))
    entries = store.iter_entries(batch_size=2)
    next(entries)

    store.close()

    with pytest.raises(StorageError, match="closed"):
        list(entries)
    assert [] == threads_left(before)


def test_a_bad_batch_size_raises_the_async_store_error(store):
    with pytest.raises(InvalidEntryError, match="batch_size"):
        next(store.iter_entries(batch_size=0))


# --- errors ------------------------------------------------------------------------------


def test_errors_propagate_unchanged_and_the_store_stays_usable(store):
    entry = fact("kept")
    store.store(entry)

    with pytest.raises(InvalidEntryError):
        store.store(fact("bad", relevance=2.0))
    with pytest.raises(DuplicateEntryError):
        store.store(entry)
    with pytest.raises(DuplicateEntryError):
        store.store_many([fact("new"), entry])
    with pytest.raises(InvalidEntryError):
        store.retrieve("x", -1)
    with pytest.raises(InvalidEntryError):
        store.forget()
    with pytest.raises(InvalidEntryError):
        store.update(entry.id, relevance=float("nan"))
    with pytest.raises(InvalidEntryError):
        store.scope("a//b")

    assert [entry] == store.retrieve("", 10)


def test_an_error_raised_by_a_generator_given_to_store_many_stores_nothing(store):
    def entries() -> Iterator[MemoryEntry]:
        yield fact("first")
        raise KeyError("boom")

    with pytest.raises(KeyError):
        store.store_many(entries())

    assert store.is_empty()


CLOSED_OPERATIONS: dict[str, Callable[[SyncMemoryStore], object]] = {
    "store": lambda s: s.store(fact("x")),
    "store_many": lambda s: s.store_many([fact("x")]),
    "retrieve": lambda s: s.retrieve("x", 5),
    "retrieve_scored": lambda s: s.retrieve_scored("x", 5),
    "consolidate": lambda s: s.consolidate(),
    "count": lambda s: s.count(),
    "is_empty": lambda s: s.is_empty(),
    "get": lambda s: s.get(uuid.uuid4()),
    "get_by_key": lambda s: s.get_by_key("k"),
    "delete": lambda s: s.delete(uuid.uuid4()),
    "ids_with_prefix": lambda s: s.ids_with_prefix("3f"),
    "update": lambda s: s.update(uuid.uuid4(), memory="y"),
    "forget": lambda s: s.forget(everything=True),
    "scopes": lambda s: s.scopes(),
    "iter_entries": lambda s: list(s.iter_entries()),
    "summary": lambda s: s.summary(),
    "storage_bytes": lambda s: s.storage_bytes(),
    "schema_revision": lambda s: s.schema_revision(),
    "a view's count": lambda s: s.scope("a").count(),
}


@pytest.mark.parametrize("operation", CLOSED_OPERATIONS.values(), ids=CLOSED_OPERATIONS.keys())
def test_every_operation_after_close_raises_the_async_stores_storage_error(path, operation):
    store = sync.open_store(path)
    store.close()

    with pytest.raises(StorageError, match=f"^the store at {path} is closed$"):
        operation(store)


def test_calling_the_store_from_its_own_clock_raises_instead_of_deadlocking(path):
    holder: list[SyncMemoryStore] = []

    def clock() -> Any:
        return holder[0].count()  # runs on the store's own loop thread

    with sync.open_store(path, clock=clock) as store:
        holder.append(store)
        with pytest.raises(RuntimeError, match="its own event loop"):
            store.forget(older_than=timedelta(days=1))
        assert store.is_empty()


# --- lookups by key, read on the calling thread ------------------------------------------


def test_threads_find_each_key_as_soon_as_its_store_returns(store, path):
    """Eight threads upsert keys and look each one up (on the calling thread) at once."""

    def work(number: int) -> None:
        for index in range(PER_THREAD):
            key = f"k{number}-{index % 5}"
            store.store(fact(f"{marker(number)} version {index}", key=key))
            found = store.get_by_key(key)
            assert found is not None
            assert (key, f"{marker(number)} version {index}") == (found.key, found.memory)
            view = store.scope(f"thread/{number}")
            view.store(fact(f"in a scope {index}", key="scoped"))
            assert f"in a scope {index}" == view.get_by_key("scoped").memory
            assert store.get_by_key("scoped") is None  # the key of another scope

    run_in_threads(work)

    assert THREADS * (5 + 1) == store.with_descendants().count()
    assert ["ok"] == integrity_check(path)


def test_a_lookup_sees_what_another_process_stored_after_the_last_one(store, path):
    store.store(fact("mine", key="mine"))
    assert store.get_by_key("theirs") is None  # the lookup's connection is open from here on

    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from loopctl_memory import MemoryEntry, MemoryCategory, sync\n"
            "with sync.open_store(sys.argv[1]) as other:\n"
            "    other.store(MemoryEntry(MemoryCategory.FACT, 'stored by another', key='theirs'))",
            str(path),
        ],
        check=True,
        timeout=120,
    )

    found = store.get_by_key("theirs")
    assert found is not None
    assert "stored by another" == found.memory
    assert "mine" == store.get_by_key("mine").memory


def test_a_read_only_store_looks_keys_up_and_sees_later_writes(store, path):
    store.store(fact("before", key="a"))
    with sync.open_store(path, read_only=True) as reader:
        before = reader.get_by_key("a")
        store.store(fact("after", key="a"))
        after = reader.get_by_key("a")
    assert ("before", "after") == (getattr(before, "memory", None), getattr(after, "memory", None))
    assert ["ok"] == integrity_check(path)


def test_a_lookup_after_the_file_was_removed_names_it_and_nothing_is_acknowledged_after(path):
    with sync.open_store(path) as store:
        store.store(fact("kept", key="a"))
        assert store.get_by_key("a") is not None
        for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            file.unlink(missing_ok=True)

        with pytest.raises(StorageError, match=f"{path} was removed or renamed"):
            store.get_by_key("a")
        with pytest.raises(StorageError, match="acknowledges nothing more"):
            store.store(fact("lost"))


def test_an_expired_entry_is_never_found_by_its_key(path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    with sync.open_store(path, clock=lambda: now[0]) as store:
        store.store(fact("short-lived", key="a", expires_at=now[0] + timedelta(minutes=1)))
        assert store.get_by_key("a") is not None
        now[0] += timedelta(minutes=1)
        assert store.get_by_key("a") is None


def test_lookups_racing_a_close_end_with_the_closed_error(path):
    store = sync.open_store(path)
    store.store(fact("x", key="a"))
    looked = threading.Event()
    errors: list[str] = []

    def look() -> None:
        try:
            while True:
                assert store.get_by_key("a") is not None
                looked.set()
        except StorageError as exc:
            errors.append(str(exc))

    lookers = [threading.Thread(target=look) for _ in range(4)]
    for looker in lookers:
        looker.start()
    assert looked.wait(JOIN_TIMEOUT)
    store.close()
    for looker in lookers:
        looker.join(JOIN_TIMEOUT)

    assert [f"the store at {path} is closed"] * 4 == errors
    assert ["ok"] == integrity_check(path)


# --- opening and closing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "options", "error"),
    [
        ("missing/dir/memory.db", {}, StorageError),
        ("mysql://host/db", {}, StorageError),
        ("memory.db", {"no_such_option": 1}, TypeError),
        ("memory.db", {"track_access": "yes"}, InvalidEntryError),
    ],
    ids=["missing directory", "unsupported URL", "unknown option", "bad option value"],
)
def test_a_failed_open_raises_the_async_error_and_leaves_no_thread(
    tmp_path, target, options, error
):
    before = set(threading.enumerate())
    where = target if "://" in target else tmp_path / target

    with pytest.raises(error):
        sync.open_store(where, **options)

    assert [] == threads_left(before)


def test_close_from_another_thread_leaves_no_thread_behind(path):
    before = set(threading.enumerate())
    store = sync.open_store(path)
    store.store_many(fact(f"entry {i}", relevance=0.01 * i) for i in range(20))
    store.consolidate(ConsolidationConfig.full())  # its pass runs in a worker thread
    assert store.count() == sum(1 for _ in store.iter_entries(batch_size=3))

    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(JOIN_TIMEOUT)

    assert store.closed
    assert [] == threads_left(before)


def test_a_call_still_running_when_another_thread_closes_ends_with_storage_error(
    path, monkeypatch: pytest.MonkeyPatch
):
    started = threading.Event()

    async def never_ending(self: SqlMemoryStore, **choices: Any) -> int:
        started.set()
        await asyncio.Event().wait()  # never set: only the close can end it
        return 0

    monkeypatch.setattr(SqlMemoryStore, "count", never_ending)
    before = set(threading.enumerate())
    store = sync.open_store(path)
    errors: list[str] = []

    def call() -> None:
        try:
            store.count()
        except StorageError as exc:
            errors.append(str(exc))

    caller = threading.Thread(target=call)
    caller.start()
    assert started.wait(JOIN_TIMEOUT)
    store.close()
    caller.join(JOIN_TIMEOUT)

    assert [f"the store at {path} is closed"] == errors
    assert [] == threads_left(before)


def test_close_is_idempotent_from_many_threads_at_once(path):
    before = set(threading.enumerate())
    store = sync.open_store(path)
    store.store(fact("x"))

    run_in_threads(lambda _: store.close())
    store.close()

    assert store.closed
    assert [] == threads_left(before)


def test_closing_a_view_closes_the_store(path):
    before = set(threading.enumerate())
    store = sync.open_store(path)

    with store.scope("a") as view:
        view.store(fact("x"))

    assert store.closed
    with pytest.raises(StorageError):
        store.count()
    assert [] == threads_left(before)


def test_the_with_block_closes_the_store_when_it_raises(path):
    class BlockError(Exception):
        pass

    with pytest.raises(BlockError), sync.open_store(path) as store:
        raise BlockError

    assert store.closed


def test_repr_names_the_target_the_scope_and_the_state(path):
    store = sync.open_store(path)

    assert f"<SyncMemoryStore {path} (open)>" == repr(store)
    assert f"<SyncMemoryStore {path} scope 'a/b' (open)>" == repr(store.scope("a").scope("b"))
    assert f"<SyncMemoryStore {path} scope '' and below (open)>" == repr(store.with_descendants())
    store.close()
    assert f"<SyncMemoryStore {path} (closed)>" == repr(store)


def test_a_clean_run_emits_no_warning_at_all(path, recwarn: pytest.WarningsRecorder):
    with sync.open_store(path) as store:
        store.store_many(fact(f"entry {i}") for i in range(10))
        run_in_threads(lambda n: store.retrieve(f"entry {n}", 3), count=4)
        store.consolidate(ConsolidationConfig.full())
        next(store.iter_entries(batch_size=2))  # dropped unfinished, while open
    gc.collect()

    assert [] == [str(warning.message) for warning in recwarn]


# --- a store never closed ------------------------------------------------------------------


def test_an_unclosed_store_warns_once_when_collected_and_releases_its_thread(path):
    before = set(threading.enumerate())
    held = [sync.open_store(path)]
    held[0].scope("a").store(fact("x"))

    with pytest.warns(ResourceWarning) as record:
        held.clear()  # the last reference: collected at once

    assert [f"SyncMemoryStore({path}) was never closed"] == [
        str(warning.message).split(";")[0] for warning in record
    ]
    assert [] == threads_left(before)


def test_a_view_keeps_its_unclosed_store_alive(path):
    held = [sync.open_store(path).scope("a")]
    gc.collect()  # the store itself is unreferenced: it would warn here, failing the test

    held[0].store(fact("x"))
    assert 1 == held[0].count()
    with pytest.warns(ResourceWarning) as record:
        held.clear()

    assert 1 == len(record)


def test_a_store_released_on_its_own_loop_thread_still_stops(path):
    """The garbage collector may run a finaliser on any thread, the loop's own included."""
    before = set(threading.enumerate())
    store = sync.open_store(path)
    runner = store._runner

    runner.loop.call_soon_threadsafe(runner.abandon, store._store)
    runner.thread.join(JOIN_TIMEOUT)

    assert store.closed
    assert [] == threads_left(before)
