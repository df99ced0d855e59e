"""Each memory's history on every SQL backend, view and the blocking store.

Every event a write records, in the write's transaction (a write that fails
records nothing), found by the memory's id while it lives and after it is
gone; the reads' arguments; retention. The store's clock is a variable of the
test, so nothing sleeps. The reference port keeps no history: it is left out.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from loopctl_memory import (
    ConsolidationConfig,
    DuplicateEntryError,
    HistoryEvent,
    InvalidArgumentError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    open_store,
)
from loopctl_memory.history import EVENTS, describe
from loopctl_memory.jsonl import export_jsonl, import_jsonl
from tests.conftest import BACKENDS
from tests.embedders import WordsEmbedder
from tests.sync_adapter import AsyncOverSync

START = datetime(2026, 6, 1, 12, tzinfo=UTC)


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **by: float) -> None:
        self.now += timedelta(**by)


@pytest.fixture(params=[backend for backend in BACKENDS if backend != "reference"])
def backend(request: pytest.FixtureRequest) -> str:
    """The SQL backends: the reference port (the oracle) keeps no history."""
    return str(request.param)


@pytest.fixture
def sql_factory(store_factory):
    return store_factory


def _entry(text: str, **fields: object) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text, **fields)  # type: ignore[arg-type]


def _kinds(events: list[HistoryEvent]) -> list[str]:
    return [event.event for event in events]


async def test_a_memory_is_stored_updated_and_deleted_each_at_its_time(sql_factory):
    clock = Clock()
    store = await sql_factory(clock=clock)
    entry = _entry("deploys go through blue green", tags=["deploy"])
    await store.store(entry)
    clock.tick(minutes=5)
    await store.update(entry.id, memory="deploys go through canary", relevance=0.5, tags=["ops"])
    clock.tick(minutes=5)
    await store.update(entry.id, relevance=0.5)  # changes nothing: records nothing
    assert await store.delete(entry.id)

    stored, updated, deleted = await store.history(entry.id)
    assert (stored.event, stored.at, stored.cause) == ("stored", START, "store")
    assert (updated.event, updated.at) == ("updated", START + timedelta(minutes=5))
    assert {
        "memory": ["deploys go through blue green", "deploys go through canary"],
        "relevance": [1.0, 0.5],
        "tags": [["deploy"], ["ops"]],
    } == updated.details["changed"]
    assert (deleted.event, deleted.at, deleted.cause) == (
        "deleted",
        START + timedelta(minutes=10),
        "delete",
    )
    assert deleted.removed
    assert not updated.removed
    assert 0.5 == deleted.relevance
    assert "canary" not in str(deleted.to_dict())  # what is deleted is gone
    assert {entry.id} == {event.entry_id for event in (stored, updated, deleted)}
    assert {""} == {event.scope for event in (stored, updated, deleted)}


async def test_a_write_that_fails_records_nothing(sql_factory):
    store = await sql_factory()
    kept = _entry("kept")
    await store.store(kept)
    with pytest.raises(DuplicateEntryError):
        await store.store_many([_entry("new"), kept])
    with pytest.raises(DuplicateEntryError):
        await store.store(kept)
    assert ["stored"] == _kinds(await store.history())
    assert 1 == await store.count()


async def test_a_key_replaces_and_deletes_with_the_reason(sql_factory):
    store = await sql_factory()
    first = _entry("ann likes tea", key="prefs/ann")
    second = _entry("ann likes coffee", key="prefs/ann")
    await store.store(first)
    await store.store_many([second])
    assert ["stored", "replaced"] == _kinds(await store.history(first.id))
    replaced = (await store.history(first.id))[-1]
    assert {"by": str(second.id)} == replaced.details
    assert "tea" not in str(replaced.to_dict())
    assert await store.delete_by_key("prefs/ann")
    gone = (await store.history(second.id))[-1]
    assert ("deleted", {"key": "prefs/ann"}) == (gone.event, gone.details)
    assert "by key 'prefs/ann'" in describe(gone)


async def test_retrievals_count_once_a_day_when_access_is_tracked(sql_factory):
    clock = Clock()
    store = await sql_factory(clock=clock, track_access=True)
    hit, miss = _entry("redis holds the cache"), _entry("postgres holds the rows")
    await store.store_many([hit, miss])
    for ranking in ("reference", "bm25", "bm25"):
        await store.retrieve("cache", 5, ranking=ranking)
    clock.tick(days=1)
    await store.retrieve("cache", 5, ranking="bm25")
    accessed = [event for event in await store.history(hit.id) if event.event == "accessed"]
    assert [(START, 3), (START + timedelta(days=1), 1)] == [(e.at, e.count) for e in accessed]
    assert ["stored"] == _kinds(await store.history(miss.id))


async def test_retrievals_record_nothing_without_track_access(sql_factory):
    store = await sql_factory()
    entry = _entry("redis holds the cache")
    await store.store(entry)
    await store.retrieve("cache", 5, ranking="bm25")
    assert ["stored"] == _kinds(await store.history(entry.id))


async def test_a_consolidation_records_merges_and_prunes_and_moves_histories(sql_factory):
    clock = Clock()
    store = await sql_factory(clock=clock)
    weak = _entry("deploy uses blue green switch", relevance=0.2)
    await store.store(weak)
    clock.tick(minutes=1)
    strong = _entry("deploy uses blue green switch now", relevance=0.9, validated=True)
    faint = _entry("an old note nobody reads", relevance=0.01)
    await store.store_many([strong, faint])
    clock.tick(minutes=1)
    await store.update(weak.id, tags=["deploy"])
    await store.consolidate(ConsolidationConfig(merge=True))

    assert await store.get(strong.id) is not None
    assert await store.get(weak.id) is None
    # The merged memory stands where `weak` stood: each history stays its memory's.
    assert ["stored", "absorbed"] == _kinds(await store.history(strong.id))
    absorbed = (await store.history(strong.id))[-1]
    assert {"merged": [str(weak.id)]} == absorbed.details
    assert START + timedelta(minutes=1) == (await store.history(strong.id))[0].at
    assert ["stored", "updated", "merged"] == _kinds(await store.history(weak.id))
    merged = (await store.history(weak.id))[-1]
    assert ({"into": str(strong.id)}, 0.2) == (merged.details, merged.relevance)
    pruned = (await store.history(faint.id))[-1]
    assert ("pruned", 0.01, "consolidate") == (pruned.event, pruned.relevance, pruned.cause)


async def test_the_reference_consolidation_records_each_prune(sql_factory):
    store = await sql_factory()
    faint = _entry("faint", relevance=0.01)
    await store.store_many([faint, _entry("strong")])
    await store.consolidate()
    assert ["stored", "pruned"] == _kinds(await store.history(faint.id))


async def test_forget_records_its_rule_and_expiry_its_sweep(sql_factory):
    clock = Clock()
    store = await sql_factory(clock=clock)
    old = _entry("an old error", tags=["ci"])
    soon = _entry("a token", expires_at=START + timedelta(hours=1))
    await store.store_many([old, soon])
    assert 1 == await store.forget(category="fact", filter=MemoryFilter(tags_any=["ci"]))
    clock.tick(hours=2)
    assert 1 == await store.sweep_expired()
    forgotten = (await store.history(old.id))[-1]
    assert "forgotten" == forgotten.event
    assert {"category": "fact", "filter": {"tags_any": ["ci"]}} == forgotten.details["rule"]
    expired = (await store.history(soon.id))[-1]
    assert ("expired", START + timedelta(hours=2)) == (expired.event, expired.at)


async def test_reembed_records_each_new_vector(sql_factory):
    store = await sql_factory(embedder=WordsEmbedder(dims=16))
    entry = _entry("vectors by a new model")
    await store.store(entry)
    await store.reembed(WordsEmbedder(dims=16, name="fake:other"))  # every scope's
    reembedded = (await store.history(entry.id))[-1]
    assert ("reembedded", {"embedder": "fake:other"}) == (reembedded.event, reembedded.details)


async def test_the_reads_narrow_by_filter_time_kind_and_count(sql_factory):
    clock = Clock()
    store = await sql_factory(clock=clock)
    ci, docs = _entry("ci is flaky", tags=["ci"]), _entry("docs are stale")
    await store.store_many([ci, docs])
    clock.tick(hours=1)
    await store.update(ci.id, relevance=0.4)
    await store.update(docs.id, relevance=0.3)

    everything = await store.history()
    assert ["stored", "stored", "updated", "updated"] == _kinds(everything)
    assert everything[::-1] == await store.history(newest_first=True)
    assert everything[:3] == await store.history(limit=3)
    assert everything[2:] == await store.history(since=START + timedelta(hours=1))
    assert everything[2:] == await store.history(since=timedelta(minutes=30))
    assert everything[2:] == await store.history(events=["updated"])
    assert [everything[0], everything[2]] == await store.history(
        filter=MemoryFilter(tags_any=["ci"])
    )
    assert [everything[3]] == await store.history(docs.id, events="updated")
    assert {"entry_id", "event", "at", "scope", "cause"} <= set(HistoryEvent.__slots__)


@pytest.mark.parametrize(
    "arguments",
    [
        {"events": ["written"]},
        {"events": []},
        {"limit": 0},
        {"limit": True},
        {"since": datetime(2026, 1, 1)},
        {"since": timedelta(days=-1)},
        {"since": "yesterday"},
        {"newest_first": "yes"},
        {"filter": "tags"},
    ],
)
async def test_bad_arguments_are_refused(sql_factory, arguments):
    store = await sql_factory()
    with pytest.raises(InvalidArgumentError):
        await store.history(**arguments)


async def test_an_unknown_id_has_no_history(sql_factory):
    store = await sql_factory()
    await store.store(_entry("one"))
    assert [] == await store.history(_entry("never stored").id)


async def test_a_view_reads_the_events_of_its_own_scopes_only(sql_factory, backend):
    store = await sql_factory()
    entry = _entry("mine")
    await store.store(entry)
    await store.scope("below").store(_entry("a child's"))
    assert [entry.id] == [event.entry_id for event in await store.history()]
    below = [event.scope for event in await store.with_descendants().history()]
    # A view of team/agent: its test's child scope "sub" holds entries of its own.
    assert ["", "below"] == [scope for scope in below if scope != "sub"]
    assert ("sub" in below) == ("@scope" in backend)


async def test_consolidation_deletes_events_older_than_kept(sql_factory):
    clock = Clock()
    store = await sql_factory(clock=clock, keep_history=timedelta(days=30))
    entry = _entry("kept a while")
    await store.store(entry)
    clock.tick(days=31)
    await store.update(entry.id, relevance=0.5)
    await store.consolidate()
    assert ["updated"] == _kinds(await store.history(entry.id))


async def test_a_store_opened_without_history_records_none(sql_factory):
    store = await sql_factory(history=False, track_access=True)
    entry = _entry("unrecorded cache")
    await store.store(entry)
    await store.update(entry.id, relevance=0.5)
    await store.retrieve("cache", 5, ranking="bm25")
    await store.delete(entry.id)
    assert [] == await store.history()


@pytest.mark.parametrize("value", [timedelta(0), 30, "90d"])
async def test_keep_history_must_be_a_positive_timedelta(sql_factory, value):
    with pytest.raises(InvalidArgumentError, match="keep_history"):
        await sql_factory(keep_history=value)


async def test_an_export_with_history_holds_each_memorys_events_and_imports(sql_factory):
    store = await sql_factory()
    entry = _entry("exported with its past")
    await store.store(entry)
    await store.update(entry.id, relevance=0.5)
    written = io.BytesIO()
    if isinstance(store, AsyncOverSync):
        store.sync.export_jsonl(written, history=True)
    else:
        await export_jsonl(store, written, history=True)
    (line,) = written.getvalue().splitlines()
    assert ["stored", "updated"] == [event["event"] for event in json.loads(line)["history"]]
    assert [entry.id] == list(await store.history_of([entry.id, _entry("absent").id]))

    async with open_store(":memory:") as again:
        assert 1 == (await import_jsonl(again, io.BytesIO(written.getvalue()))).entries
        assert (await again.get(entry.id)) == (await store.get(entry.id))
        assert ["stored"] == _kinds(await again.history(entry.id))


def test_every_event_has_a_description():
    for kind in EVENTS:
        event = HistoryEvent(_entry("x").id, kind, START, count=1, relevance=0.5)
        assert isinstance(describe(event), str)
