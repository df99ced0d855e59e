"""A stand-in for the tail-indexing child that fails at once, as a broken install would.

``python -m tests.contract.failing_fold_child`` reads the request line, says why
on stderr and exits with status 3.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    sys.stdin.readline()
    print("RuntimeError: this child cannot index", file=sys.stderr)
    sys.exit(3)
