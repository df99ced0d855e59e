"""``newest_page``: a person pages through a view's memories, newest stored first."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from loopctl_memory import InvalidArgumentError, MemoryCategory, MemoryEntry, MemoryFilter
from tests.conftest import BACKENDS


@pytest.fixture(params=[backend for backend in BACKENDS if backend != "reference"])
def backend(request: pytest.FixtureRequest) -> str:
    """The SQL backends (paging by cursor is theirs)."""
    return str(request.param)


async def test_pages_cover_every_memory_once_newest_first(store_factory):
    store = await store_factory()
    texts = [f"note {number}" for number in range(23)]
    await store.store_many(
        [
            MemoryEntry(MemoryCategory.FACT, text, tags=["odd"] if n % 2 else [])
            for n, text in enumerate(texts)
        ]
    )
    await store.scope("below").store(MemoryEntry(MemoryCategory.FACT, "a child's"))
    seen: list[str] = []
    before = None
    while True:
        page, before = await store.newest_page(5, before=before)
        assert len(page) <= 5
        seen += [entry.memory for _, entry in page]
        if before is None:
            break
    assert texts[::-1] == seen
    below, _ = await store.with_descendants().newest_page(2)
    assert [("below", "a child's"), ("", "note 22")] == [(s, e.memory) for s, e in below]
    odd, after = await store.newest_page(20, filter=MemoryFilter(tags_any=["odd"]))
    assert ([f"note {n}" for n in range(21, 0, -2)], None) == ([e.memory for _, e in odd], after)


@pytest.mark.parametrize(
    "arguments", [{"limit": 0}, {"limit": 5, "before": "x"}, {"limit": 5, "before": "0"}]
)
async def test_a_bad_page_is_refused(store_factory, arguments):
    store = await store_factory()
    with pytest.raises(InvalidArgumentError):
        await store.newest_page(**arguments)


async def test_memories_are_counted_by_the_day_they_were_created(store_factory):
    store = await store_factory()
    days = [datetime(2026, 3, day, hour, tzinfo=UTC) for day, hour in ((1, 0), (1, 23), (4, 12))]
    await store.store_many(
        [MemoryEntry(MemoryCategory.FACT, f"on {when}", created_at=when) for when in days]
    )
    assert [(date(2026, 3, 1), 2), (date(2026, 3, 4), 1)] == await store.created_per_day()
    assert [] == await store.scope("nobody").created_per_day()
