"""One store, many agents and users: scoped views, their descendants, and ``scopes()``.

A scope is a ``/``-separated path (``acme/support/alice``). ``memory.scope(name)``
is a view with the whole store API that reads and writes only that scope;
``descendants=True`` also reads every scope below it. The root store is the
scope ``""``. Ids are unique across the store, but a view finds only its own.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/scopes.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from loopctl_memory import MemoryCategory, MemoryEntry, open_store


def texts(entries: list[MemoryEntry]) -> list[str]:
    """The memories' texts, in the order given."""
    return [entry.memory for entry in entries]


async def main(db: str | os.PathLike[str]) -> None:
    """Three users of two teams, and a shared fact at the root, in one store."""
    async with open_store(db, ranking="bm25") as memory:
        await memory.store(MemoryEntry(MemoryCategory.FACT, "Support hours: contact us 9-17 CET"))
        alice = memory.scope("acme/support/alice")  # a view: the whole API, a LoopMemory
        await alice.store(MemoryEntry(MemoryCategory.FACT, "Alice prefers contact by email"))
        bob = memory.scope("acme").scope("support/bob")  # names are relative: acme/support/bob
        bob_phone = MemoryEntry(MemoryCategory.FACT, "Bob wants contact by phone only")
        await bob.store(bob_phone)
        carol = memory.scope("acme/sales/carol")
        await carol.store(MemoryEntry(MemoryCategory.FACT, "Carol: contact via the CRM"))

        print("alice:", texts(await alice.retrieve("contact", 5)))  # Alice's memories only
        team = memory.scope("acme/support", descendants=True)
        print("acme/support and below:", texts(await team.retrieve("contact", 5)))
        print("root only:", texts(await memory.retrieve("contact", 5)))
        everyone = memory.with_descendants()  # the root and every scope
        print("everyone:", await everyone.count())

        print("bob's id from alice's view:", await alice.get(bob_phone.id))
        found = await team.get(bob_phone.id)
        print("bob's id from the team's view:", found.memory if found else None)

        print("scopes:", await memory.scopes())
        print("scopes under acme/support:", await memory.scope("acme/support").scopes())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
