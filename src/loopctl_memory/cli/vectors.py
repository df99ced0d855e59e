"""The commands on the store's vectors: ``embed-pending``, ``reembed`` and ``index``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from loopctl_memory.cli.messages import counted, example
from loopctl_memory.cli.settings import Settings, need_embedder, with_store
from loopctl_memory.names import PROG
from loopctl_memory.sql.tuning import Tuning

if TYPE_CHECKING:
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

_BATCH_SIZE = click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Memories embedded in one call, and written in one transaction.",
)


@click.command(
    "embed-pending",
    epilog=example(
        f"{PROG} embed-pending",
        f"{PROG} --embedder ollama:nomic-embed-text embed-pending --batch-size 64",
    ),
)
@_BATCH_SIZE
@click.pass_obj
def embed_pending(settings: Settings, batch_size: int) -> None:
    """Make the vectors of the memories stored while the embedder failed (pending ones).

    A memory whose vector could not be made (the embedder raised or timed out)
    is stored all the same and found by the lexical rankings; this makes its
    vector, so that the vector and hybrid rankings find it too.
    """

    async def work(store: SqlMemoryStore) -> tuple[int, int]:
        need_embedder(store)
        made = await store.embed_pending(batch_size)
        return made, await store.pending_embeddings()

    made, left = with_store(settings, work)
    message = f"Made the vectors of {counted(made, 'pending memory', 'pending memories')}"
    click.echo(message + (f"; {left} still pending" if left else ""))


@click.command(
    epilog=example(
        f"{PROG} reembed sentence-transformers:BAAI/bge-small-en-v1.5",
        f"{PROG} reembed openai:text-embedding-3-small --batch-size 512",
    )
)
@click.argument("spec")
@_BATCH_SIZE
@click.pass_obj
def reembed(settings: Settings, spec: str, batch_size: int) -> None:
    """Make every memory's vector again with the embedder SPEC, and record it as the store's.

    Searches and writes go on with the old embedder meanwhile; the old vectors
    go only once every memory has its new one. Interrupted, it resumes where it
    stopped when run again. The old embedder is not needed.
    """
    from loopctl_memory.rendering import CountedProgress

    async def work(store: SqlMemoryStore) -> tuple[int, str, int]:
        with CountedProgress("embedding") as progress:
            made = await store.reembed(spec, batch_size=batch_size, progress=progress.update)
        named = store.embedder
        assert named is not None  # noqa: S101 - reembed made it the store's
        return made, named.name, named.dims

    made, name, dims = with_store(settings, work, embedder=False)
    click.echo(
        f"Made {counted(made, 'vector')} with {name} ({dims} dims); it is now the store's embedder"
    )


@click.command(epilog=example(f"{PROG} --db ./agent.db index"))
@click.pass_obj
def index(settings: Settings) -> None:
    """Put every memory's vector into the graph files that vector and hybrid searches use.

    Until they are built, a search scores every vector outside them exactly:
    slow past many thousands (a second at a million memories), and a command
    that ends stops the build its search started in the background. Run this
    after a big import or reembed, with a progress bar. The files are a cache
    beside the database (in the user's cache for PostgreSQL), shared by every
    process of the machine.
    """
    from loopctl_memory.rendering import CountedProgress

    async def work(store: SqlMemoryStore) -> int:
        need_embedder(store)
        with CountedProgress("indexing") as progress:
            return await store.build_indexes(progress=progress.update)

    held = with_store(settings, work)
    if held:
        click.echo(f"The vector graphs hold the vectors of {counted(held, 'memory', 'memories')}")
    else:
        click.echo(
            f"No graph is needed: up to {Tuning().vector_loose:,} vectors outside one are"
            " scored exactly, faster than a graph finds them"
        )
