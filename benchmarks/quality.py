"""Retrieval quality on LoCoMo: how often a ranking finds the turns that answer a question.

LoCoMo (snap-research/locomo) holds long conversations and questions about
them, each question with the ids of the turns that hold its answer (its
evidence). Each turn is stored as one memory ``"Speaker: text"`` (category
FACT, relevance 1.0, in order) in one scope per conversation of a store opened
through the public API; each question of categories 1-4 (single-hop,
multi-hop, temporal, open-domain) is asked with ``retrieve(question, 10)`` in
its conversation's scope, once per ranking mode in :data:`STORE_RANKINGS`.

- hit@k: the share of questions with an evidence turn among the first k answers.
- recall@k: the mean share of a question's evidence turns among its first k answers.

Evidence ids are taken as given; a question none of whose ids names a turn of
its conversation cannot be found by any ranking and is left out (the count is
reported). One more row does not use the store: ``bm25s`` itself (Lucene BM25,
k1 0.9, b 0.4, over ``bm25s.tokenize`` tokens with its English stopwords and
PyStemmer's English stemmer) on each conversation's same memory texts, its
positive scores best first, ties in turn order: the ranking the store's BM25
mode is held to.

``--data`` reads the dev file ``../shared/eval/locomo-dev.json`` (``conversations``
with ``turns`` and ``questions``) or LoCoMo's own ``locomo10.json`` (a list of
samples whose ``conversation`` holds ``session_N`` lists of turns with
``dia_id``, ``speaker`` and ``text``, and whose ``qa`` holds ``question``,
``evidence`` and ``category``).

    .venv/bin/python -m benchmarks.quality --data PATH [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer

from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import machine
from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore, open_store
from loopctl_memory.context import Context

LIMIT = 10
"""Answers asked for per question: the largest k measured."""
CATEGORIES = frozenset({1, 2, 3, 4})
"""LoCoMo's single-hop, multi-hop, temporal and open-domain questions (5, adversarial, has
no evidence to find)."""
BM25_K1, BM25_B = 0.9, 0.4
BEGIN, END = "<!-- quality: begin -->", "<!-- quality: end -->"


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: its id (``"D1:3"``) and its memory text."""

    id: str
    memory: str


@dataclass(frozen=True, slots=True)
class Question:
    """A question and the ids of the turns that answer it (those that name a turn)."""

    text: str
    evidence: frozenset[str]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation's turns in order, the questions asked of it, and how many were left out."""

    name: str
    turns: list[Turn]
    questions: list[Question]
    left_out: int


@dataclass(frozen=True, slots=True)
class Quality:
    """What a ranking found over a set of questions (shares in [0, 1])."""

    hit_1: float
    hit_5: float
    hit_10: float
    recall_5: float
    recall_10: float
    questions: int


def hit(ranked: Sequence[str], evidence: frozenset[str], k: int) -> bool:
    """Whether an evidence turn is among the first ``k`` of ``ranked`` (turn ids, best first)."""
    return not evidence.isdisjoint(ranked[:k])


def recall(ranked: Sequence[str], evidence: frozenset[str], k: int) -> float:
    """The share of the (non-empty) ``evidence`` among the first ``k`` of ``ranked``."""
    return len(evidence.intersection(ranked[:k])) / len(evidence)


def measure(rankings: Sequence[Sequence[str]], questions: Sequence[Question]) -> Quality:
    """The quality of ``rankings[i]``, the turn ids answered to ``questions[i]``, over all of them.

    Raises:
        ValueError: not one ranking per question, or no question.

    """
    if len(rankings) != len(questions) or not questions:
        raise ValueError(f"{len(rankings)} rankings for {len(questions)} questions")
    pairs = list(zip(rankings, questions, strict=True))

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values)

    return Quality(
        hit_1=mean([hit(ranked, question.evidence, 1) for ranked, question in pairs]),
        hit_5=mean([hit(ranked, question.evidence, 5) for ranked, question in pairs]),
        hit_10=mean([hit(ranked, question.evidence, 10) for ranked, question in pairs]),
        recall_5=mean([recall(ranked, question.evidence, 5) for ranked, question in pairs]),
        recall_10=mean([recall(ranked, question.evidence, 10) for ranked, question in pairs]),
        questions=len(pairs),
    )


def conversation(name: str, turns: list[Turn], qa: Sequence[dict[str, Any]]) -> Conversation:
    """The conversation with its questions of :data:`CATEGORIES` that have an evidence turn."""
    turn_ids = {turn.id for turn in turns}
    asked = [item for item in qa if item.get("category") in CATEGORIES]
    questions = [
        Question(item["question"], frozenset(item.get("evidence", [])) & turn_ids) for item in asked
    ]
    answerable = [question for question in questions if question.evidence]
    return Conversation(name, turns, answerable, len(questions) - len(answerable))


def _memory(turn: dict[str, Any]) -> str:
    return f"{turn['speaker']}: {turn['text']}"


def _session_number(key: str) -> int | None:
    found = re.fullmatch(r"session_(\d+)", key)
    return int(found.group(1)) if found else None


def _locomo10_conversation(sample: dict[str, Any]) -> Conversation:
    sessions = sample["conversation"]
    numbered = sorted(
        (number, session)
        for key, session in sessions.items()
        if (number := _session_number(key)) is not None
    )
    turns = [Turn(turn["dia_id"], _memory(turn)) for _, session in numbered for turn in session]
    return conversation(str(sample["sample_id"]), turns, sample["qa"])


def load(path: Path) -> list[Conversation]:
    """The conversations of a LoCoMo file: the dev file's form or ``locomo10.json``'s."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return [
            conversation(
                str(item["conversation"]),
                [Turn(turn["id"], _memory(turn)) for turn in item["turns"]],
                item["questions"],
            )
            for item in data["conversations"]
        ]
    return [_locomo10_conversation(sample) for sample in data]


Retrieve = Callable[[SqlMemoryStore, str, int], Awaitable[list[MemoryEntry]]]


def _ranked_by(ranking: str, context: Context | None = None) -> Retrieve:
    async def retrieve(view: SqlMemoryStore, question: str, limit: int) -> list[MemoryEntry]:
        return await view.retrieve(question, limit, ranking=ranking, context=context)

    return retrieve


def _modes(rankings: Sequence[str]) -> list[tuple[str, Retrieve]]:
    """Each ranking as the store ranks by default (context ``"auto"``) and with ``context=0``."""
    modes = []
    for ranking in rankings:
        modes.append((ranking, _ranked_by(ranking)))
        if ranking != "reference":
            modes.append((f"{ranking}, context=0", _ranked_by(ranking, 0.0)))
    return modes


STORE_RANKINGS = _modes(("reference", "bm25"))
"""The store's ranking modes measured: a name, and how to ask a view with it."""


async def store_rankings(
    conversations: Sequence[Conversation],
    rankings: Sequence[tuple[str, Retrieve]],
    embedder: LookupEmbedder | None = None,
    shuffle: int | None = None,
) -> dict[str, list[list[str]]]:
    """Each ranking mode's answers (turn ids) to every question, conversation by conversation.

    ``shuffle``: store each conversation's turns in a random order (this seed's)
    instead of as they were said.
    """
    answers: dict[str, list[list[str]]] = {name: [] for name, _ in rankings}
    async with open_store(":memory:", embedder=embedder) as store:
        for talk in conversations:
            view = store.scope(talk.name)
            turns = list(talk.turns)
            if shuffle is not None:
                random.Random(f"{shuffle}/{talk.name}").shuffle(turns)
            entries = [
                MemoryEntry(MemoryCategory.FACT, turn.memory, relevance=1.0) for turn in turns
            ]
            await view.store_many(entries)
            turn_of = {entry.id: turn.id for entry, turn in zip(entries, turns, strict=True)}
            for name, retrieve in rankings:
                for question in talk.questions:
                    found = await retrieve(view, question.text, LIMIT)
                    answers[name].append([turn_of[entry.id] for entry in found])
    return answers


class LookupEmbedder:
    """Vectors looked up by exact text (``texts``/``vectors`` of an .npz): a model's, without it.

    ``minilm-dev.npz`` holds all-MiniLM-L6-v2's vectors of every text and question of
    the dev set, so the store ranks by that model's meaning and no model is downloaded.
    """

    def __init__(self, path: Path) -> None:
        held = np.load(path)
        self._rows = {text: n for n, text in enumerate(held["texts"].tolist())}
        self._vectors = np.asarray(held["vectors"], np.float32)
        self.name = f"lookup:{path.name}"
        self.dims = int(self._vectors.shape[1])

    def embed_documents(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        return self._vectors[[self._rows[text] for text in texts]]

    def embed_query(self, text: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        vector: np.ndarray[Any, np.dtype[np.float32]] = self._vectors[self._rows[text]]
        return vector


EMBEDDING_RANKINGS = _modes(("vector", "hybrid"))
"""The rankings that need the store's embedder (measured with ``--vectors``)."""


def cosine_rankings(
    conversations: Sequence[Conversation], embedder: LookupEmbedder
) -> list[list[str]]:
    """Brute-force cosine over each conversation's vectors (no store): the vector row's oracle."""
    answers: list[list[str]] = []
    for talk in conversations:
        rows = embedder.embed_documents([turn.memory for turn in talk.turns]).astype(np.float64)
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-30)
        for question in talk.questions:
            query = embedder.embed_query(question.text).astype(np.float64)
            scores = rows @ (query / max(float(np.linalg.norm(query)), 1e-30))
            best_first = np.argsort(-scores, kind="stable")
            kept = [i for i in best_first[:LIMIT] if scores[i] > 0]  # as the store: above 0
            answers.append([talk.turns[i].id for i in kept])
    return answers


def bm25s_rankings(conversations: Sequence[Conversation]) -> list[list[str]]:
    """``bm25s``'s answers (turn ids) to every question, one index per conversation."""
    stemmer = Stemmer.Stemmer("english")

    def tokens(texts: list[str]) -> list[list[str]]:
        cut: list[list[str]] = bm25s.tokenize(
            texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        return cut

    answers: list[list[str]] = []
    for talk in conversations:
        index = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        index.index(tokens([turn.memory for turn in talk.turns]), show_progress=False)
        for query in tokens([question.text for question in talk.questions]):
            if not query:  # bm25s cannot score an empty query; nothing matches it
                answers.append([])
                continue
            scores = index.get_scores(query)
            best_first = np.argsort(-scores, kind="stable")  # stable: ties in turn order
            answers.append([talk.turns[i].id for i in best_first[:LIMIT] if scores[i] > 0])
    return answers


def table(rows: Sequence[tuple[str, Quality]]) -> list[str]:
    """A markdown table: one row per ranking."""
    lines = [
        "| ranking | hit@1 | hit@5 | hit@10 | recall@5 | recall@10 | questions |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {name} | {q.hit_1:.3f} | {q.hit_5:.3f} | {q.hit_10:.3f} | {q.recall_5:.3f}"
        f" | {q.recall_10:.3f} | {q.questions} |"
        for name, q in rows
    ]
    return lines


def section(
    rows: Sequence[tuple[str, Quality]],
    conversations: Sequence[Conversation],
    data: Path,
    command: str,
) -> str:
    """The RESULTS.md section: how it was measured, on what, and the table."""
    turns = sum(len(talk.turns) for talk in conversations)
    left_out = sum(talk.left_out for talk in conversations)
    return "\n".join(
        [
            BEGIN,
            "## Retrieval quality (LoCoMo)",
            "",
            f"- Command: `{command}`",
            f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- Machine: {machine()}",
            f"- Data: `{data.name}` (LoCoMo, snap-research/locomo, CC BY-NC 4.0):"
            f" {len(conversations)} conversations, {turns} turns; the questions of categories"
            f" 1-4, less {left_out} whose evidence names no turn",
            "",
            *table(rows),
            "",
            'One memory `"Speaker: text"` per turn (relevance 1.0), stored in order or shuffled'
            " (the same turns in a random order), one scope per conversation; each question"
            " asked with `retrieve(question, 10)` in its scope, with the store's default"
            ' context (`"auto"`: each scope\'s weight by how coherent its stream is) and with'
            " `context=0`."
            " hit@k: the share of questions with an evidence turn among the first k answers;"
            " recall@k: the mean share of a question's evidence turns among them. The `bm25s`"
            f" row is no store: `bm25s` itself (Lucene BM25, k1 {BM25_K1}, b {BM25_B}, its"
            " English stopwords and PyStemmer's English stems) over the same texts, positive"
            " scores only, ties in turn order. The `vector` and `hybrid` rows (with `--vectors`)"
            " are the same store's, opened with an embedder that looks the texts'"
            " all-MiniLM-L6-v2 vectors up in the .npz; hybrid is `0.5 * bm25 / max(bm25) + 0.5 *"
            " min-max-scaled cosine` (`loopctl_memory.fusion`). The brute-force row is numpy's"
            " cosine over the same vectors.",
            END,
        ]
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Measure every ranking on ``--data`` and print (and write) the section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality")
    parser.add_argument("--data", type=Path, required=True, help="locomo-dev.json or locomo10.json")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    parser.add_argument(
        "--vectors",
        type=Path,
        help="an .npz of texts and their vectors (minilm-dev.npz): adds the vector and hybrid rows",
    )
    parser.add_argument(
        "--order",
        choices=("in-order", "shuffled", "both"),
        default="both",
        help="store the turns as said, in a random order, or measure both (the default)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the random order's seed (default 1)")
    args = parser.parse_args(argv)
    conversations = load(args.data)
    questions = [question for talk in conversations for question in talk.questions]
    orders: list[tuple[str, int | None]] = []
    if args.order != "shuffled":
        orders.append(("in order", None))
    if args.order != "in-order":
        orders.append((f"shuffled, seed {args.seed}", args.seed))
    embedder = LookupEmbedder(args.vectors) if args.vectors is not None else None
    rows: list[tuple[str, Quality]] = []
    for label, seed in orders:
        answers = asyncio.run(store_rankings(conversations, STORE_RANKINGS, shuffle=seed))
        rows += [
            (f"`{name}` ({label})", measure(answers[name], questions)) for name, _ in STORE_RANKINGS
        ]
        if embedder is not None:
            found = asyncio.run(
                store_rankings(conversations, EMBEDDING_RANKINGS, embedder, shuffle=seed)
            )
            rows += [
                (f"`{name}` ({label})", measure(found[name], questions))
                for name, _ in EMBEDDING_RANKINGS
            ]
    rows.append(
        (
            f"`bm25s` k1 {BM25_K1}, b {BM25_B} (no store)",
            measure(bm25s_rankings(conversations), questions),
        )
    )
    if embedder is not None and args.vectors is not None:
        rows.append(
            (
                f"cosine, brute force (no store; `{args.vectors.name}`)",
                measure(cosine_rankings(conversations, embedder), questions),
            )
        )
    command = " ".join(["python -m benchmarks.quality", *(argv or sys.argv[1:])])
    text = section(rows, conversations, args.data, command)
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)
        print(f"[quality] wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
