"""An acknowledged store survives kill -9 of the process that made it."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from loopctl_memory import open_store
from tests.reliability.crash_writer import BATCH, expected_entry

WRITER = Path(__file__).with_name("crash_writer.py")
ROUNDS = 6


def _write_then_kill(path: Path, start: int, mode: str, acks_before_kill: int) -> list[int]:
    """Run the writer from ``start``; SIGKILL it after that many acks; return the acked indexes."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    acked: list[int] = []
    with subprocess.Popen(
        [sys.executable, str(WRITER), str(path), str(start), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as child:
        try:
            assert child.stdout is not None
            for _ in range(acks_before_kill):
                line = child.stdout.readline()
                assert line.startswith("ack "), f"writer died early: {line!r}"
                first, last = map(int, line.split()[1:])
                acked.extend(range(first, last + 1))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert -signal.SIGKILL == child.returncode
    return acked


@pytest.mark.parametrize("mode", ["single", "batch"])
async def test_every_acknowledged_entry_survives_sigkill(mode, tmp_path):
    path = tmp_path / "memory.db"
    rng = random.Random(f"crash-{mode}")
    acked: list[int] = []
    start = 0
    for _ in range(ROUNDS):
        acked += _write_then_kill(path, start, mode, acks_before_kill=rng.randint(1, 40))
        # The next writer starts past anything the killed one may have been writing.
        start = acked[-1] + 10 * BATCH

    with sqlite3.connect(path) as raw:
        assert [("ok",)] == raw.execute("PRAGMA integrity_check").fetchall()
    raw.close()
    async with open_store(path) as store:
        for index in acked:
            assert expected_entry(index) == await store.get(expected_entry(index).id)
        stored = await store.count()
        assert stored >= len(acked)
        if mode == "batch":
            assert 0 == stored % BATCH, "a batch was stored in part"
        await store.store(expected_entry(10**6))
        assert stored + 1 == await store.count()
