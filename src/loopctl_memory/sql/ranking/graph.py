"""The one seam to the graph index engine (usearch): build a file of vectors, map it, search it.

A graph file holds unit vectors under their entries' seqs, quantised to a byte
per dimension, in an HNSW graph (usearch's ``Index``, cosine metric). It is
written once, whole, to a temporary name and renamed into place, and never
changed afterwards; a process maps it read-only (``view``), so every process
of a machine shares one copy in the page cache. What a search returns is
approximate twice over (the graph, the bytes): callers rescore the entries it
names from their stored vectors.

A file is opened only after its size and CRC-32 match what its manifest
recorded, so a damaged or half-written file is never handed to the engine.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Vectors = npt.NDArray[np.float32]

CONNECTIVITY = 16
"""Edges per node (HNSW's M): usearch's default."""
EXPANSION_ADD = 128
"""Candidates kept while inserting (efConstruction). Against 64, a graph of a million
384-d vectors builds about 2.5x slower (in the retrieval that first needs it, once) and
is searched with half the breadth for the same recall: recall@10 0.9945 with 1,024
candidates, where 64 gave 0.988 (and 0.996 with 2,048); a retrieval runs every turn."""
APPROXIMATION = 0.025
"""How far a graph's cosine (bytes per dimension) may be from the exact one, for unit
vectors: measured at most 0.019 (standard deviation 0.0038) over 320,000 pairs of 384-d
vectors shaped like a sentence embedder's. Searches rescore what this cannot rule out."""
_SMALL = 20_000  # a graph this small is built on one thread: the same graph every time
_CHUNK = 2**24


@dataclass(frozen=True, slots=True)
class GraphFile:
    """What a manifest records of a graph file, checked before the file is mapped."""

    name: str
    count: int
    size: int
    crc: int
    through: int = 0
    """The highest seq whose vector (or its absence) the file reflects."""


def build(
    path: Path, batches: Iterable[tuple[Ints, Vectors]], dims: int, through: int
) -> GraphFile:
    """Write the graph of ``batches`` (seqs, their unit vectors) to ``path``, atomically.

    Raises:
        OSError: the file could not be written (nothing is left at ``path``).

    """
    index = _engine().Index(
        ndim=dims,
        metric="cos",
        dtype="i8",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
    )
    for seqs, rows in batches:
        if len(seqs):
            threads = 1 if len(seqs) < _SMALL and index.size < _SMALL else 0
            index.add(
                seqs.astype(np.uint64), np.ascontiguousarray(rows, np.float32), threads=threads
            )
    count = int(index.size)
    temporary = path.with_name(path.name + ".tmp")
    try:
        index.save(str(temporary))
        del index
        _sync(temporary)
        size, crc = _checksum(temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    _sync(path.parent)
    return GraphFile(path.name, count, size, crc, through)


class Graph:
    """One graph file, mapped read-only."""

    def __init__(self, index: Any, record: GraphFile) -> None:
        self._index = index
        self.record = record

    @classmethod
    def open(cls, path: Path, record: GraphFile, dims: int) -> Graph | None:
        """The mapped file, or None when it is missing, damaged or not what was recorded."""
        try:
            if (path.stat().st_size, _checksum(path)[1]) != (record.size, record.crc):
                return None
            index = _engine().Index.restore(str(path), view=True)
            if index is None or index.ndim != dims or index.size != record.count:
                return None
        except (OSError, RuntimeError, ValueError):
            return None
        return cls(index, record)

    def seqs(self) -> Ints:
        """Every seq the file holds a vector of (in no particular order)."""
        if not self._index.size:
            return np.empty(0, np.int64)
        return np.asarray(self._index.keys, dtype=np.uint64).astype(np.int64)

    def search(self, query: Vectors, count: int) -> tuple[Ints, Floats]:
        """Up to ``count`` seqs near ``query``, nearest first, with their approximate cosines."""
        if count <= 0 or not self._index.size:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        self._index.expansion_search = max(count, 64)
        found = self._index.search(np.asarray(query, np.float32), count, threads=1)
        seqs = np.asarray(found.keys, dtype=np.uint64).astype(np.int64)
        cosines = 1.0 - np.asarray(found.distances, dtype=np.float64)
        return seqs, cosines

    def vectors(self, seqs: Ints) -> Vectors:
        """The file's vectors of ``seqs`` (each held by it), as unit rows: approximate."""
        if not len(seqs):
            return np.zeros((0, self._index.ndim), np.float32)
        found = np.stack(self._index.get(seqs.astype(np.uint64), dtype=np.float32))
        found /= np.linalg.norm(found, axis=1, keepdims=True)
        return found.astype(np.float32, copy=False)

    def close(self) -> None:
        """Unmap the file."""
        with contextlib.suppress(Exception):
            self._index.reset()


def _engine() -> Any:
    """Usearch's index module, imported on first use: it takes 0.3 s, and most stores need none."""
    import usearch.index  # noqa: PLC0415

    return usearch.index


def _checksum(path: Path) -> tuple[int, int]:
    crc = 0
    size = 0
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def _sync(path: Path) -> None:
    """Make ``path`` (a file, or a directory's entries) durable."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    try:
        descriptor = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
