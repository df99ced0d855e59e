"""``history``: what happened to a memory, or the newest events; ``export --history``."""

from __future__ import annotations

import json
from typing import Any

from loopctl_memory import MemoryCategory, MemoryEntry

from .conftest import assert_fails, store_entries


def _events(on_db, *args: str) -> list[dict[str, Any]]:
    result = on_db("history", *args, "--json")
    assert 0 == result.exit_code, result.output
    events: list[dict[str, Any]] = json.loads(result.stdout)
    return events


def test_history_of_a_memory_shows_each_change_and_its_removal(on_db, db):
    entry = MemoryEntry(MemoryCategory.FACT, "the cache lives in redis")
    store_entries(db, [entry])
    short = entry.id.hex[:8]
    assert 0 == on_db("update", short, "--text", "the cache lives in valkey").exit_code
    shown = _events(on_db, short)
    assert ["stored", "updated"] == [event["event"] for event in shown]
    assert {
        "changed": {"memory": ["the cache lives in redis", "the cache lives in valkey"]}
    } == shown[1]["details"]
    table = on_db("history", short)
    assert "updated" in table.stdout
    assert "valkey" in table.stdout
    assert 0 == on_db("delete", short).exit_code
    # Gone: its full id still finds it, a short id no longer does.
    assert ["stored", "updated", "deleted"] == [e["event"] for e in _events(on_db, str(entry.id))]
    assert "memory" not in _events(on_db, str(entry.id))[-1]  # what is deleted is gone
    assert [] == _events(on_db, short)


def test_history_without_an_id_shows_the_newest_events_of_the_scope(on_db, db):
    store_entries(db, [MemoryEntry(MemoryCategory.FACT, f"note {n}") for n in range(3)])
    assert 0 == on_db("--scope", "acme", "add", "--category", "fact", "in acme").exit_code
    newest = _events(on_db, "--limit", "2")
    assert 2 == len(newest)
    assert newest[0]["at"] >= newest[1]["at"]
    assert 3 == len(_events(on_db, "--event", "stored"))
    assert 4 == len(_events(on_db, "--descendants"))
    assert ["acme"] == [event["scope"] for event in _events(on_db, "--descendants", "-n", "1")]
    assert [] == _events(on_db, "--event", "deleted")
    assert [] == _events(on_db, "--since", "2999-01-01")
    empty = on_db("history", "--event", "pruned")
    assert "No events" in empty.stderr


def test_history_refuses_an_unknown_event_and_a_bad_time(on_db, db):
    store_entries(db, [MemoryEntry(MemoryCategory.FACT, "x")])
    assert_fails(on_db("history", "--event", "written"), 2, "written")
    assert_fails(on_db("history", "--since", "last week"), 2, "last week")


def test_export_with_history_writes_each_memorys_events_and_import_takes_it(on_db, db, tmp_path):
    entry = MemoryEntry(MemoryCategory.FACT, "exported with its events")
    store_entries(db, [entry])
    assert 0 == on_db("update", entry.id.hex[:8], "--relevance", "0.5").exit_code
    exported = on_db("export", "--history")
    (line,) = exported.stdout.splitlines()
    assert ["stored", "updated"] == [event["event"] for event in json.loads(line)["history"]]
    assert "history" not in on_db("export").stdout
    copy = tmp_path / "copy.jsonl"
    copy.write_text(exported.stdout)
    other = tmp_path / "other.db"
    assert 0 == on_db("--db", str(other), "import", str(copy)).exit_code
    again = on_db("--db", str(other), "history", str(entry.id), "--json")
    assert ["stored"] == [event["event"] for event in json.loads(again.stdout)]
