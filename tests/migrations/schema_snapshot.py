"""What a database's schema is, as data: to compare a created database with a migrated one."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, inspect, text


def schema_snapshot(connection: Connection) -> dict[str, Any]:
    """Every table's columns, keys, indexes, constraints and rows (a new database is small).

    On SQLite it adds each object's DDL with its lines sorted and quotes dropped,
    which catches what the inspector does not report (``WITHOUT ROWID``, say)
    while ignoring the order alembic's table rebuilds leave the constraints in.
    """
    inspector = inspect(connection)
    tables: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        tables[table] = {
            "columns": [
                {key: str(value) for key, value in column.items()}
                for column in inspector.get_columns(table)
            ],
            "primary key": inspector.get_pk_constraint(table),
            "foreign keys": by_name(inspector.get_foreign_keys(table)),
            "indexes": by_name(_as_text(index) for index in inspector.get_indexes(table)),
            "unique": by_name(inspector.get_unique_constraints(table)),
            "checks": by_name(inspector.get_check_constraints(table)),
        }
        if connection.dialect.supports_comments:
            tables[table]["comment"] = inspector.get_table_comment(table)
    snapshot: dict[str, Any] = {
        "tables": tables,
        # Every row: a migration that seeds a table must be matched by the creation.
        "rows": {
            table: sorted(
                tuple(map(_identity_masked, row))
                for row in connection.execute(text(f"SELECT * FROM {table}"))  # noqa: S608
            )
            for table in tables
        },
    }
    if connection.dialect.name == "sqlite":
        snapshot["ddl"] = {
            (kind, name): sorted(
                line.strip().rstrip(",").replace('"', "") for line in (sql or "").splitlines()
            )
            for kind, name, sql in connection.execute(
                text("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
            )
        }
    return snapshot


def _identity_masked(value: Any) -> Any:
    """A store's identity (a random UUID, ``index_state.store_id``) as a placeholder."""
    if isinstance(value, str) and len(value) == 36:
        try:
            uuid.UUID(value)
        except ValueError:
            return value
        return "<a uuid>"
    return value


def _as_text(index: Any) -> Any:
    """A reflected index with its dialect options (a partial index's WHERE) as text."""
    options = index.get("dialect_options")
    if not options:
        return index
    return {**index, "dialect_options": {key: str(value) for key, value in options.items()}}


def by_name(items: Iterable[Any]) -> list[Any]:
    """Reflected keys, indexes or constraints in the order of their names."""
    return sorted(items, key=lambda item: str(item.get("name")))
