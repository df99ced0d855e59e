"""Vector graphs built in a child process, so that no retrieval waits for one.

A retrieval that finds more vectors outside a graph than it should
(``Tuning.vector_loose``) answers exactly from them all the same, and asks
:class:`GraphBuilds` to start a build: a child process
(:mod:`loopctl_memory.sql.graph_child`) opens the database read-only and runs
``build_indexes``, which holds the graph directory's lock (one build per store
and machine). Retrievals take the new graphs once its manifest appears.

A child, not a thread: usearch takes the GIL back for every vector it adds, so
a build in a thread crawls whenever the process runs Python (measured: 20,000
vectors in 2.5 s alone, 15 s beside one busy thread), and slows the
retrievals it is meant to spare. One child at a time a store. Closing the
store stops it: a build cut short leaves only a temporary file, which the
next manifest written removes, and no manifest ever names it. A child that
fails is reported once (a warning) and none is started again by this store;
``build_indexes`` then builds in the process and raises what goes wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import subprocess
import sys
import tempfile
from typing import IO, Any

logger = logging.getLogger(__name__)

CHILD = "loopctl_memory.sql.graph_child"
"""The module a child runs (``python -m``)."""

_REPORTED = 2_000  # characters of a failed child's error output a warning shows


class GraphBuilds:
    """The child building a store's vector graphs, if one runs."""

    def __init__(self, target: str, *, enabled: bool, vector_loose: int = 0) -> None:
        """``target``: what the child opens (a file's path, or a server's URL with its password).

        ``enabled``: false, no child is ever started (``Tuning.background_builds``);
        ``vector_loose``: the store's, past which the child builds.
        """
        self._target = target
        self._vector_loose = vector_loose
        self._enabled = enabled
        self._child: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None
        self._failed = False

    @property
    def running(self) -> bool:
        """Whether a child is building now."""
        return self._child is not None and self._child.poll() is None

    def start(self, name: str, dims: int) -> None:
        """Start a child building the graphs of the vectors by embedder ``name`` (``dims``).

        Nothing when one runs, when none may start, or after one failed.
        """
        if not self._enabled or self.running:
            return
        self._ended()
        if self._failed:
            return
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - kept until the child ends
        try:
            child = subprocess.Popen(  # noqa: S603 - this Python, our module, no shell
                [sys.executable, "-m", CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        except OSError as exc:
            errors.close()
            self._fail(f"it could not start: {exc}")
            return
        self._child, self._errors = child, errors
        assert child.stdin is not None  # noqa: S101 - asked for
        with contextlib.suppress(OSError):  # a child that died at once: told when it ends
            asked = {"target": self._target, "name": name, "dims": dims}
            child.stdin.write(json.dumps({**asked, "vector_loose": self._vector_loose}).encode())
            child.stdin.close()

    async def wait(self) -> None:
        """Wait for the child building now, if one is (its failure is warned of, not raised)."""
        child = self._child
        if child is not None:
            await asyncio.to_thread(child.wait)
        self._ended()

    async def stop(self) -> None:
        """Stop the child building now, if one is, and wait for it. Idempotent."""
        self._enabled = False
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
        said = _tail(errors)
        if child.returncode != 0 and not stopped:
            self._fail(f"it exited with {child.returncode}: {said}")

    def _fail(self, why: str) -> None:
        self._failed = True
        logger.warning(
            "building the vector graphs in the background failed (%s); retrievals stay exact,"
            " scoring every vector outside a graph; build_indexes() (CLI index) builds them"
            " here and says what goes wrong",
            why,
        )


def _tail(errors: IO[bytes] | None) -> str:
    """The end of a child's error output, closing it."""
    if errors is None:
        return ""
    with errors:
        errors.seek(0)
        text = errors.read().decode("utf-8", "replace").strip()
    return text[-_REPORTED:] or "no output"


def request(payload: dict[str, Any]) -> tuple[str, str, int, int]:
    """(target, embedder name, dims, vector_loose) from what a parent wrote to its child."""
    asked = payload["target"], payload["name"], payload["dims"], payload["vector_loose"]
    return str(asked[0]), str(asked[1]), int(asked[2]), int(asked[3])
