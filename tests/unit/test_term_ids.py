"""A store's writers keep the term ids they have seen committed, and only those."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, event, text

from loopctl_memory import open_store
from loopctl_memory.sql.lexical.term_ids import KnownTerms


@pytest.fixture
def engine(tmp_path: Path):
    path = tmp_path / "terms.db"

    async def create() -> None:
        async with open_store(path):
            pass

    asyncio.run(create())
    made = create_engine(f"sqlite:///{path}")
    yield made
    made.dispose()


def _stored(connection: Connection) -> dict[str, int]:
    rows = connection.execute(text("SELECT word, id FROM words"))
    return {str(word): int(id_) for word, id_ in rows}


def test_terms_get_ids_and_keep_them(engine):
    known = KnownTerms()
    with engine.begin() as connection:
        first = known.ids(connection, "words", "word", ["alpha", "beta"])[0].tolist()
    with engine.begin() as connection:
        again = known.ids(connection, "words", "word", ["alpha", "beta", "gamma"])[0].tolist()
        stored = _stored(connection)
    assert first == again[:2]
    assert [stored["alpha"], stored["beta"], stored["gamma"]] == again
    assert len(set(again)) == 3


def test_a_term_already_learnt_costs_no_statement(engine):
    known = KnownTerms()
    with engine.begin() as connection:
        known.ids(connection, "words", "word", ["alpha"])  # created here: not yet learnt
    with engine.begin() as connection:
        known.ids(connection, "words", "word", ["alpha"])  # committed before: learnt now
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    with engine.begin() as connection:
        assert [_stored(connection)["alpha"]] == known.ids(connection, "words", "word", ["alpha"])[
            0
        ].tolist()
    assert not [s for s in statements if "words" in s and "SELECT word, id" not in s]


def test_an_id_given_out_by_a_rolled_back_write_is_never_used_again(engine):
    known = KnownTerms()
    with engine.connect() as connection:
        transaction = connection.begin()
        (lost,) = known.ids(connection, "words", "word", ["alpha"])[0].tolist()
        transaction.rollback()
    with engine.begin() as connection:  # another writer takes the id back for its own term
        connection.execute(text("INSERT INTO words (word) VALUES ('beta')"))
        assert lost == _stored(connection)["beta"]
    with engine.begin() as connection:
        alpha, beta = known.ids(connection, "words", "word", ["alpha", "beta"])[0].tolist()
        stored = _stored(connection)
    assert (stored["alpha"], stored["beta"]) == (alpha, beta)
    assert alpha != lost


def test_a_full_cache_starts_again_and_still_answers(engine):
    known = KnownTerms(kept=2)
    terms = [f"w{n:02}" for n in range(5)]
    for start in range(5):
        with engine.begin() as connection:
            got = known.ids(connection, "words", "word", terms[: start + 1])[0].tolist()
            stored = _stored(connection)
        assert [stored[term] for term in terms[: start + 1]] == got
