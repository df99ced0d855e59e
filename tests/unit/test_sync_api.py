"""The blocking store forwards the whole async API: one added to one side only fails here."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from loopctl_memory import SqlMemoryStore, open_store, sync
from loopctl_memory.sync import SyncMemoryStore

# What the async store has that the blocking one leaves out, and why.
NOT_FORWARDED = {
    "engine": "the async engine is of no use without the store's own event loop",
    "over": "how open_store builds the async store; sync.open_store builds the blocking one",
    "get_by_key_here": "the blocking get_by_key is it, read on the calling thread",
    "reads_here": "whether get_by_key_here can answer: the blocking store asks it itself",
}


def _public(cls: type) -> dict[str, Any]:
    return {
        name: inspect.getattr_static(cls, name) for name in dir(cls) if not name.startswith("_")
    }


def _parameters(function: Any) -> list[tuple[str, Any, Any, Any]]:
    signature = inspect.signature(function, eval_str=True)
    return [
        (parameter.name, parameter.kind, parameter.default, parameter.annotation)
        for parameter in signature.parameters.values()
    ]


ASYNC_API = _public(SqlMemoryStore)
FORWARDED = sorted(set(ASYNC_API) - set(NOT_FORWARDED))


def test_what_is_not_forwarded_is_still_in_the_async_api():
    assert set(NOT_FORWARDED) <= set(ASYNC_API)


@pytest.mark.parametrize("name", FORWARDED)
def test_the_blocking_store_has_each_public_name_of_the_async_one(name):
    assert hasattr(SyncMemoryStore, name), f"SyncMemoryStore lacks {name}"
    mine, theirs = inspect.getattr_static(SyncMemoryStore, name), ASYNC_API[name]
    assert isinstance(theirs, property) == isinstance(mine, property), name


@pytest.mark.parametrize(
    "name", [name for name in FORWARDED if not isinstance(ASYNC_API[name], property)]
)
def test_each_forwarded_method_takes_the_same_parameters(name):
    theirs = _parameters(getattr(SqlMemoryStore, name))
    mine = _parameters(getattr(SyncMemoryStore, name))
    assert theirs == mine


def test_the_async_and_blocking_open_store_take_the_same_options():
    assert _parameters(open_store) == _parameters(sync.open_store)
