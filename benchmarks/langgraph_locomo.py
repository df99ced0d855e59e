"""LoCoMo hit@5 through LangGraph's ``BaseStore``: this store beside ``SqliteStore`` (sqlite-vec).

Every store embeds through one function that looks each text's vector up in an
.npz (all-MiniLM-L6-v2), never invents one: this store (hybrid, and bm25 with
no index), ``SqliteStore`` with sqlite-vec when this Python can load it, and
LangGraph's ``InMemoryStore`` for reference.
"""

from __future__ import annotations

import contextlib
import importlib
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore, IndexConfig, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from benchmarks import quality
from benchmarks.langgraph_speed import LIMIT, log
from loopctl_memory.langgraph import LangGraphStore

NO_LOAD = "cannot load extensions (`pip install pysqlite3-binary` gives one that can)"


class Vectors:
    """An ``index["embed"]`` function: each text's vector looked up in an .npz, never invented."""

    def __init__(self, path: Path) -> None:
        held = np.load(path)
        self.path = path
        self._rows = {text: row for row, text in enumerate(held["texts"].tolist())}
        self._vectors = np.asarray(held["vectors"], np.float32)
        self.dims = int(self._vectors.shape[1])
        self.looked_up = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [text for text in texts if text not in self._rows]
        if missing:
            raise LookupError(
                f"{len(missing)} of {len(texts)} texts to embed are not in {self.path}:"
                f" {missing[0]!r} first"
            )
        self.looked_up += len(texts)
        vectors: list[list[float]] = self._vectors[[self._rows[t] for t in texts]].tolist()
        return vectors


@dataclass(frozen=True, slots=True)
class Recalled:
    """One store's LoCoMo figures: quality, search timings, how many texts it embedded."""

    name: str
    quality: quality.Quality
    timings: list[float]
    embedded: int


def locomo(
    name: str,
    store: BaseStore,
    conversations: Sequence[quality.Conversation],
    vectors: Vectors,
    fields: list[str] | None = None,
) -> Recalled:
    """Each conversation's turns put in a namespace of its own; its questions searched there."""
    before = vectors.looked_up
    answers: list[list[str]] = []
    timings: list[float] = []
    for talk in conversations:
        ns = ("locomo", talk.name)
        store.batch([PutOp(ns, t.id, {"text": t.memory}, index=fields) for t in talk.turns])
        for question in talk.questions:
            began = time.perf_counter()
            found = store.search(ns, query=question.text, limit=LIMIT)
            timings.append(time.perf_counter() - began)
            answers.append([item.key for item in found])
    questions = [question for talk in conversations for question in talk.questions]
    return Recalled(name, quality.measure(answers, questions), timings, vectors.looked_up - before)


def vec_connection() -> tuple[Any, str] | None:
    """A connection that can load sqlite-vec, and what it is (None: this Python has none)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    if hasattr(conn, "enable_load_extension"):
        return conn, f"the standard `sqlite3` (SQLite {sqlite3.sqlite_version})"
    conn.close()
    try:
        driver = importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return None
    conn = driver.connect(":memory:", check_same_thread=False, isolation_level=None)
    return conn, f"`pysqlite3` (SQLite {driver.sqlite_version}): this Python's `sqlite3` {NO_LOAD}"


@dataclass(frozen=True, slots=True)
class Locomo:
    """The LoCoMo rows, on what data, and how ``SqliteStore`` loaded sqlite-vec."""

    recalled: list[Recalled]
    data: str
    driver: str


def measure_locomo(data: Path, vectors_file: Path) -> Locomo:
    talks = quality.load(data)
    vectors = Vectors(vectors_file)
    index: IndexConfig = {"embed": vectors, "dims": vectors.dims, "fields": ["text"]}
    log(f"LoCoMo: {sum(len(talk.questions) for talk in talks)} questions a store")
    found: list[Recalled] = []
    opened = vec_connection()
    driver = f"none, not measured: this Python's `sqlite3` {NO_LOAD}, and there is no `pysqlite3`"
    if opened is not None:
        conn, driver = opened
        with contextlib.closing(conn):
            sqlite_store = SqliteStore(conn, index=index)
            sqlite_store.setup()
            # index= on each put: SqliteStore reads "text_fields", not "fields"
            found.append(locomo("SqliteStore", sqlite_store, talks, vectors, ["text"]))
    found.append(locomo("InMemoryStore", InMemoryStore(index=index), talks, vectors))
    with LangGraphStore.from_conn_string(":memory:", index=index, ranking="hybrid") as hybrid:
        found.append(locomo("store, hybrid", hybrid, talks, vectors))
    with LangGraphStore.from_conn_string(":memory:") as bm25:
        found.append(locomo("store, bm25", bm25, talks, vectors))
    return Locomo(found, f"`{data.name}`, vectors `{vectors_file.name}`", driver)
