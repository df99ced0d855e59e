"""Revisions are frozen: they import no code of ours that may change, and do what they did.

A revision runs on databases written long before it and long after, so it carries its
own copy of any logic it needs; ``Utf8Text`` is the one exception (it promises never to
change what it stores). 0002's backfill of the token index is checked against rows
worked out by hand.
"""

# ruff: noqa: RUF001  # Greek letters are test data

from __future__ import annotations

import ast
import os
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from loopctl_memory import migrate, open_store
from loopctl_memory.sql.text import Utf8Text
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
REVISIONS = sorted((MIGRATIONS / "versions").glob("*.py"))
ALLOWED_IN_REVISIONS = {"loopctl_memory.sql.text"}
ALLOWED_IN_ENV = {"loopctl_memory.errors", "loopctl_memory.sql.tables"}


def _ours(name: str) -> bool:
    return name == "loopctl_memory" or name.startswith("loopctl_memory.")


def imports_of_ours(source: str) -> set[str]:
    """The modules of ours a module imports, anywhere in it (relative imports count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if _ours(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.add("." * node.level + (node.module or ""))
            elif node.module is not None and _ours(node.module):
                found.add(node.module)
    return found


def test_the_import_check_sees_imports_of_ours():
    source = (
        "import loopctl_memory.flat\n"
        "from loopctl_memory.sql import index\n"
        "from loopctl_memory.sql.text import Utf8Text\n"
        "import loopctl_memory_other, sqlalchemy\n"
        "def upgrade():\n"
        "    from loopctl_memory.scoring import baseline_score\n"
        "    from . import sibling\n"
    )
    assert {
        "loopctl_memory.flat",
        "loopctl_memory.sql",
        "loopctl_memory.sql.text",
        "loopctl_memory.scoring",
        ".",
    } == imports_of_ours(source)


def test_the_repository_holds_the_migrations():
    assert migrate.script_location() == MIGRATIONS
    assert (MIGRATIONS / "env.py").is_file()
    assert [f"{revision.revision}_" for revision in migrate.history()] == [
        path.name[:5] for path in REVISIONS
    ]


@pytest.mark.parametrize("path", REVISIONS, ids=lambda path: path.stem)
def test_a_revision_imports_nothing_of_ours_but_utf8text(path):
    imported = imports_of_ours(path.read_text(encoding="utf-8"))
    assert set() == imported - ALLOWED_IN_REVISIONS, "copy what the revision needs into it"


def test_env_imports_only_the_tables_and_errors_of_ours():
    """env.py is not a revision: it runs the current tables, so it may import them."""
    imported = imports_of_ours((MIGRATIONS / "env.py").read_text(encoding="utf-8"))
    assert set() == imported - ALLOWED_IN_ENV


_ENTRIES_0001 = sa.table(
    "entries",
    *(sa.column(name) for name in ("seq", "category", "relevance", "baseline_score")),
    *(sa.column(name) for name in ("created_at_us", "access_count", "validated")),
    sa.column("id", sa.Uuid()),
    sa.column("memory", Utf8Text()),
    sa.column("memory_lower", Utf8Text()),
)
_TAGS_0001 = sa.table(
    "tags",
    sa.column("entry_seq"),
    sa.column("position"),
    sa.column("tag", Utf8Text()),
    sa.column("tag_lower", Utf8Text()),
)

# seq (with gaps, as deletes leave them), category, relevance, memory, tags
ENTRIES = [
    (1, "fact", 0.0, "Cache retry CACHE", ["CI", "ci", "build"]),
    (2, "insight", 0.05, "", []),
    (4, "strategy", 0.3, "Straße\x1cΣοφία  日本語\u00a0🦀", ["Tag With Space"]),
    (5, "error_pattern", 0.7, "nul\x00byte\tcache\n\u3000retry", ["ci", "NUL\x00tag"]),
    (7, "working", 1.0, "\u2028 \x85", [""]),
    (8, "trajectory", 0.123456789, "École e\u0301cole", ["build", "ci"]),
]


def _packed(*seqs: int) -> bytes:
    return struct.pack(f"<{len(seqs)}q", *seqs)


# Worked out by hand: terms numbered in code point order, postings all in block 1.
TOKENS = [
    (1, "cache", 2),
    (2, "e\u0301cole", 1),
    (3, "nul\x00byte", 1),
    (4, "retry", 2),
    (5, "straße\x1cσοφία", 1),  # U+001C is not white space
    (6, "école", 1),
    (7, "日本語", 1),
    (8, "🦀", 1),
]
POSTINGS = [
    (1, 1, _packed(1, 5)),
    (2, 1, _packed(8)),
    (3, 1, _packed(5)),
    (4, 1, _packed(1, 5)),
    (5, 1, _packed(4)),
    (6, 1, _packed(8)),
    (7, 1, _packed(4)),
    (8, 1, _packed(4)),
]
TAG_VALUES = [
    (1, "", 1),
    (2, "build", 2),
    (3, "ci", 3),
    (4, "nul\x00tag", 1),
    (5, "tag with space", 1),
]
TAG_POSTINGS = [
    (1, 1, _packed(7)),
    (2, 1, _packed(1, 8)),
    (3, 1, _packed(1, 5, 8)),  # entry 1 carries "ci" twice, named once
    (4, 1, _packed(5)),
    (5, 1, _packed(4)),
]
# loopctl's binary32 score of each relevance when nothing matches, as 0001 stored it.
BASELINE_SCORES = [
    (1, 0.10000000149011612),
    (2, 0.125),
    (4, 0.25),
    (5, 0.44999998807907104),
    (7, 0.6000000238418579),
    (8, 0.1617283970117569),
]


def _index_rows(connection: sa.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the token index, terms decoded, in key order."""
    tables = {
        "tokens": ("id", "token", "entries"),
        "postings": ("token_id", "block", "seqs"),
        "tag_values": ("id", "value", "entries"),
        "tag_postings": ("value_id", "block", "seqs"),
        "index_state": ("id", "indexed_through"),
    }
    rows = {}
    for table, names in tables.items():
        columns: list[sa.ColumnClause[Any]] = [
            sa.column(name, Utf8Text()) if name in {"token", "value"} else sa.column(name)
            for name in names
        ]
        query = sa.select(*columns).select_from(sa.table(table, *columns)).order_by(columns[0])
        rows[table] = [tuple(row) for row in connection.execute(query)]
    return rows


def _fill_0001(
    connection: sa.Connection, entries: list[tuple[int, str, float, str, list[str]]]
) -> None:
    if not entries:
        return
    connection.execute(
        sa.insert(_ENTRIES_0001),
        [
            {"seq": seq, "id": uuid.uuid4(), "category": category, "memory": memory,
             "memory_lower": memory.lower(), "relevance": relevance, "baseline_score": 0.0,
             "created_at_us": 0, "access_count": 0, "validated": False}
            for seq, category, relevance, memory, _ in entries
        ],
    )  # fmt: skip
    connection.execute(
        sa.insert(_TAGS_0001),
        [
            {"entry_seq": seq, "position": position, "tag": tag, "tag_lower": tag.lower()}
            for seq, _, _, _, tags in entries
            for position, tag in enumerate(tags)
        ],
    )


async def _at_0002(target: str, entries: list[tuple[int, str, float, str, list[str]]]):
    """Open ``target`` at 0001, store ``entries`` there, upgrade to 0002; the index rows."""
    async with open_store(target) as store, store.engine.connect() as connection:
        assert "0001" == await connection.run_sync(migrate.upgrade_to, "0001")
        await connection.run_sync(_fill_0001, entries)
        await connection.commit()
        assert "0002" == await connection.run_sync(migrate.upgrade_to, "0002")
        rows = await connection.run_sync(_index_rows)
        await connection.rollback()
        assert "0001" == await connection.run_sync(migrate.upgrade_to, "0001")
        scores = (
            await connection.execute(
                sa.text("SELECT seq, baseline_score FROM entries ORDER BY seq")
            )
        ).all()
        await connection.rollback()
        return rows, [tuple(row) for row in scores]


@pytest.fixture(params=["sqlite-file", pytest.param("postgresql", marks=NEEDS_POSTGRES)])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return str(tmp_path / "memory.db")
    url = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(url)
    return url


async def test_0002_indexes_the_stored_entries_as_worked_out_by_hand(target):
    """And 0002's downgrade gives back 0001's baseline scores."""
    rows, scores = await _at_0002(target, ENTRIES)
    assert TOKENS == rows["tokens"]
    assert POSTINGS == rows["postings"]
    assert TAG_VALUES == rows["tag_values"]
    assert TAG_POSTINGS == rows["tag_postings"]
    assert [(1, 8)] == rows["index_state"]
    assert BASELINE_SCORES == scores


async def test_0002_on_a_database_without_entries_indexes_nothing(target):
    rows, scores = await _at_0002(target, [])
    assert {
        "tokens": [],
        "postings": [],
        "tag_values": [],
        "tag_postings": [],
        "index_state": [(1, 0)],
    } == rows
    assert [] == scores
