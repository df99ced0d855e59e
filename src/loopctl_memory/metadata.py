"""A memory's metadata: the caller's own fields, a JSON object, checked, stored, combined.

A metadata value is a JSON object: str keys; values ``None``, ``bool``,
``int`` (within 64 bits), finite ``float``, ``str``, and lists and objects of those, at most
:data:`MAX_DEPTH` levels deep and :data:`MAX_BYTES` bytes as compact JSON
(UTF-8). ``{}`` (the default) is none. A store keeps it as that compact JSON
text, keys in the caller's order, and gives back an equal object (a tuple
comes back as a list). Anything else is refused with one
:class:`~loopctl_memory.errors.InvalidArgumentError` line naming the path of
the bad value, and nothing is stored.

``update(metadata=...)`` replaces the whole object; ``update(merge_metadata=...)``
sets the keys it gives and keeps the others (:func:`merged`, one level deep). A
consolidation merge of near-duplicates into one keeps every key any of them
has: the value of the memory the merge keeps, else of the first duplicate
that has it (:func:`combined`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from loopctl_memory.errors import InvalidArgumentError

Metadata = dict[str, Any]
"""A checked metadata object."""

MAX_BYTES = 65_536
"""The most bytes a memory's metadata may take as compact JSON (UTF-8)."""
MAX_DEPTH = 32
"""The most levels of lists and objects a memory's metadata may nest."""
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
"""Integers are kept within 64 bits (filters compare numbers as 64-bit floats)."""

EMPTY = "{}"
"""The stored form of no metadata."""

# msgspec's JSON: compact, UTF-8 unescaped, keys in order, as json.dumps(ensure_ascii=False,
# separators=(",", ":")) but for exponents (1e16, not 1e+16), ten times as fast on every write.
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def check_metadata(value: object) -> Metadata:
    """``value`` if it is valid metadata (see the module), unchanged.

    Raises:
        InvalidArgumentError: it is not a JSON object of the allowed values, or too big.

    """
    if type(value) is dict and not value:  # the usual case
        return value
    if not isinstance(value, dict):
        raise InvalidArgumentError(
            f"metadata must be a dict (a JSON object), not {type(value).__name__}"
        )
    _check(value, "", 1)
    size = len(_ENCODER.encode(value))
    if size > MAX_BYTES:
        raise InvalidArgumentError(
            f"metadata takes {size:,} bytes as JSON: at most {MAX_BYTES:,} are stored"
        )
    return value


def check_value(value: object, where: str) -> None:
    """Check one JSON value as metadata holds them (a filter's operand), ``where`` for messages.

    Raises:
        InvalidArgumentError: it is not such a value.

    """
    try:
        _check(value, "", 1)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{where}: {exc}") from None


def _check(value: object, path: str, depth: int) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not MIN_INT <= value <= MAX_INT:
            raise InvalidArgumentError(
                f"metadata {_at(path)} is {value}: integers are kept within 64 bits"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"metadata {_at(path)} is {value!r}: not a JSON number")
        return
    if isinstance(value, str):
        _check_text(value, path)
        return
    if depth > MAX_DEPTH:
        raise InvalidArgumentError(f"metadata nests deeper than {MAX_DEPTH} levels {_at(path)}")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgumentError(
                    f"metadata keys must be str: {key!r} {_at(path)} is a {type(key).__name__}"
                )
            _check_text(key, path)
            _check(item, f"{path}.{key}" if path else key, depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)
        return
    raise InvalidArgumentError(
        f"metadata {_at(path)} is a {type(value).__name__}: not a JSON value"
        " (str, int, float, bool, None, list or dict)"
    )


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"metadata {_at(path)} cannot be encoded as UTF-8: {exc.reason}"
        ) from None


def _at(path: str) -> str:
    return f"at {path!r}" if path else "at the top"


def encoded(value: Metadata) -> str:
    """Checked metadata as the compact JSON text a store keeps."""
    return _ENCODER.encode(value).decode() if value else EMPTY


def decoded(text: str) -> Metadata:
    """The metadata a store kept as ``text``."""
    if text == EMPTY:
        return {}
    found: Metadata = _DECODER.decode(text)
    return found


def copied(value: Metadata) -> Metadata:
    """A deep copy of checked metadata, sharing nothing with it (tuples become lists)."""
    return {key: _copied(item) for key, item in value.items()} if value else {}


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copied(item) for item in value]
    return value


def merged(base: Metadata, changes: Mapping[str, Any]) -> Metadata:
    """``base`` with the keys of ``changes`` set to their values (one level deep), a copy."""
    result = copied(base)
    result.update(copied(dict(changes)))
    return result


def combined(values: Iterable[Metadata]) -> Metadata:
    """Every key any of ``values`` has, with the first value that has it (a copy)."""
    result: Metadata = {}
    for value in values:
        for key, item in value.items():
            if key not in result:
                result[key] = _copied(item)
    return result
