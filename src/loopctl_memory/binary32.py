"""Binary32 arithmetic as a compiled Rust program does it, and the reference's shared constants.

loopctl computes in binary32 (``f32``): every multiplication, division and
addition rounds to binary32. :func:`f32` computes each step in binary64 and
rounds it to binary32, which gives the binary32 result exactly (binary64 has
more than twice the precision, so the double rounding is innocuous for +, *
and /).

The elementary functions (``ln``, ``exp``, ``powf``) come from the platform's C
library, as they do in a compiled Rust program; correctly rounded results from
:mod:`math` differ from glibc's ``logf``/``expf``/``powf`` in the last bit for
about one argument in a thousand, which is enough to move an entry across a
floor. Where no C library can be loaded, the correctly rounded value is used.

The constants are the ones more than one module needs exactly as the crate
has them: the integer limits it saturates at, the Unicode White_Space set its
``str`` methods split and trim on, and the weights of its score.
"""

from __future__ import annotations

import ctypes
import functools
import math
import struct
from datetime import timedelta
from typing import Final

INT64_MAX: Final = 2**63 - 1
"""The largest stored integer (an SQL BIGINT, a Rust ``i64``): counts saturate here."""

U16_MAX: Final = 2**16 - 1
"""The largest ``u16``: the crate narrows counts to it, saturating, before a ratio."""

# Unicode White_Space: what Rust's str::split_whitespace splits on and str::trim strips.
# Python's str.split() and str.strip() also take U+001C..U+001F, which are not White_Space.
WHITE_SPACE: Final = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
"""Every character of Unicode's White_Space property, once each."""

_BINARY32 = struct.Struct("<f")


def f32(value: float) -> float:
    """Round ``value`` to the nearest binary32 (ties to even), returned as a float."""
    result: float = _BINARY32.unpack(_BINARY32.pack(value))[0]
    return result


def next_down32(value: float) -> float:
    """The largest binary32 below ``value``, a positive finite binary32."""
    (bits,) = struct.unpack("<I", _BINARY32.pack(value))
    below: float = _BINARY32.unpack(struct.pack("<I", bits - 1))[0]
    return below


# The reference score, relevance*0.5 + overlap*0.4 + tag_bonus + 0.1, as binary32 values.
SCORE_RELEVANCE_WEIGHT: Final = f32(0.5)
SCORE_OVERLAP_WEIGHT: Final = f32(0.4)
SCORE_TAG_BONUS: Final = f32(0.3)
SCORE_BASELINE: Final = f32(0.1)


@functools.cache
def _libm() -> ctypes.CDLL | None:
    """The C library's binary32 functions, or None where they cannot be loaded."""
    library: ctypes.CDLL | None = None
    try:  # the symbols the interpreter itself links (it links the C math library)
        library = ctypes.CDLL(None)
        library.logf  # noqa: B018 - an AttributeError here means "not this one"
    except (OSError, TypeError, AttributeError):
        from ctypes import util  # noqa: PLC0415 - may run a subprocess: only when needed

        name = util.find_library("m") or util.find_library("ucrtbase")
        try:
            library = None if name is None else ctypes.CDLL(name)
        except OSError:
            library = None
    if library is None:
        return None
    try:
        for function in ("logf", "expf"):
            getattr(library, function).argtypes = [ctypes.c_float]
            getattr(library, function).restype = ctypes.c_float
        library.powf.argtypes = [ctypes.c_float, ctypes.c_float]
        library.powf.restype = ctypes.c_float
    except AttributeError:
        return None
    return library


def ln32(value: float) -> float:
    """``value.ln()`` for a binary32 ``value``."""
    library = _libm()
    if library is not None:
        result: float = library.logf(value)
        return result
    return f32(math.log(value))


def exp32(value: float) -> float:
    """``value.exp()`` for a binary32 ``value``."""
    library = _libm()
    if library is not None:
        result: float = library.expf(value)
        return result
    try:
        return f32(math.exp(value))
    except OverflowError:  # exp above binary32's range is infinite, as expf's is
        return math.inf


def half_pow32(exponent: float) -> float:
    """``0.5_f32.powf(exponent)`` for a binary32 ``exponent`` >= 0."""
    library = _libm()
    if library is not None:
        result: float = library.powf(0.5, exponent)
        return result
    return f32(math.pow(0.5, exponent))


def as_secs_f32(span: timedelta) -> float:
    """``Duration::as_secs_f32`` of a non-negative ``span``: seconds + nanoseconds / 1e9."""
    seconds = span.days * 86_400 + span.seconds
    return f32(f32(float(seconds)) + f32(f32(float(span.microseconds * 1000)) / 1e9))
