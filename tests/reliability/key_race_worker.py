"""A child of the key race test: upsert every key, round after round, with reads between.

Usage: python -m tests.reliability.key_race_worker TARGET PROCESS KEYS ROUNDS

Each round stores every key once, in an order of its own (a batch of half the
keys, then the rest one by one), each entry's metadata naming the process and
the round; after each round it reads a few keys back and checks that each holds
exactly one memory with that key. Prints ``done`` when every write was acknowledged.
"""

from __future__ import annotations

import asyncio
import random
import sys

from loopctl_memory import MemoryCategory, MemoryEntry, MemoryFilter, open_store


def key_of(number: int) -> str:
    """The name of key ``number``."""
    return f"key-{number:03d}"


async def run(target: str, process: int, keys: int, rounds: int) -> None:
    rng = random.Random(process)
    async with open_store(target) as store:
        for turn in range(rounds):
            order = list(range(keys))
            rng.shuffle(order)
            written = [
                MemoryEntry(
                    MemoryCategory.FACT,
                    f"process {process} round {turn} wrote {key_of(number)}",
                    key=key_of(number),
                    metadata={"process": process, "round": turn},
                )
                for number in order
            ]
            half = len(written) // 2
            await store.store_many(written[:half])
            for entry in written[half:]:
                await store.store(entry)
            for number in rng.sample(range(keys), 5):
                found = await store.get_by_key(key_of(number))
                holding = MemoryFilter(metadata={"process": {"$exists": True}})
                assert found is not None
                assert found.key == key_of(number), found
                if found.metadata["process"] == process:  # its own write, or a later one's
                    assert found.metadata["round"] == turn
                assert await store.count(filter=holding) == keys
    print("done", flush=True)


if __name__ == "__main__":
    target, process, keys, rounds = sys.argv[1:5]
    asyncio.run(run(target, int(process), int(keys), int(rounds)))
