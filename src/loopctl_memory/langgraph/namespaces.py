"""LangGraph namespaces as scopes: a tuple of labels is a ``/``-separated scope name.

Every label LangGraph accepts (any non-empty str without ``.`` or NUL) round-trips:
``%`` and ``/`` in a label are written ``%25`` and ``%2F``, so that ``("a/b",)``
and ``("a", "b")`` are different scopes. ``list_namespaces`` matching (prefix and
suffix paths with ``*`` wildcards, ``max_depth``) is LangGraph's own definition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from langgraph.store.base import InvalidNamespaceError, MatchCondition

from loopctl_memory import scopes

_ESCAPED = re.compile("%(25|2F)")
_LABEL_OF = {"25": "%", "2F": "/"}


def scope_of(namespace: Sequence[str]) -> str:
    """The scope name of ``namespace`` (``""`` for the empty one, the root).

    Raises:
        InvalidNamespaceError: the name would be longer than a scope name can be.

    """
    name = "/".join(label.replace("%", "%25").replace("/", "%2F") for label in namespace)
    if len(name) > scopes.MAX_LENGTH:
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)} is too long: its labels joined by '/' (with '%' and"
            f" '/' escaped) have {len(name)} characters, at most {scopes.MAX_LENGTH}"
        )
    return name


def namespace_of(scope: str) -> tuple[str, ...]:
    """The namespace a scope name stands for (the inverse of :func:`scope_of`)."""
    if not scope:
        return ()
    return tuple(
        _ESCAPED.sub(lambda found: _LABEL_OF[found.group(1)], segment)
        for segment in scope.split("/")
    )


def _labels_match(labels: Iterable[str], path: Iterable[str]) -> bool:
    return all(wanted in ("*", label) for label, wanted in zip(labels, path, strict=False))


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` meets a ``list_namespaces`` condition (``*``: any one label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        return _labels_match(namespace, path)
    if condition.match_type == "suffix":
        return _labels_match(reversed(namespace), reversed(path))
    raise ValueError(f"Unsupported match type: {condition.match_type}")


def listed(
    namespaces: Iterable[tuple[str, ...]],
    conditions: Sequence[MatchCondition] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """What ``list_namespaces`` answers of ``namespaces``.

    Those meeting every condition, cut to ``max_depth``, each once, in tuple
    order, ``offset`` skipped and ``limit`` kept.
    """
    kept = [ns for ns in namespaces if all(matches(c, ns) for c in conditions or ())]
    if max_depth is not None:
        kept = list({ns[:max_depth] for ns in kept})
    return sorted(kept)[offset : offset + limit]
