"""The command line with an embedder: recorded by ``init``, used by every later command.

The embedders are the test suite's fakes, made from specs of a known provider
(``tests.embedders.fake_provider``) or given as ``python:tests.embedders:...``:
no model.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import open_store
from tests.embedders import fake_provider

from .conftest import assert_fails, json_score

SPEC = "fastembed:fake-words"
NEXT = "fastembed:fake-next"
CODE = "python:tests.embedders:WordsEmbedder"


@pytest.fixture(autouse=True)
def _fake_models(monkeypatch):
    fake_provider(monkeypatch)


def _library_search(db: Path, query: str, ranking: str) -> list[tuple[str, float]]:
    async def work() -> list[tuple[str, float]]:
        async with open_store(db, embedder=SPEC) as store:
            found = await store.retrieve_scored(query, 10, ranking=ranking)
        return [(str(entry.id), json_score(score, ranking)) for entry, score in found]

    return asyncio.run(work())


def _stats(on_db) -> dict[str, Any]:
    result = on_db("stats", "--json")
    assert 0 == result.exit_code, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _add(on_db, *args: str) -> None:
    for text in ("deploy failed on the cache node", "the cache warms at noon", "tests are green"):
        result = on_db(*args, "add", text, "--category", "fact")
        assert 0 == result.exit_code, result.output


def test_init_records_the_embedder_and_later_commands_use_it(on_db, db):
    result = on_db("init", "--embedder", SPEC)
    assert 0 == result.exit_code, result.output
    assert f"Recorded the embedder {SPEC} (16 dims)" in result.stdout
    _add(on_db)
    assert _stats(on_db)["embedder"] == {
        "name": SPEC,
        "dims": 16,
        "spec": SPEC,
        "pending": 0,
    }
    for ranking in ("vector", "hybrid"):
        result = on_db("search", "cache deploy", "--ranking", ranking, "--json")
        assert 0 == result.exit_code, result.output
        shown = [(entry["id"], entry["score"]) for entry in json.loads(result.stdout)]
        assert shown == _library_search(db, "cache deploy", ranking)
        assert len(shown) == 2  # "tests are green" shares nothing with the query: not listed
    table = on_db("search", "cache deploy", "--ranking", "hybrid")
    assert "deploy failed on the cache node" in table.stdout


def test_init_on_a_store_with_entries_makes_their_vectors(on_db):
    _add(on_db)
    result = on_db("init", "--embedder", SPEC)
    assert 0 == result.exit_code, result.output
    assert "made the vectors of 3 memories" in result.stdout
    assert _stats(on_db)["embedder"]["pending"] == 0


def test_embedder_none_leaves_entries_pending_until_embed_pending(on_db):
    on_db("init", "--embedder", SPEC)
    _add(on_db, "--embedder", "none")
    assert _stats(on_db)["embedder"]["pending"] == 3
    table = on_db("stats")
    assert "embed-pending makes their vectors" in table.stdout
    result = on_db("embed-pending", "--batch-size", "2")
    assert 0 == result.exit_code, result.output
    assert "Made the vectors of 3 pending memories" in result.stdout
    assert _stats(on_db)["embedder"]["pending"] == 0


def test_the_embedder_variable_gives_the_embedder(on_db, monkeypatch):
    monkeypatch.setenv("LOOPCTL_MEMORY_EMBEDDER", SPEC)
    _add(on_db)
    assert _stats(on_db)["embedder"]["spec"] == SPEC
    monkeypatch.delenv("LOOPCTL_MEMORY_EMBEDDER")
    result = on_db("search", "cache", "--ranking", "vector", "--json")  # now from the record
    assert 0 == result.exit_code, result.output
    assert ["the cache warms at noon", "deploy failed on the cache node"] == sorted(
        (entry["memory"] for entry in json.loads(result.stdout)), reverse=True
    )  # "tests are green" shares nothing with the query: scored 0, not listed


def test_vector_search_without_an_embedder_says_how_to_get_one(on_db):
    _add(on_db)
    result = on_db("search", "cache", "--ranking", "vector")
    assert 1 == result.exit_code
    assert "records no embedder" in result.output
    assert "init --embedder SPEC" in result.output
    assert _stats(on_db)["embedder"] is None
    assert 1 == on_db("embed-pending").exit_code


def test_another_embedder_is_refused_naming_both(on_db):
    on_db("init", "--embedder", SPEC)
    result = on_db("--embedder", NEXT, "add", "x", "--category", "fact")
    assert 1 == result.exit_code
    assert f"by '{SPEC}' (16 dims), not '{NEXT}' (24 dims)" in result.output
    assert "reembed" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_reembed_replaces_the_model_and_records_it(on_db, db):
    on_db("init", "--embedder", SPEC)
    _add(on_db)
    result = on_db("reembed", NEXT, "--batch-size", "2")
    assert 0 == result.exit_code, result.output
    assert f"Made 3 vectors with {NEXT} (24 dims)" in result.stdout
    assert _stats(on_db)["embedder"] == {
        "name": NEXT,
        "dims": 24,
        "spec": NEXT,
        "pending": 0,
    }
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM vectors").fetchone() == (3,)
    result = on_db("search", "cache", "--ranking", "hybrid", "--json")
    assert 0 == result.exit_code, result.output
    assert ["the cache warms at noon", "deploy failed on the cache node"] == sorted(
        (entry["memory"] for entry in json.loads(result.stdout)), reverse=True
    )  # "tests are green" shares nothing with the query: scored 0, not listed


def test_a_recorded_spec_that_cannot_be_made_is_one_line_and_none_gets_around_it(on_db, db):
    on_db("init", "--embedder", SPEC)
    _add(on_db)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE embedders SET spec = 'fastembed:not-a-model-here'")
    result = on_db("search", "cache")
    assert 1 == result.exit_code
    assert "'fastembed:not-a-model-here' cannot be made" in result.output
    assert "--embedder none" in result.output  # says what works
    assert 0 == on_db("--embedder", "none", "search", "cache").exit_code
    assert 0 == on_db("stats").exit_code  # stats needs no embedder


def test_a_recorded_python_spec_runs_only_when_given(on_db, monkeypatch):
    result = on_db("init", "--embedder", CODE)
    assert 0 == result.exit_code, result.output
    result = on_db("add", "x", "--category", "fact")
    assert 1 == result.exit_code
    assert f"this store's embedder '{CODE}' is code to run" in result.output
    assert f"--embedder {CODE}" in result.output  # says what works: the spec itself,
    assert "--embedder none" in result.output  # or none
    assert 0 == on_db("--embedder", "none", "add", "y", "--category", "fact").exit_code
    assert 0 == on_db("--embedder", CODE, "add", "x", "--category", "fact").exit_code
    monkeypatch.setenv("LOOPCTL_MEMORY_EMBEDDER", CODE)
    result = on_db("search", "x", "--ranking", "vector", "--json")
    assert 0 == result.exit_code, result.output
    assert ["x"] == [hit["memory"] for hit in json.loads(result.stdout)]  # "y": nothing shared


def test_index_builds_no_graph_for_vectors_scored_faster_exactly(on_db, db):
    on_db("init", "--embedder", SPEC)
    _add(on_db)
    result = on_db("index")
    assert 0 == result.exit_code, result.output
    assert "No graph is needed: up to 50,000 vectors" in result.stdout
    assert not db.with_name(f"{db.name}-vectors").exists()
    result = on_db("search", "cache deploy", "--ranking", "vector", "--json")
    assert 0 == result.exit_code, result.output
    shown = [(entry["id"], entry["score"]) for entry in json.loads(result.stdout)]
    assert shown == _library_search(db, "cache deploy", "vector")


def test_index_without_an_embedder_says_how_to_get_one(on_db):
    _add(on_db)
    result = on_db("index")
    assert 1 == result.exit_code
    assert "records no embedder" in result.output


def test_a_python_spec_finds_a_module_in_the_current_directory(tmp_path):
    """The console script does not search the current directory; the spec does, last."""
    (tmp_path / "my_words.py").write_text(
        "from tests.embedders import WordsEmbedder\n\nWords = WordsEmbedder\n", "utf-8"
    )
    root = Path(__file__).resolve().parents[2]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root)  # tests.embedders only: my_words is not on it
    command = [str(Path(sys.executable).parent / "loopctl-memory"), "--db", "m.db"]
    spec = ["--embedder", "python:my_words:Words"]
    done = subprocess.run(
        [*command, *spec, "add", "cache deploy", "-c", "fact"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    found = subprocess.run(
        [*command, *spec, "search", "cache", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ["cache deploy"] == [hit["memory"] for hit in json.loads(found.stdout)]
    missing = subprocess.run(
        [*command, "--embedder", "python:no_such_module:Words", "search", "cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert 1 == missing.returncode
    assert f"the current directory, {tmp_path}" in missing.stderr


def test_init_with_an_embedder_that_cannot_be_made_creates_nothing(on_db, db):
    result = on_db("init", "--embedder", "fastembed:not-a-model-here")
    line = assert_fails(result, 1, "fastembed", "nothing was created")
    assert "Created" not in result.stdout, line
    assert not db.exists()
    assert 0 == on_db("init").exit_code
    before = db.read_bytes()
    assert_fails(on_db("init", "--embedder", "fastembed:not-a-model-here"), 1, "nothing was")
    assert before == db.read_bytes()
    assert _stats(on_db)["embedder"] is None
