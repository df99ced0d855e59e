"""The graph build's cost against its recall: usearch alone, at each ``expansion_add``.

The store's graph (``sql/ranking/graph.py``: i8, cosine, connectivity 16) built
by usearch with every core (``threads=0``) from ``--size`` natural entries'
``CalibratedVectors``, for each ``expansion_add``; then 200 natural queries,
each asking the graph for each number of candidates and rescoring them exactly
(as the store does): recall@10 against numpy brute force, and the p50 ms of
search + rescore.

    .venv/bin/python -m benchmarks.graph_build_bench [--size 1m] [--expansions 64,128]
        [--candidates 1024,1536,2048]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import numpy as np
from usearch.index import Index

from benchmarks import workloads
from benchmarks.sizes import parse_size
from benchmarks.vector_serving import CalibratedVectors
from loopctl_memory.sql.ranking.graph import CONNECTIVITY

_QUERIES = 200
_TOP = 10


def main(argv: Sequence[str] | None = None) -> None:
    """Build at each expansion, search with each breadth, print a line each."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.graph_build_bench")
    parser.add_argument("--size", type=parse_size, default=1_000_000)
    parser.add_argument("--expansions", default="64,128")
    parser.add_argument("--candidates", default="1024,1536,2048")
    args = parser.parse_args(argv)
    size = args.size
    made = CalibratedVectors()
    vectors = made.embed_documents([entry.memory for entry in workloads.entries("natural", size)])
    queries = made.embed_documents(workloads.queries("natural", _QUERIES))
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :_TOP]
    for expansion in (int(text) for text in args.expansions.split(",")):
        graph = Index(
            ndim=vectors.shape[1],
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=expansion,
        )
        began = time.perf_counter()
        graph.add(np.arange(size, dtype=np.uint64), vectors, threads=0)
        built = time.perf_counter() - began
        for breadth in (int(text) for text in args.candidates.split(",")):
            hits, timings = 0, []
            for query, wanted in zip(queries, exact, strict=True):
                began = time.perf_counter()
                found = np.asarray(graph.search(query, breadth, threads=1).keys, np.int64)
                best = found[np.argsort(-(vectors[found] @ query))[:_TOP]]
                timings.append(time.perf_counter() - began)
                hits += len(set(best.tolist()) & set(wanted.tolist()))
            print(
                f"{size:,} vectors, expansion_add {expansion}: build {built:.1f} s;"
                f" {breadth} candidates: recall@10 {hits / (_QUERIES * _TOP):.4f},"
                f" search + rescore p50 {statistics.median(timings) * 1e3:.2f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
