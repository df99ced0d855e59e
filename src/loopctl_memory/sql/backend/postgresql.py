"""PostgreSQL through asyncpg: a pool, writers queued on one advisory lock, text as bytes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.backend.base import BEGIN_MODE, WRITE, Backend, EntryRow, register
from loopctl_memory.sql.tables import metadata

if TYPE_CHECKING:
    from loopctl_memory.sql.backend.base import PoolOptions

WRITERS_LOCK = 0x6C6F6F70_6D656D  # "loopmem": the PostgreSQL advisory lock writers queue on


class PostgresqlBackend(Backend):
    """PostgreSQL through asyncpg: a pool, writers queued on one advisory lock, text as bytes."""

    name = "postgresql"

    def engine_options(
        self, *, memory: bool, busy_timeout: float, pool: PoolOptions, read_only: bool = False
    ) -> dict[str, Any]:
        """The pool, the lock and statement timeouts, REPEATABLE READ reads.

        ``read_only``: every transaction of the session is read-only, by the server's rule.
        """
        del memory
        settings = {"lock_timeout": str(_milliseconds(busy_timeout))}
        if read_only:
            settings["default_transaction_read_only"] = "on"
        if pool.statement_timeout is not None:
            settings["statement_timeout"] = str(_milliseconds(pool.statement_timeout))
        return {
            "isolation_level": "REPEATABLE READ",
            "pool_size": pool.pool_size,
            "max_overflow": pool.max_overflow,
            "pool_timeout": pool.pool_timeout,
            "pool_pre_ping": True,
            "connect_args": {"server_settings": settings, "timeout": pool.connect_timeout},
        }

    def configure(self, engine: AsyncEngine, *, memory: bool, busy_timeout: float) -> None:
        """A write transaction first takes the writers' lock."""

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Connection) -> None:
            if connection.get_execution_options().get(BEGIN_MODE) == WRITE:
                # Held until COMMIT or ROLLBACK: one writer at a time, as on SQLite.
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITERS_LOCK})")

    def begin_options(self, *, write: bool) -> dict[str, Any]:
        """Writes in READ COMMITTED behind the lock; reads in one REPEATABLE READ snapshot."""
        isolation = "READ COMMITTED" if write else "REPEATABLE READ"
        return {**super().begin_options(write=write), "isolation_level": isolation}

    def encode(self, text: str) -> Any:
        """UTF-8 bytes: the column is BYTEA (see ``Utf8Text``)."""
        return text.encode()

    def decode(self, stored: Any) -> str:
        """Bytes back to a str."""
        return bytes(stored).decode()

    def sql(self, statement: str) -> str:
        """``$1``, ``$2``... for asyncpg (our statements never hold a literal ``?``)."""
        pieces = statement.split("?")
        numbered = [f"{piece}${number}" for number, piece in enumerate(pieces[:-1], start=1)]
        return "".join(numbered) + pieces[-1]

    def entry_rows(
        self, batch: FlatBatch, first_seq: int, scope_ids: Mapping[str, int]
    ) -> list[EntryRow]:
        """A UUID, a bool and text as bytes, as asyncpg binds them."""
        return [
            (
                first_seq + index,
                uuid.UUID(hex=hex_id),
                category,
                memory.encode(),
                memory_lower.encode(),
                relevance,
                created_at_us,
                access_count,
                bool(validated),
                last_accessed_us,
                last_decayed_us,
                scope_ids[scope],
                metadata,
                None if key is None else key.encode(),
                expires_at_us,
            )
            for index, (
                hex_id,
                category,
                memory,
                memory_lower,
                relevance,
                created_at_us,
                access_count,
                validated,
                last_accessed_us,
                last_decayed_us,
                scope,
                metadata,
                key,
                expires_at_us,
            ) in enumerate(batch.entries)
        ]

    def tag_rows(self, batch: FlatBatch, first_seq: int) -> list[EntryRow]:
        """Tags as bytes."""
        return [
            (first_seq + index, position, tag.encode(), lower.encode())
            for index, position, tag, lower in batch.tags
        ]

    def storage_bytes(self, connection: Connection) -> int:
        """The total relation size of our tables in the current schema."""
        return int(
            connection.exec_driver_sql(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = current_schema() "
                "AND c.relname IN ('entries', 'tags', 'tokens', 'token_blocks', 'tag_values', "
                "'tag_blocks', 'words', 'word_blocks', 'index_state', 'changes', 'alembic_version')"
            ).scalar_one()
        )

    async def vacuum(self, driver: Any, *, memory: bool, where: str) -> None:
        """A plain ``VACUUM`` of our tables, outside a transaction (PostgreSQL refuses one in it).

        It makes the space of deleted rows reusable by later writes; it does not
        shrink the files (only ``VACUUM FULL`` does, and it locks every table
        meanwhile). Autovacuum would do the same, later.
        """
        del memory, where
        await driver.execute(f"VACUUM {', '.join(sorted(metadata.tables))}")

    def after_indexing(self, connection: Connection, tables: list[str]) -> None:
        """ANALYZE our tables once a fifth of the entries changed since the last time.

        Autovacuum does it too, but up to a minute later; until then the planner
        takes a bulk-loaded table for an empty one and scans where it should seek.
        """
        changed, live = connection.exec_driver_sql(
            "SELECT coalesce(n_mod_since_analyze, 0), coalesce(n_live_tup, 0) "
            "FROM pg_stat_user_tables WHERE relid = 'entries'::regclass"
        ).one()
        if changed > 0.2 * live:
            connection.exec_driver_sql(f"ANALYZE {', '.join(tables)}")


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


register(PostgresqlBackend())
