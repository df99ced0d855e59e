"""Alembic environment: runs on a connection the library passes in, or on sqlalchemy.url.

The library calls alembic with ``config.attributes["connection"]`` set to a
synchronous connection already inside a write transaction; the command-line
``alembic`` (with an ini that sets ``sqlalchemy.url``) gets an engine of its own.
"""

from __future__ import annotations

import asyncio
import logging.config

from alembic import context
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine

from loopctl_memory.errors import SchemaError
from loopctl_memory.sql.tables import metadata

config = context.config

# A minimal ini without logging sections must not crash (KeyError: 'formatters').
if config.config_file_name is not None and config.file_config.has_section("formatters"):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)


def _include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    """Compare only our own tables: FTS shadow tables and strangers are not drift."""
    return type_ != "table" or name in metadata.tables


def _run(connection: Connection) -> None:
    sqlite = connection.dialect.name == "sqlite"
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=sqlite,
        include_name=_include_name,
        compare_type=True,
        # SQLite DDL is transactional once we emit BEGIN ourselves: one upgrade, one transaction.
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()
        if sqlite:
            broken = connection.execute(text("PRAGMA foreign_key_check")).fetchall()
            if broken:
                raise SchemaError(f"migration left {len(broken)} rows with broken foreign keys")


def _run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_on_url(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    _run_offline()
elif (given := config.attributes.get("connection")) is not None:
    _run(given)
else:
    asyncio.run(_run_on_url(config.get_main_option("sqlalchemy.url") or ""))
