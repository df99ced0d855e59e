"""A store that fails to open leaves no aiosqlite worker thread behind to outlive its event loop.

aiosqlite (0.22.1) stops the worker thread of a connection that failed to open
without waiting for it; the thread then hands the stop's result to the event
loop, and if the loop has closed by then (``asyncio.run`` returning, a test
ending) the thread dies with "RuntimeError: Event loop is closed". Opening
must therefore not return (nor raise) before every such thread has finished.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import aiosqlite.core
import pytest

from loopctl_memory import StorageError, open_store


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[aiosqlite.core.Connection]:
    """Every aiosqlite connection opened during the test (observed, not changed)."""
    connections: list[aiosqlite.core.Connection] = []
    original = aiosqlite.core.Connection.__init__

    def observed(self: aiosqlite.core.Connection, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        connections.append(self)

    monkeypatch.setattr(aiosqlite.core.Connection, "__init__", observed)
    return connections


@pytest.fixture(autouse=True)
def few_thread_switches() -> Iterator[None]:
    """Hand the GIL to another thread only when this one waits, as a busy machine may.

    Without it a leaked worker thread usually wins the race and finishes first,
    and the test would catch the leak only now and then.
    """
    before = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    yield
    sys.setswitchinterval(before)


def _unopenable(tmp_path: Path, kind: str) -> Path:
    """A path the store only finds unopenable once aiosqlite's thread has tried it."""
    path = tmp_path / "memory.db"
    if kind == "a symlink loop":
        path.symlink_to(path)
    else:
        path.write_bytes(b"not a database" * 512)
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [("a symlink loop", "unable to open"), ("not a database", "not a database")],
)
async def test_a_failed_open_stops_every_worker_thread_before_it_raises(
    tmp_path: Path, made: list[aiosqlite.core.Connection], kind: str, message: str
) -> None:
    with pytest.raises(StorageError, match=message):
        await open_store(_unopenable(tmp_path, kind))
    assert made, "the open never reached aiosqlite"
    assert [] == [connection for connection in made if connection._thread.is_alive()]
