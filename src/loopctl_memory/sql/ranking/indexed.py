"""The ranking columns of the indexed entries, read in a few rows instead of a row an entry.

Indexing writes, for each block of seqs, every entry's relevance and scope as
it found them (``entry_blocks``). What changed since is in the change log: a
rewritten entry (its relevance may be new) or a removed one. So a new process
reads the blocks' rows, then only the entries the log names.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from loopctl_memory.binary32 import SCORE_RELEVANCE_WEIGHT
from loopctl_memory.sql.backend import Reader

_HALF = np.float32(SCORE_RELEVANCE_WEIGHT)


def read_indexed(
    connection: Reader,
    half: npt.NDArray[np.float32],
    scope_of: npt.NDArray[np.int64],
    *,
    mark: int,
    change: int,
    relevance: bool,
    scoped: bool,
) -> None:
    """Fill ``half`` and ``scope_of`` for every seq through ``mark`` (the watermark).

    ``half``: the binary32 ``relevance * 0.5`` of each entry (with
    ``relevance``; else 0.0), ``-inf`` where none lives; ``scope_of``: its
    scope id (read only when ``scoped``; else 0), -1 where none lives.
    ``change``: the last change of the transaction's snapshot. Both arrays
    hold at least ``mark + 1`` values.
    """
    rows = connection.all(
        f"SELECT block, relevance{', scope_ids' if scoped else ''} FROM entry_blocks"  # noqa: S608
        " WHERE block <= ? ORDER BY block",
        (mark,),
    )
    for row in rows:
        block, values = int(row[0]), np.frombuffer(row[1], "<f8")
        absent = np.isnan(values)
        if relevance:
            halves = values.astype(np.float32) * _HALF  # binary32 relevance times binary32 0.5
        else:
            halves = np.zeros(len(values), np.float32)
        halves[absent] = -np.inf
        half[block : block + len(halves)] = halves
        scopes = np.frombuffer(row[2], "<i8") if scoped else np.zeros(len(values), np.int64)
        scope_of[block : block + len(scopes)] = np.where(absent, -1, scopes)
    window = (change, mark)
    for seq, value, scope_id in connection.all(
        "SELECT seq, relevance, scope_id FROM entries"
        " WHERE seq IN (SELECT seq FROM changes WHERE id <= ? AND seq <= ?)",
        window,
    ):
        half[seq] = np.float32(value) * _HALF if relevance else np.float32(0)
        scope_of[seq] = scope_id
    gone = [
        int(seq)
        for (seq,) in connection.all(
            "SELECT DISTINCT seq FROM changes c WHERE c.id <= ? AND c.seq <= ? AND NOT EXISTS"
            " (SELECT 1 FROM entries e WHERE e.seq = c.seq)",
            window,
        )
    ]
    half[gone] = -np.inf
    scope_of[gone] = -1
