"""A LangGraph graph that remembers what a user told it, across runs and processes.

The graph is compiled with ``LangGraphStore`` (``loopctl_memory.langgraph``),
LangGraph's long-term memory store on a SQLite file or a PostgreSQL database,
so what one run stores, later runs (in this process or another) find. There is
no LLM: a message that states something ("I like green tea") goes to the node
``remember``, which puts each statement in the user's namespace
``("users", USER, "facts")``; any other message ("What do I like to drink?")
goes to ``recall``, which searches that namespace with the message as query
and answers from what it finds. Each node reaches the store as
``runtime.store``; the user is the run's context (``runtime.context.user``).

Run it (``--db`` is a SQLite file's path or a ``postgresql+asyncpg://`` URL;
``--json`` prints one JSON object a message instead of the answers)::

    python examples/langgraph_memory.py --db memory.db --user ada "I like green tea."
    python examples/langgraph_memory.py --db memory.db --user ada "What do I like to drink?"
    python examples/langgraph_memory.py --db memory.db --user bob "What do I like to drink?"

The second run answers "You told me: I like green tea."; Bob was told nothing.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from typing import Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from loopctl_memory.langgraph import LangGraphStore

STATEMENT = re.compile(r"I (like|love|enjoy|prefer) (.+)", re.IGNORECASE)
"""A sentence the graph remembers: "I like green tea" (a question starts otherwise)."""


@dataclass
class Context:
    """What a run is for (the same through the run): the user who speaks."""

    user: str


class State(TypedDict, total=False):
    """The run's state: the message in, the answer out, and what was stored or found."""

    message: str
    answer: str
    remembered: list[str]
    recalled: list[str]


def _statements(message: str) -> list[str]:
    sentences = (sentence.strip() for sentence in re.split(r"[.!?;\n]+", message))
    return [sentence for sentence in sentences if STATEMENT.fullmatch(sentence)]


def _store(runtime: Runtime[Context]) -> BaseStore:
    if runtime.store is None:
        raise RuntimeError("compile the graph with a store: graph.compile(store=...)")
    return runtime.store


def route(state: State) -> Literal["remember", "recall"]:
    """Statements are remembered; anything else is a question."""
    return "remember" if _statements(state["message"]) else "recall"


def remember(state: State, runtime: Runtime[Context]) -> State:
    """Put each statement in the user's namespace, keyed by what it says (a repeat replaces)."""
    store, namespace = _store(runtime), ("users", runtime.context.user, "facts")
    statements = _statements(state["message"])
    for statement in statements:
        key = " ".join(statement.lower().split())
        # index=["text"]: the search ranks by the text alone, not by the whole value's JSON.
        store.put(namespace, key, {"text": statement}, index=["text"])
    return {"answer": "Noted: " + "; ".join(statements) + ".", "remembered": statements}


def recall(state: State, runtime: Runtime[Context]) -> State:
    """Search the user's facts with the message; answer with those that match a word of it."""
    found = _store(runtime).search(
        ("users", runtime.context.user, "facts"), query=state["message"], limit=5
    )
    # Items that no word of the query ranks follow the ranked ones, with score None.
    facts = [str(item.value["text"]) for item in found if item.score is not None]
    if not facts:
        return {"answer": "I don't know: you haven't told me.", "recalled": []}
    return {"answer": "You told me: " + "; ".join(facts) + ".", "recalled": facts}


def build(store: BaseStore) -> CompiledStateGraph[State, Context, State, State]:
    """The graph: START -> remember or recall -> END, compiled with ``store``."""
    graph = StateGraph(State, context_schema=Context)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_conditional_edges(START, route)
    graph.add_edge("remember", END)
    graph.add_edge("recall", END)
    return graph.compile(store=store)


def main() -> None:
    """Run the graph once a message given, on the store ``--db`` names, as ``--user``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", default="memory.db", help="SQLite file or PostgreSQL URL")
    parser.add_argument("--user", default="me", help="whose memory (default: me)")
    parser.add_argument("--json", action="store_true", help="print one JSON object a message")
    parser.add_argument("messages", nargs="+", metavar="MESSAGE")
    args = parser.parse_args()
    # Other processes may be writing the same memory: wait up to 30 s for their lock.
    with LangGraphStore.from_conn_string(args.db, busy_timeout=30) as store:
        graph = build(store)
        for message in args.messages:
            state = graph.invoke({"message": message}, context=Context(user=args.user))
            if args.json:
                print(json.dumps({"user": args.user, **state}))
            else:
                print(state["answer"])


if __name__ == "__main__":
    main()
