"""Importing again: ``on_duplicate="skip"`` stores what is new, ``"fail"`` names the clash.

Through the library (SQLite in memory and in a file, a scoped view, PostgreSQL
when one is configured) and through ``loopctl-memory import --on-duplicate``.
The last tests SIGKILL a child process part way through an import of a large
file, at points chosen by the work itself as ``test_kill_during_work`` does (the
child is this file, run as a script, with ``kill_worker``'s SQLite progress
handler), then import the same file again with ``--on-duplicate skip``: the
result must export byte for byte as one clean import does, and the child must
leave no scratch file behind.
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import event
from sqlalchemy.pool import Pool

from loopctl_memory import (
    DuplicateEntryError,
    InMemoryStore,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    open_store,
)
from loopctl_memory.cli import DB_ENVVAR, PROG, SCOPE_ENVVAR, cli
from loopctl_memory.entry_json import entry_to_json
from loopctl_memory.jsonl import SKIP_ATTEMPTS, ImportFailedError, export_jsonl, import_jsonl
from tests.conftest import NEEDS_POSTGRES, SCOPED
from tests.reliability import kill_worker
from tests.reliability.test_kill_during_work import (
    CHILD_TIMEOUT,
    ROOT,
    Kill,
    _check_integrity,
    _in_parallel,
    _kill_points,
)

BACKENDS = [
    "sqlite-memory",
    "sqlite-file",
    pytest.param("postgresql", marks=NEEDS_POSTGRES),
    "sqlite-file" + SCOPED,
]

_BASE = datetime(2026, 2, 1, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The stores an import goes into (overrides the contract suite's list)."""
    return str(request.param)


@pytest.fixture(autouse=True)
def no_database_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    monkeypatch.delenv(SCOPE_ENVVAR, raising=False)


def entry(number: int, text: str | None = None) -> MemoryEntry:
    """Entry ``number``, always the same: its id, time and (zero to two) tags follow from it."""
    return MemoryEntry(
        MemoryCategory.FACT,
        f"memory {number}" if text is None else text,
        tags=[f"t{number}", "shared"][: number % 3],
        relevance=(number % 10) / 10,
        id=uuid.UUID(int=number + 1),
        created_at=_BASE + timedelta(seconds=number),
    )


def jsonl(entries: Sequence[MemoryEntry | None]) -> bytes:
    """One line each; None is a blank line."""
    return b"".join(b"\n" if e is None else entry_to_json(e).encode() + b"\n" for e in entries)


async def contents(store: SqlMemoryStore) -> list[MemoryEntry]:
    return [stored async for stored in store.iter_entries()]


async def exported(store: SqlMemoryStore) -> bytes:
    stream = io.BytesIO()
    await export_jsonl(store, stream)
    return stream.getvalue()


def sql(store: object) -> SqlMemoryStore:
    assert isinstance(store, SqlMemoryStore)
    return store


# --- skip, through the library ----------------------------------------------------------


async def test_the_same_file_again_with_skip_imports_nothing_and_skips_every_line(store):
    store = sql(store)
    data = jsonl([entry(n) for n in range(10)])
    first = await import_jsonl(store, io.BytesIO(data), batch_size=4)
    before = await exported(store)
    again = await import_jsonl(store, io.BytesIO(data), batch_size=4, on_duplicate="skip")
    assert (10, 0, 3) == (first.entries, first.skipped, first.batches)
    assert (0, 10, 0) == (again.entries, again.skipped, again.batches)
    assert before == await exported(store)
    assert data == before


async def test_an_overlapping_file_with_skip_stores_the_union_new_entries_in_file_order(store):
    store = sql(store)
    old = [entry(n) for n in range(10)]
    new = [entry(n) for n in range(10, 20)]
    await import_jsonl(store, io.BytesIO(jsonl(old)), batch_size=4)
    # Old and new entries alternate, from the end of the old ones: each batch has both.
    mixed = [e for pair in zip(reversed(old), new, strict=True) for e in pair]
    report = await import_jsonl(store, io.BytesIO(jsonl(mixed)), batch_size=3, on_duplicate="skip")
    assert (10, 10) == (report.entries, report.skipped)
    union = old + new
    assert union == await contents(store)
    reference = InMemoryStore(union)
    for query in ("t13 shared", "memory 17", "t11", ""):  # the indexes saw the right tags too
        assert await reference.retrieve(query, 5) == await store.retrieve(query, 5)


async def test_a_repeated_id_within_a_file_is_stored_once_as_first_written(store):
    store = sql(store)
    first, second, third = entry(1), entry(2), entry(3)
    again = entry(1, "the same id, other text")
    # In one batch (lines 1-4) and in the next one (line 6).
    data = jsonl([first, second, again, None, third, again])
    report = await import_jsonl(store, io.BytesIO(data), batch_size=3, on_duplicate="skip")
    assert (3, 2) == (report.entries, report.skipped)
    assert [first, second, third] == await contents(store)


async def test_skip_counts_progress_for_every_batch_even_one_wholly_skipped(store):
    store = sql(store)
    await store.store_many([entry(n) for n in range(4)])
    data = jsonl([entry(n) for n in range(6)])
    progress: list[tuple[int, int]] = []
    report = await import_jsonl(
        store,
        io.BytesIO(data),
        batch_size=2,
        on_duplicate="skip",
        on_progress=lambda stored, read: progress.append((stored, read)),
    )
    assert (2, 4, 1) == (report.entries, report.skipped, report.batches)
    assert [0, 0, 2] == [stored for stored, _ in progress]
    assert len(data) == sum(read for _, read in progress)


async def test_a_writer_storing_an_id_between_the_read_and_the_write_is_skipped_too(
    store, monkeypatch
):
    """The batch is refused once, read again and stored without the entry taken meanwhile."""
    store = sql(store)
    lines = [entry(n) for n in range(6)]
    read = store.existing_ids
    reads = 0

    async def racing(ids):
        nonlocal reads
        reads += 1
        found = await read(ids)
        if reads == 1:
            await store.store(entry(4, "stored by another writer"))
        return found

    monkeypatch.setattr(store, "existing_ids", racing)
    report = await import_jsonl(store, io.BytesIO(jsonl(lines)), on_duplicate="skip")
    assert (5, 1, 2) == (report.entries, report.skipped, reads)
    assert ["stored by another writer", *(f"memory {n}" for n in (0, 1, 2, 3, 5))] == [
        e.memory for e in await contents(store)
    ]


async def test_a_writer_that_keeps_storing_the_ids_makes_the_import_fail_not_loop(
    store, monkeypatch
):
    store = sql(store)
    read = store.existing_ids
    raced: list[uuid.UUID] = []

    async def racing(ids):
        found = await read(ids)
        if len(raced) < 10:
            raced.append(entry(len(raced)).id)
            await store.store(entry(len(raced) - 1, "stored by another writer"))
        return found

    monkeypatch.setattr(store, "existing_ids", racing)
    with pytest.raises(ImportFailedError) as caught:
        await import_jsonl(
            store, io.BytesIO(jsonl([entry(n) for n in range(12)])), on_duplicate="skip"
        )
    assert SKIP_ATTEMPTS <= len(raced) <= SKIP_ATTEMPTS + 1  # the tries, and naming the clash
    assert isinstance(caught.value.__cause__, DuplicateEntryError)
    assert caught.value.duplicate_id in raced
    assert (0, 0) == (caught.value.imported, caught.value.skipped)
    assert len(raced) == await store.count()


async def test_existing_ids_finds_ids_in_any_scope_among_many(tmp_path):
    async with open_store(tmp_path / "memory.db") as root:
        here, elsewhere = entry(1), entry(2)
        await root.scope("team").store(here)
        await root.scope("other/deep").store(elsewhere)
        view = root.scope("team")
        asked = [uuid.uuid4() for _ in range(25_000)]  # more than one statement's worth
        asked[3], asked[24_999] = elsewhere.id, here.id
        assert {here.id, elsewhere.id} == await view.existing_ids(asked)
        assert set() == await view.existing_ids([])
        assert None is await view.get(elsewhere.id)  # a read of the view does not see it
        with pytest.raises(InvalidEntryError):
            await view.existing_ids([str(here.id)])  # type: ignore[list-item]


async def test_skip_into_a_scope_skips_an_id_stored_in_another_scope(tmp_path):
    async with open_store(tmp_path / "memory.db") as root:
        await root.scope("other").store(entry(1))
        team = root.scope("team")
        report = await import_jsonl(
            team, io.BytesIO(jsonl([entry(0), entry(1), entry(2)])), on_duplicate="skip"
        )
        assert (2, 1) == (report.entries, report.skipped)
        assert [entry(0), entry(2)] == await contents(team)
        with pytest.raises(ImportFailedError, match=f"line 2: an entry with id {entry(1).id}"):
            await import_jsonl(root.scope("third"), io.BytesIO(jsonl([entry(3), entry(1)])))


@pytest.mark.parametrize("bad", ["Skip", "ignore", "", None, True])
async def test_on_duplicate_is_fail_or_skip(bad):
    async with open_store(":memory:") as store:
        with pytest.raises(InvalidEntryError, match="on_duplicate must be 'fail' or 'skip'"):
            await import_jsonl(store, io.BytesIO(jsonl([entry(1)])), on_duplicate=bad)
        assert 0 == await store.count()


# --- fail, through the library ----------------------------------------------------------


async def test_fail_names_the_first_stored_id_and_its_line_number(store):
    store = sql(store)
    taken = entry(9)
    await store.store(taken)
    # Blank lines 3 and 5 make line numbers and places in the batch differ.
    data = jsonl([entry(1), entry(2), None, entry(3), None, taken, entry(4)])
    with pytest.raises(ImportFailedError) as caught:
        await import_jsonl(store, io.BytesIO(data), batch_size=2)
    error = caught.value
    assert ((3, 6), 3, 2, 0) == (error.lines, error.resume_line, error.imported, error.skipped)
    assert (6, taken.id) == (error.duplicate_line, error.duplicate_id)
    assert isinstance(error.__cause__, DuplicateEntryError)
    assert (
        f"lines 3-6: line 6: an entry with id {taken.id} is already stored; "
        "the 2 entries before line 3 were imported, none from it on"
    ) == str(error)
    assert [taken, entry(1), entry(2)] == await contents(store)


async def test_fail_names_an_id_repeated_within_a_batch_and_both_its_lines(store):
    store = sql(store)
    data = jsonl([entry(1), None, entry(2), entry(1, "again")])
    with pytest.raises(ImportFailedError) as caught:
        await import_jsonl(store, io.BytesIO(data))
    error = caught.value
    assert (4, entry(1).id) == (error.duplicate_line, error.duplicate_id)
    assert str(error).startswith(
        f"lines 1-4: line 4: id {entry(1).id} is already on line 1 (the same id twice); "
        "nothing was imported"
    )
    assert [] == await contents(store)


async def test_fail_after_skipped_lines_counts_them(store):
    """With skip, a bad line later on reports what was stored and what was skipped."""
    store = sql(store)
    await store.store_many([entry(0), entry(1)])
    data = jsonl([entry(0), entry(1), entry(2), entry(3)]) + b"{not json\n"
    with pytest.raises(ImportFailedError) as caught:
        await import_jsonl(store, io.BytesIO(data), batch_size=2, on_duplicate="skip")
    error = caught.value
    assert (5, 5, 2, 2) == (error.lines, error.resume_line, error.imported, error.skipped)
    assert str(error).endswith(
        "the 2 entries before line 5 were imported (2 more were already stored), none from it on"
    )


# --- the command line -------------------------------------------------------------------


def run_cli(*args: object, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args], input=stdin)


def cli_export(database: Path) -> bytes:
    result = run_cli("--db", database, "export")
    assert 0 == result.exit_code, result.output
    return result.stdout_bytes


def one_error_line(result: Result) -> str:
    assert 1 == result.exit_code, result.output
    assert "Traceback" not in result.output
    [line] = result.stderr.splitlines()
    return line


def test_cli_import_again_with_skip_says_everything_was_skipped(tmp_path):
    source, database = tmp_path / "in.jsonl", tmp_path / "memory.db"
    source.write_bytes(jsonl([entry(n) for n in range(5)]))
    assert 0 == run_cli("--db", database, "import", source).exit_code
    again = run_cli("--db", database, "import", "--on-duplicate", "skip", source)
    assert 0 == again.exit_code, again.output
    assert f"Imported 0 entries from {source}, skipped 5 already stored\n" == again.stdout
    assert source.read_bytes() == cli_export(database)


def test_cli_overlapping_input_with_skip_stores_the_union(tmp_path):
    database = tmp_path / "memory.db"
    old, new = [entry(n) for n in range(6)], [entry(n) for n in range(6, 10)]
    first = run_cli("--db", database, "import", "-", stdin=jsonl(old))
    assert "Imported 6 entries from standard input\n" == first.stdout
    overlap = old[3:] + new
    result = run_cli(
        "--db", database, "import", "--on-duplicate", "skip", "--batch-size", "2", "-",
        stdin=jsonl(overlap),
    )  # fmt: skip
    assert "Imported 4 entries from standard input, skipped 3 already stored\n" == result.stdout
    assert jsonl(old + new) == cli_export(database)


def test_cli_fail_names_the_id_and_the_line_and_advises_skip(tmp_path):
    source, database = tmp_path / "in.jsonl", tmp_path / "memory.db"
    source.write_bytes(jsonl([entry(1), entry(2), entry(3)]))
    assert 0 == run_cli("--db", database, "import", "-", stdin=jsonl([entry(2)])).exit_code
    line = one_error_line(run_cli("--db", database, "import", source))
    assert (
        f"Error: {source} lines 1-3: line 2: an entry with id {entry(2).id} is already stored; "
        "nothing was imported: to skip the lines whose id is already stored, "
        "import it again with --on-duplicate skip"
    ) == line
    assert jsonl([entry(2)]) == cli_export(database)


def test_cli_skip_then_a_bad_line_advises_importing_again_with_skip(tmp_path):
    source, database = tmp_path / "in.jsonl", tmp_path / "memory.db"
    source.write_bytes(jsonl([entry(1), entry(2)]) + b"[]\n")
    line = one_error_line(
        run_cli("--db", database, "import", "--batch-size", "1", "--on-duplicate", "skip", source)
    )
    assert line.startswith(f"Error: {source} line 3: expected a JSON object")
    assert line.endswith(
        "the 2 entries before line 3 were imported, none from it on: "
        "fix the input and import it again with --on-duplicate skip"
    )


def test_cli_on_duplicate_takes_only_fail_or_skip(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(jsonl([entry(1)]))
    result = run_cli("--db", tmp_path / "memory.db", "import", "--on-duplicate", "merge", source)
    assert 2 == result.exit_code
    assert "'merge' is not one of 'fail', 'skip'" in result.stderr


def test_cli_import_help_shows_the_option_and_an_example():
    result = run_cli("import", "--help")
    assert "--on-duplicate [fail|skip]" in result.stdout
    assert f"{PROG} import --on-duplicate skip memories.jsonl" in result.stdout


# --- killed part way, then imported again -------------------------------------------------

KILL_BATCH = 250
"""Lines a transaction in the killed import: twelve batches of the 3,000 entries."""
CACHE_PAGES = 8  # spills uncommitted pages into the WAL in the middle of a batch
DATABASE_FILES = {"memory.db", "memory.db-wal", "memory.db-shm"}


def _import_child(argv: list[str]) -> None:
    """The child: ``DB FILE ON_DUPLICATE PAUSE_AT``, the import command with kill_worker's probe.

    Prints ``armed``, runs ``loopctl-memory import`` in this process (pausing
    inside SQLite at progress callback PAUSE_AT), then ``done <callbacks>``,
    and waits to be killed.
    """
    database, source, on_duplicate, pause_at = argv
    event.listen(Pool, "connect", kill_worker._on_connect)
    event.listen(Pool, "checkout", kill_worker._on_checkout)
    probe = kill_worker._probe
    probe.pause_at, probe.cache_pages = int(pause_at), CACHE_PAGES
    probe.armed = True
    kill_worker._say("armed")
    arguments = ["--db", database, "import", "--batch-size", str(KILL_BATCH), source]
    cli.main([*arguments, "--on-duplicate", on_duplicate], PROG, standalone_mode=False)
    probe.armed = False
    kill_worker._say(f"done {probe.calls}")
    threading.Event().wait()


def _kill_import(
    database: Path, source: Path, scratch: Path, on_duplicate: str, pause_at: int
) -> Kill:
    """Run the child with TMPDIR=``scratch``; SIGKILL it once it pauses or is done."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0", "TMPDIR": str(scratch)}
    env.pop(DB_ENVVAR, None)
    env.pop(SCOPE_ENVVAR, None)
    command = [sys.executable, __file__, str(database), str(source), on_duplicate, str(pause_at)]
    said: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as child:
        watchdog = threading.Timer(CHILD_TIMEOUT, child.kill)
        watchdog.start()
        try:
            assert child.stdout is not None
            while line := child.stdout.readline():  # the command's own output is skipped
                said.append(line)
                if line.split()[:1] in (["paused"], ["done"]):
                    break
        finally:
            child.send_signal(signal.SIGKILL)
            _, stderr = child.communicate()
            watchdog.cancel()
    assert -signal.SIGKILL == child.returncode, stderr
    assert said[:1] == ["armed\n"], f"the child failed before starting:\n{stderr}"
    words = said[-1].split()
    if words[0] == "paused":
        return Kill("paused", calls=int(words[1]), in_transaction=words[2] == "intx=1")
    assert "done" == words[0], f"unexpected child output {said!r}:\n{stderr}"
    return Kill("done", calls=int(words[1]))


def _stored_count(database: Path) -> int:
    """The entries stored; 0 in a file killed before its tables were created."""
    raw = sqlite3.connect(database)
    try:
        if not raw.execute("SELECT 1 FROM sqlite_master WHERE name = 'entries'").fetchone():
            return 0
        (count,) = raw.execute("SELECT count(*) FROM entries").fetchone()
    finally:
        raw.close()
    return int(count)


@pytest.fixture(scope="module")
def large_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """kill_worker's 3,000 entries as a file, and what one clean import of it exports."""
    folder = tmp_path_factory.mktemp("large")
    source = folder / "large.jsonl"
    source.write_bytes(jsonl(kill_worker.expected_entries()))
    clean = folder / "clean.db"
    result = run_cli("--db", clean, "import", "--batch-size", KILL_BATCH, source)
    assert f"Imported 3000 entries from {source}\n" == result.stdout
    return source, cli_export(clean)


def test_one_clean_import_of_the_large_file_exports_the_file_itself(large_file):
    source, clean_export = large_file
    assert source.read_bytes() == clean_export


@pytest.mark.slow
@pytest.mark.parametrize("on_duplicate", ["fail", "skip"])
def test_a_killed_import_then_import_with_skip_exports_as_one_clean_import(
    on_duplicate, large_file, tmp_path
):
    source, clean_export = large_file

    def kill_at(point: int) -> Kill:
        folder = tmp_path / f"at-{point}"
        (folder / "tmp").mkdir(parents=True)
        return _kill_import(folder / "memory.db", source, folder / "tmp", on_duplicate, point)

    done = kill_at(0)
    assert "done" == done.kind
    assert 3000 == _stored_count(tmp_path / "at-0" / "memory.db")
    assert done.calls is not None
    points = _kill_points(done.calls)
    assert 5 == len(points)
    part_way = 0
    outcomes: list[tuple[int, bool | None, int]] = []
    for point, kill in zip(points, _in_parallel(kill_at, points), strict=True):
        assert ("paused", point) == (kill.kind, kill.calls)
        folder = tmp_path / f"at-{point}"
        assert [] == list((folder / "tmp").iterdir()), f"scratch files left at {point}"
        left = {p.name for p in folder.iterdir()}
        if "memory.db-journal" in left:
            # Killed while creating the file, before it turns to WAL: a hot journal, which
            # the next open rolls back to an empty database.
            assert 0 == _stored_count(folder / "memory.db"), f"killed at {point}"
            left.discard("memory.db-journal")
        assert left <= {"tmp", *DATABASE_FILES}
        if not (folder / "memory.db").exists():
            continue  # killed before the database was created
        _check_integrity(folder / "memory.db")
        stored = _stored_count(folder / "memory.db")
        assert 0 == stored % KILL_BATCH, f"killed at {point}: half a batch stored"
        part_way += 0 < stored < 3000
        outcomes.append((point, kill.in_transaction, stored))
        again = run_cli("--db", folder / "memory.db", "import", "--on-duplicate", "skip", source)
        assert (
            f"Imported {3000 - stored} entries from {source}, skipped {stored} already stored\n"
        ) == again.stdout, again.output
        assert clean_export == cli_export(folder / "memory.db"), f"killed at {point}"
    assert part_way >= 2, "the kill points should fall between the first and last batch"
    print(f"import killed at (callback, in transaction, entries stored) {outcomes}")


if __name__ == "__main__":
    _import_child(sys.argv[1:])
