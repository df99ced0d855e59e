"""``make demo`` runs the main job end to end, in a directory it is given."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from loopctl_memory import MemoryCategory, MemoryEntry, demo, sync

from .conftest import stored_entries


def run_demo(directory: Path) -> str:
    output = io.StringIO()
    demo.main(directory, console=Console(file=output, width=120))
    return output.getvalue()


def test_the_demo_runs_to_the_end_and_leaves_its_database(tmp_path):
    output = run_demo(tmp_path / "demo")
    database = tmp_path / "demo" / "memory.db"
    assert f"database: {database}" in output
    assert "entries are still there" in output
    assert "done in" in output
    kept = stored_entries(database)
    shipped = demo.demo_memories()
    assert [e for e in shipped if e.relevance >= 0.05] == kept
    assert len(kept) < len(shipped)  # consolidation pruned the stale working notes


def test_the_demo_empties_its_database_on_every_run_through_the_store(tmp_path):
    """An earlier run's database is emptied by SQLite's own deletes, never by removing its
    files: another process (a server started on it) may have them open."""
    run_demo(tmp_path)
    database = tmp_path / "memory.db"
    inode = database.stat().st_ino
    with sync.open_store(database) as store:
        store.scope("elsewhere").store(MemoryEntry(MemoryCategory.FACT, "left by hand"))
    output = run_demo(tmp_path)
    assert "emptied the database of an earlier run" in output
    assert "stored 40 memories" in output
    assert inode == database.stat().st_ino
    with sync.open_store(database) as store:
        assert [] == store.with_descendants().retrieve("left by hand", 5, ranking="bm25")
        assert 0 == store.scope("elsewhere").count()


def test_the_demo_data_ships_inside_the_package_and_covers_every_category():
    memories = demo.demo_memories()
    assert 30 <= len(memories) <= 50
    assert set(MemoryCategory) == {entry.category for entry in memories}
    assert len(memories) == len({entry.id for entry in memories})


def test_the_demo_ranks_by_bm25_the_best_ranking_of_a_store_without_an_embedder(tmp_path):
    output = run_demo(tmp_path)
    assert "search 'database is locked', best 3 by bm25:" in output
    with sync.open_store(tmp_path / "memory.db") as store:
        [best, *_] = store.retrieve("database is locked", 3, ranking="bm25")
        assert best.memory.startswith("`database is locked`")
        assert store.short_id(best.id) in output.split("search 'flaky pytest'")[0]
