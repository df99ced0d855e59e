"""Scope names: ``/``-separated paths such as ``"acme/support/agent-7"``; ``""`` is the root.

A store's entries each belong to one scope. A view of a scope reads its own
entries, or (with ``descendants``) also those of every scope below it, and
writes into its own. Names given to a view are relative to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopctl_memory.errors import InvalidArgumentError

MAX_LENGTH = 255
"""The longest scope name, in characters."""


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid non-empty scope name.

    Raises:
        InvalidArgumentError: it is not a str, is empty, longer than 255
            characters, has an empty segment (``"a//b"``, ``"/a"``, ``"a/"``)
            or a ``.`` or ``..`` one (``"../etc"``), or cannot be encoded as UTF-8.

    """
    if not isinstance(name, str):
        raise InvalidArgumentError(f"a scope name is a str, not {type(name).__name__}")
    if not name:
        raise InvalidArgumentError(
            "a scope name cannot be empty (the root store is the root scope)"
        )
    if len(name) > MAX_LENGTH:
        raise InvalidArgumentError(
            f"a scope name has at most {MAX_LENGTH} characters, not {len(name)}"
        )
    segments = name.split("/")
    if "" in segments:
        raise InvalidArgumentError(f"scope name {name!r} has an empty segment")
    if "." in segments or ".." in segments:  # read as paths, they would leave the scope
        raise InvalidArgumentError(
            f"scope name {name!r} has a '.' or '..' segment: a scope is only ever below another"
        )
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"scope name cannot be encoded as UTF-8: {exc.reason}") from None
    return name


def join(base: str, name: str) -> str:
    """``name`` (relative, ``""`` for ``base`` itself) under ``base``, checked.

    Raises:
        InvalidArgumentError: the joined name is too long.

    """
    if not name:
        return base
    joined = f"{base}/{name}" if base else name
    if len(joined) > MAX_LENGTH:
        raise InvalidArgumentError(f"scope {joined!r} is longer than {MAX_LENGTH} characters")
    return joined


def relative(base: str, name: str) -> str:
    """``name`` as seen from ``base`` (which holds it): ``""`` for ``base`` itself."""
    if name == base:
        return ""
    return name[len(base) + 1 :] if base else name


@dataclass(frozen=True, slots=True)
class Scope:
    """What a view reads and where it writes.

    Attributes:
        name: the scope written into (``""``: the root).
        descendants: whether reads also cover every scope below ``name``.

    """

    name: str = ""
    descendants: bool = False

    def holds(self, other: str) -> bool:
        """Whether the view reads the entries of scope ``other``."""
        if other == self.name:
            return True
        if not self.descendants:
            return False
        return not self.name or other.startswith(f"{self.name}/")

    def narrowed(self, name: str, *, descendants: bool) -> Scope:
        """The view of ``name`` (checked, relative to this one)."""
        return Scope(join(self.name, check_name(name)), descendants)

    @property
    def everything(self) -> bool:
        """Whether the view reads every scope of the store."""
        return self.descendants and not self.name
