"""A child of the LangGraph processes test: one LangGraphStore, many threads and tasks at once.

Usage: python -m tests.langgraph.processes_worker TARGET WORKER STEPS

The worker opens one store and runs 8 threads of blocking calls and 8 async
tasks on a loop of its own (more than a pool's connections), each owning the
namespace ``("w", WORKER, N)``: it puts, replaces and deletes its own items
(now one put, now a batch), reads each back at once (read your writes), and
searches every worker's items with and without a query. It prints the items
it expects its namespaces to hold at the end, as JSON: every write it was
told succeeded, the last put of each key winning.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import PutOp

from loopctl_memory.langgraph import LangGraphStore

Owned = dict[str, Mapping[str, Any]]
"""Each key of a namespace with the value last put."""

BUSY_TIMEOUT = 60.0

WORDS = ["tea", "coffee", "deploy", "cache", "refund", "green", "alpha"]


def _value(rng: random.Random, step: int) -> dict[str, Any]:
    return {"text": " ".join(rng.choices(WORDS, k=3)), "step": step, "n": rng.randint(0, 9)}


def _check_read(found: Any, expected: Mapping[str, Any] | None, where: str) -> None:
    value = None if found is None else found.value
    if value != expected:
        raise AssertionError(f"{where}: read {value!r}, wrote {expected!r}")


def _plan(rng: random.Random, owned: Owned, step: int) -> tuple[str, list[PutOp]]:
    key = f"k{rng.randrange(12)}"
    roll = rng.random()
    if roll < 0.15 and owned:
        return "delete", [PutOp((), key, None)]
    if roll < 0.3:
        keys = rng.sample([f"k{n}" for n in range(12)], 4)
        return "batch", [PutOp((), one, _value(rng, step)) for one in keys]
    return "put", [PutOp((), key, _value(rng, step))]


def _apply(namespace: tuple[str, ...], ops: list[PutOp]) -> list[PutOp]:
    return [PutOp(namespace, op.key, op.value) for op in ops]


def run_thread(store: LangGraphStore, namespace: tuple[str, ...], steps: int, seed: int) -> Owned:
    rng, owned = random.Random(seed), Owned()
    for step in range(steps):
        _, ops = _plan(rng, owned, step)
        store.batch(_apply(namespace, ops))
        for op in ops:
            if op.value is None:
                owned.pop(op.key, None)
            else:
                owned[op.key] = op.value
            _check_read(store.get(namespace, op.key), owned.get(op.key), f"{namespace} {op.key}")
        if step % 5 == 0:
            store.search(("w",), query=rng.choice(WORDS), limit=5)
            listed = store.search(namespace, limit=100)
            if {item.key: item.value for item in listed} != owned:
                raise AssertionError(f"{namespace}: listed {len(listed)}, own {len(owned)}")
    return owned


async def run_task(
    store: LangGraphStore, namespace: tuple[str, ...], steps: int, seed: int
) -> Owned:
    rng, owned = random.Random(seed), Owned()
    for step in range(steps):
        _, ops = _plan(rng, owned, step)
        await store.abatch(_apply(namespace, ops))
        for op in ops:
            if op.value is None:
                owned.pop(op.key, None)
            else:
                owned[op.key] = op.value
            found = await store.aget(namespace, op.key)
            _check_read(found, owned.get(op.key), f"{namespace} {op.key}")
        if step % 5 == 0:
            await store.asearch(("w",), query=rng.choice(WORDS), limit=5, filter={"n": {"$gt": 4}})
    return owned


def main() -> None:
    target, worker, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    expected: dict[str, Owned] = {}
    # 48 writers at once on a loaded machine: wait for the lock as long as a slow CI needs.
    with LangGraphStore.from_conn_string(target, busy_timeout=BUSY_TIMEOUT) as store:

        def thread_body(number: int) -> None:
            namespace = ("w", worker, f"t{number}")
            expected["/".join(namespace)] = run_thread(store, namespace, steps, number)

        threads = [threading.Thread(target=thread_body, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()

        async def tasks() -> list[Owned]:
            return await asyncio.gather(
                *(run_task(store, ("w", worker, f"a{n}"), steps, 100 + n) for n in range(8))
            )

        for number, owned in enumerate(asyncio.run(tasks())):
            expected[f"w/{worker}/a{number}"] = owned
        for thread in threads:
            thread.join()
    if len(expected) != 16:
        raise AssertionError(f"only {len(expected)} of 16 threads and tasks finished")
    print(json.dumps(expected))


if __name__ == "__main__":
    main()
