"""Where a store's graph files live, and the manifest naming the ones that are current.

A file store keeps them in a directory beside its file (``memory.db-vectors``);
a PostgreSQL store in the user's cache directory, under the store's identity,
on each machine that ranks by vectors. They are a cache of the database: any
of them may be deleted, and a process that finds them missing, damaged, of
another store or of an earlier vector epoch builds them again.

The manifest (``manifest.json``) names the store, the embedder, the epoch and
each graph file with the change-log position its vectors are current as of.
It is replaced whole (a temporary file renamed over it), and graph files are
never changed once named, so a process reads either the old manifest or the
new one and never a half-written file. Whoever writes holds ``lock``, an
advisory lock on a file of the directory, for the time it builds.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no advisory locks
    fcntl = None  # type: ignore[assignment]

from loopctl_memory.sql.ranking.graph import Graph, GraphFile

_FORMAT = 1
_MANIFEST = "manifest.json"
_LOCK = "lock"
_SUFFIX = ".usearch"


@dataclass(frozen=True, slots=True)
class Manifest:
    """The current graph files of a store's vectors by one embedder."""

    store_id: str
    embedder_id: int
    dims: int
    epoch: int
    graphs: tuple[tuple[GraphFile, int], ...] = ()
    """Each file, oldest first, and the change-log id its vectors are current as of."""

    def to_json(self) -> str:
        """The manifest file's text."""
        return json.dumps(
            {
                "format": _FORMAT,
                "store_id": self.store_id,
                "embedder_id": self.embedder_id,
                "dims": self.dims,
                "epoch": self.epoch,
                "graphs": [
                    {
                        "name": graph.name,
                        "count": graph.count,
                        "size": graph.size,
                        "crc": graph.crc,
                        "through": graph.through,
                        "change": change,
                    }
                    for graph, change in self.graphs
                ],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest | None:
        """The manifest a file holds, or None if it is not one this version writes."""
        try:
            found: Any = json.loads(text)
            if found.get("format") != _FORMAT:
                return None
            graphs = tuple(
                (
                    GraphFile(
                        str(g["name"]),
                        int(g["count"]),
                        int(g["size"]),
                        int(g["crc"]),
                        int(g["through"]),
                    ),
                    int(g["change"]),
                )
                for g in found["graphs"]
            )
            return cls(
                str(found["store_id"]),
                int(found["embedder_id"]),
                int(found["dims"]),
                int(found["epoch"]),
                graphs,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


class GraphHome:
    """One store's directory of graph files, found from the store's identity."""

    def __init__(self, place: Callable[[str], Path]) -> None:
        self._place = place
        self.directory = Path()
        self._opened: dict[GraphFile, Graph] = {}

    def bind(self, store_id: str) -> None:
        """Use the directory of the store named ``store_id`` (its identity in the database)."""
        directory = self._place(store_id)
        if directory != self.directory:
            self.forget_others(set())
            self.directory = directory

    def graph(self, record: GraphFile, dims: int) -> Graph | None:
        """The graph file ``record`` names, mapped (once a process), or None if unusable."""
        found = self._opened.get(record)
        if found is None:
            found = Graph.open(self.directory / record.name, record, dims)
            if found is None:
                return None
            self._opened[record] = found
        return found

    def forget_others(self, kept: set[GraphFile]) -> None:
        """Unmap every graph file but ``kept``."""
        for record in [record for record in self._opened if record not in kept]:
            self._opened.pop(record).close()

    def read(self) -> Manifest | None:
        """The manifest, or None if there is none (or it cannot be read)."""
        try:
            return Manifest.from_json((self.directory / _MANIFEST).read_text("utf-8"))
        except (OSError, UnicodeDecodeError):
            return None

    def stamp(self) -> tuple[int, int] | None:
        """What changes whenever the manifest is replaced: seen cheaply at every retrieval."""
        try:
            found = (self.directory / _MANIFEST).stat()
        except OSError:
            return None
        return found.st_ino, found.st_mtime_ns

    def new_path(self) -> Path:
        """A path for a new graph file, unused by any process."""
        return self.directory / f"graph-{uuid.uuid4().hex}{_SUFFIX}"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory's write lock (waiting for it).

        Raises:
            OSError: the directory cannot be made or written.

        """
        self.directory.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock(descriptor)
            yield
        finally:
            os.close(descriptor)  # releases the lock

    def write(self, manifest: Manifest) -> None:
        """Make ``manifest`` the current one, then delete every graph file it does not name.

        Raises:
            OSError: it could not be written (the previous one stays).

        """
        temporary = self.directory / f"{_MANIFEST}.tmp"
        with temporary.open("w", encoding="utf-8") as file:
            file.write(manifest.to_json())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.directory / _MANIFEST)
        named = {graph.name for graph, _ in manifest.graphs}
        for found in [*self.directory.glob(f"*{_SUFFIX}"), *self.directory.glob("*.tmp")]:
            if found.name not in named:
                with contextlib.suppress(OSError):
                    found.unlink()


def _lock(descriptor: int) -> None:
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_EX)


def beside_file(file: Path) -> GraphHome:
    """The graph files of the SQLite file ``file``: in ``<file>-vectors`` beside it."""
    directory = Path(os.path.abspath(file)).with_name(f"{file.name}-vectors")
    return GraphHome(lambda _: directory)


def in_user_cache() -> GraphHome:
    """The graph files of a server's store: in the user's cache, under the store's identity."""
    import platformdirs  # noqa: PLC0415 - only stores on a server need it

    root = Path(platformdirs.user_cache_dir("loopctl-memory")) / "vectors"
    return GraphHome(lambda store_id: root / store_id)
