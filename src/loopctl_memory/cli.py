"""The ``loopctl-memory`` command line (being written)."""

from __future__ import annotations


def main() -> None:
    """Run the command line."""
    raise SystemExit("loopctl-memory: the command line is not written yet")
