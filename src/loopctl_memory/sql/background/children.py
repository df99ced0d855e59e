"""A child process doing a store's upkeep in the background, one at a time a store.

A store's slow upkeep (indexing a long tail, building vector graphs) runs in
a child process of its own (``python -m`` one of this package's modules),
not a thread: it then takes a core of its own, and never holds the GIL the
store's retrievals and writes need. The child reads one JSON object on its
standard input (what to open, and how), and keeps reading it: standard input
ending (the store closing, or its process ending) tells the child to finish
what it does and exit. A child that fails is reported once (a warning) and
none is started again by this store; the store then does the work itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Coroutine
from typing import IO, Any, NoReturn

from loopctl_memory.errors import LoopMemoryError

logger = logging.getLogger(__name__)

_REPORTED = 2_000  # characters of a failed child's error output a warning shows


class Child:
    """The child doing one kind of upkeep for a store, if one runs (a kind a subclass)."""

    def __init__(self, module: str, *, enabled: bool, failed: str) -> None:
        """``module``: what the child runs; ``enabled``: false, none is ever started.

        ``failed``: the warning's text when one fails, with ``%s`` for why.
        """
        self._module = module
        self._enabled = enabled
        self._failed_text = failed
        self._child: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None
        self._failed = False
        self._parent = os.getpid()  # a process forked from it has no child of its own

    @property
    def enabled(self) -> bool:
        """Whether a child may still start (not off, not failed, the store not closed)."""
        return self._enabled and not self._failed

    @property
    def running(self) -> bool:
        """Whether a child is at work now."""
        return self._child is not None and self._child.poll() is None

    def _start(self, asked: dict[str, Any]) -> bool:
        """Start a child and hand it ``asked``; whether one started.

        None when one runs, when none may start, or after one failed.
        """
        if not self._enabled or self.running or os.getpid() != self._parent:
            return False
        self._ended()
        if self._failed:
            return False
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - kept until the child ends
        try:
            child = subprocess.Popen(  # noqa: S603 - this Python, our module, no shell
                [sys.executable, "-m", self._module],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        except OSError as exc:
            errors.close()
            self._fail(f"it could not start: {exc}")
            return False
        self._child, self._errors = child, errors
        assert child.stdin is not None  # noqa: S101 - asked for
        with contextlib.suppress(OSError):  # a child that died at once: told when it ends
            child.stdin.write(json.dumps(asked).encode() + b"\n")
            child.stdin.flush()
        return True

    async def finish(self) -> None:
        """Tell the child at work to finish, and wait for it (a failure is warned of)."""
        if os.getpid() != self._parent:
            return
        child = self._child
        if child is not None:
            if child.stdin is not None:
                with contextlib.suppress(OSError):
                    child.stdin.close()
            await asyncio.to_thread(child.wait)
        self._ended()

    async def stop(self) -> None:
        """Stop the child at work now, if one is, and wait for it; start none again."""
        self._enabled = False
        if os.getpid() != self._parent:
            return
        child = self._child
        if child is not None and child.poll() is None:
            child.terminate()
            await asyncio.to_thread(child.wait)
        self._ended(stopped=True)

    def _ended(self, *, stopped: bool = False) -> None:
        """Forget the child once it has ended; warn if it failed (not if we stopped it)."""
        child, errors = self._child, self._errors
        if child is None or child.poll() is None:
            return
        self._child = self._errors = None
        if child.stdin is not None:
            with contextlib.suppress(OSError):
                child.stdin.close()
        said = _tail(errors)
        if child.returncode != 0 and not stopped:
            self._fail(f"it exited with {child.returncode}: {said}")

    def _fail(self, why: str) -> None:
        self._failed = True
        logger.warning(self._failed_text, why)


def _tail(errors: IO[bytes] | None) -> str:
    """The end of a child's error output, closing it."""
    if errors is None:
        return ""
    with errors:
        errors.seek(0)
        text = errors.read().decode("utf-8", "replace").strip()
    return text[-_REPORTED:] or "no output"


def run_child(work: Callable[[dict[str, Any]], Coroutine[Any, Any, object]]) -> NoReturn:
    """In a child: run ``work`` on its parent's request; exit 0, or 1 saying why on stderr."""
    try:
        asyncio.run(work(read_request()))
    except (LoopMemoryError, ValueError, KeyError, TypeError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


def read_request() -> dict[str, Any]:
    """In a child: the JSON object its parent wrote first on standard input, one line.

    Read from the descriptor itself: a thread of :func:`parent_gone` reads it next,
    and a buffered reader would keep what follows the line, or hold its lock at exit.
    """
    line = b""
    while not line.endswith(b"\n"):
        read = os.read(0, 1)
        if not read:
            break
        line += read
    asked = json.loads(line)
    if not isinstance(asked, dict):
        raise TypeError("the request is not a JSON object")
    return asked


def parent_gone() -> asyncio.Event:
    """In a child: an event set once standard input ends (the parent finished or died)."""
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        with contextlib.suppress(RuntimeError):  # the loop closed first: nobody waits
            loop.call_soon_threadsafe(ended.set)

    # A daemon thread: the child may end first, with standard input still open.
    threading.Thread(target=watch, name="parent watch", daemon=True).start()
    return ended
