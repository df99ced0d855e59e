"""Store sizes on a benchmark's command line: ``10k`` to 10000 and back.

Every benchmark takes its sizes (entries in a store) this way, and labels its
rows with :func:`size_label`.
"""

from __future__ import annotations

import argparse

SIZE_SUFFIXES = {"k": 1_000, "m": 1_000_000}
SMALLEST = 5
"""The retrieve limit of ``benchmarks.run`` (its ``LIMIT``): no store is smaller than one answer."""


def parse_size(text: str) -> int:
    """``10k`` -> 10000, ``1m`` -> 1000000, ``2500`` -> 2500."""
    text = text.strip().lower()
    factor = SIZE_SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in SIZE_SUFFIXES else text
    try:
        size = int(float(digits) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10k, 100k, 1m)") from None
    if size < SMALLEST:
        raise argparse.ArgumentTypeError(f"size {text!r} is below the retrieve limit {SMALLEST}")
    return size


def size_label(size: int) -> str:
    """The inverse of :func:`parse_size` for round sizes."""
    for suffix, factor in sorted(SIZE_SUFFIXES.items(), key=lambda item: -item[1]):
        if size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)
