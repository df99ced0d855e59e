"""examples/langgraph_memory.py, run as its docstring says: memory across runs, processes, users.

Each run of the example is a process of its own (as a user runs it) on one
database: what the first process is told, a later process recalls, for that
user only.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_BACKENDS, shared_target

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_memory.py"


def _start(
    target: str | Path, user: str, *messages: str, as_json: bool = True
) -> subprocess.Popen[str]:
    """The example on ``target`` as ``user``: a run of its graph a message."""
    options = ["--db", str(target), "--user", user, *(["--json"] if as_json else [])]
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *options, *messages],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _outputs(*children: subprocess.Popen[str]) -> list[list[str]]:
    """Each child's lines, once all have ended (each must succeed)."""
    done = [child.communicate(timeout=120) for child in children]
    for child, (_, err) in zip(children, done, strict=True):
        assert 0 == child.returncode, err
    return [out.splitlines() for out, _ in done]


def _states(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_what_one_process_is_told_the_next_recalls_for_that_user_only(backend, tmp_path):
    target = asyncio.run(shared_target(backend, tmp_path))
    [first] = _outputs(_start(target, "ada", "I like green tea.", "What do I like to drink?"))
    told, asked = _states(first)
    assert ["I like green tea"] == told["remembered"]
    assert "Noted: I like green tea." == told["answer"]
    # The next run of the graph in the same process finds it in the store.
    assert ["I like green tea"] == asked["recalled"]

    # Two more processes at once, both only reading: Ada's recalls it, Bob's has nothing.
    ada = _start(target, "ada", "What do I like to drink?", "What is my name?")
    bob = _start(target, "bob", "What do I like to drink?", as_json=False)
    ada_lines, bob_lines = _outputs(ada, bob)
    later, unknown = _states(ada_lines)
    assert {
        "user": "ada",
        "message": "What do I like to drink?",
        "answer": "You told me: I like green tea.",
        "recalled": ["I like green tea"],
    } == later
    assert [] == unknown["recalled"]  # no word of the question ranks the fact
    assert ["I don't know: you haven't told me."] == bob_lines
