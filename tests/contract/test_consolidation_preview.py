"""``preview_consolidation``: what a pass would merge and prune, and why, with nothing written.

On every SQL backend, view and the blocking store; the oracle is the pass itself.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loopctl_memory import ConsolidationConfig, InvalidArgumentError, MemoryCategory, MemoryEntry
from tests.conftest import BACKENDS

NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(params=[backend for backend in BACKENDS if backend != "reference"])
def backend(request: pytest.FixtureRequest) -> str:
    """The SQL backends: the reference port (the oracle of ranking) has no preview."""
    return str(request.param)


def _entry(text: str, **fields: object) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text, created_at=NOW, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("full", [False, True])
async def test_the_preview_says_what_the_pass_then_does(store_factory, full):
    store = await store_factory(clock=lambda: NOW)
    weak = _entry("deploy uses blue green switch", relevance=0.2)
    strong = _entry("deploy uses blue green switch now", relevance=0.9, validated=True)
    faint = _entry("an old note nobody reads", relevance=0.01)
    await store.store_many([weak, strong, faint])
    config = ConsolidationConfig.full() if full else ConsolidationConfig()

    preview = await store.preview_consolidation(config)
    assert 3 == await store.count()
    assert ["stored"] * 3 == [event.event for event in await store.history()]
    assert [(faint.id, "relevance 0.01 is below the floor 0.05")] == [
        (entry.id, why) for entry, why in preview.pruned
    ]
    expected_merges = [(weak.id, strong.id)] if full else []
    assert expected_merges == [(entry.id, into.id) for entry, into in preview.merged]
    assert preview.stats == await store.consolidate(config)
    assert await store.get(faint.id) is None


async def test_the_preview_names_a_prune_on_quality(store_factory):
    store = await store_factory(clock=lambda: NOW)
    stale = MemoryEntry(
        MemoryCategory.WORKING,
        "scratch",
        relevance=0.06,
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
    )
    await store.store(stale)
    preview = await store.preview_consolidation(
        ConsolidationConfig(prune_on_quality=True, prune_floor=0.1)
    )
    ((entry, why),) = preview.pruned
    assert entry.id == stale.id
    assert why.startswith("relevance 0.06 is below the floor 0.1")
    preview = await store.preview_consolidation(
        ConsolidationConfig(prune_on_quality=True, prune_floor=0.05)
    )
    ((entry, why),) = preview.pruned
    assert why.startswith("quality ")
    assert why.endswith("is below the floor 0.05")


async def test_the_preview_refuses_what_is_not_a_config(store_factory):
    store = await store_factory()
    with pytest.raises(InvalidArgumentError):
        await store.preview_consolidation("full")
