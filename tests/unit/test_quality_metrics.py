"""The quality benchmark's metrics and loaders, on a tiny hand-made conversation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchmarks import quality
from benchmarks.quality import Question, Turn

from tests.embedders import WordsEmbedder

TURNS = [
    {"id": "D1:1", "speaker": "Ann", "text": "I adopted a puppy named Rex."},
    {"id": "D1:2", "speaker": "Bob", "text": "Nice! I started painting sunsets."},
    {"id": "D2:1", "speaker": "Ann", "text": "Rex chewed my running shoes."},
    {"id": "D2:2", "speaker": "Bob", "text": "I sold a painting last week."},
]
QA = [
    {"question": "What is the name of Ann's puppy?", "evidence": ["D1:1"], "category": 1},
    {"question": "What does Bob paint?", "evidence": ["D1:2", "D2:2"], "category": 4},
    {"question": "Who is Carl?", "evidence": ["D9:9"], "category": 2},  # names no turn
    {"question": "What did Ann's cat chew?", "evidence": [], "category": 5},  # adversarial
]


def test_hit_is_an_evidence_turn_among_the_first_k():
    evidence = frozenset({"D1:2", "D2:2"})
    assert not quality.hit(["D1:1", "D2:2"], evidence, 1)
    assert quality.hit(["D1:1", "D2:2"], evidence, 2)
    assert not quality.hit([], evidence, 5)


def test_recall_is_the_share_of_evidence_among_the_first_k():
    evidence = frozenset({"D1:2", "D2:2"})
    assert 0.0 == quality.recall(["D1:1"], evidence, 5)
    assert 0.5 == quality.recall(["D2:2", "D1:1", "D1:2"], evidence, 2)
    assert 1.0 == quality.recall(["D2:2", "D1:1", "D1:2"], evidence, 3)


def test_measure_averages_over_the_questions():
    questions = [Question("q1", frozenset({"a"})), Question("q2", frozenset({"b", "c"}))]
    rankings = [["a"], ["x", "x", "x", "x", "b", "x", "x", "x", "x", "c"]]
    assert quality.Quality(
        hit_1=0.5, hit_5=1.0, hit_10=1.0, recall_5=0.75, recall_10=1.0, questions=2
    ) == quality.measure(rankings, questions)


def test_measure_needs_one_ranking_per_question():
    with pytest.raises(ValueError, match="1 rankings for 2 questions"):
        quality.measure([["a"]], [Question("q", frozenset({"a"}))] * 2)


def test_dev_file_and_locomo10_forms_load_alike(tmp_path):
    dev = tmp_path / "dev.json"
    dev.write_text(
        json.dumps({"conversations": [{"conversation": "7", "turns": TURNS, "questions": QA}]})
    )
    original = tmp_path / "locomo10.json"
    sessions = {
        "speaker_a": "Ann",
        "session_2_date_time": "8 May 2023",
        "session_2": [{**turn, "dia_id": turn["id"]} for turn in TURNS[2:]],
        "session_1": [{**turn, "dia_id": turn["id"]} for turn in TURNS[:2]],
    }
    original.write_text(json.dumps([{"sample_id": "7", "conversation": sessions, "qa": QA}]))

    expected = quality.Conversation(
        name="7",
        turns=[Turn(turn["id"], f"{turn['speaker']}: {turn['text']}") for turn in TURNS],
        questions=[
            Question("What is the name of Ann's puppy?", frozenset({"D1:1"})),
            Question("What does Bob paint?", frozenset({"D1:2", "D2:2"})),
        ],
        left_out=1,
    )
    assert [expected] == quality.load(dev)
    assert [expected] == quality.load(original)


async def test_the_store_and_bm25s_answer_turn_ids(tmp_path):
    dev = tmp_path / "dev.json"
    dev.write_text(
        json.dumps({"conversations": [{"conversation": "7", "turns": TURNS, "questions": QA}]})
    )
    conversations = quality.load(dev)
    answers = await quality.store_rankings(conversations, quality.STORE_RANKINGS)
    assert ["reference", "bm25", "bm25, context=0"] == list(answers)
    assert 2 == len(answers["reference"])
    assert all(len(ranked) <= quality.LIMIT for ranked in answers["reference"])
    assert "D1:1" in answers["reference"][0]
    # bm25s answers only the turns that share a stem with the question ("ann", "puppi";
    # "bob", "paint"), best first; the last two score alike and come in turn order.
    assert [["D1:1", "D2:1"], ["D1:2", "D2:2"]] == quality.bm25s_rankings(conversations)
    assert quality.bm25s_rankings(conversations) == answers["bm25, context=0"]  # the store's
    assert answers["bm25"] == answers["bm25, context=0"]  # two turns: no stream to measure


async def test_the_vector_rankings_are_the_brute_force_cosine_and_its_fusion(tmp_path):
    dev = tmp_path / "dev.json"
    dev.write_text(
        json.dumps({"conversations": [{"conversation": "7", "turns": TURNS, "questions": QA}]})
    )
    conversations = quality.load(dev)
    texts = [turn.memory for turn in conversations[0].turns]
    texts += [question.text for question in conversations[0].questions]
    vectors = WordsEmbedder(dims=8).embed_documents(texts)
    np.savez(tmp_path / "vectors.npz", texts=np.array(texts), vectors=vectors)
    embedder = quality.LookupEmbedder(tmp_path / "vectors.npz")
    found = await quality.store_rankings(conversations, quality.EMBEDDING_RANKINGS, embedder)
    assert found["vector"] == quality.cosine_rankings(conversations, embedder)
    # Each question's best hybrid answer is an evidence turn (both share its words).
    questions = conversations[0].questions
    assert all(
        ranked[0] in question.evidence
        for ranked, question in zip(found["hybrid"], questions, strict=True)
    )
