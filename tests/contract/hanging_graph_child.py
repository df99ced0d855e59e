"""A stand-in for the graph-building child that never ends: it writes its pid, then waits.

``python -m tests.contract.hanging_graph_child`` reads the request on stdin like
the real child, writes its pid to the file ``LOOPCTL_MEMORY_TEST_CHILD_PID`` names
and sleeps until it is stopped.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.stdin.readline()
    Path(os.environ["LOOPCTL_MEMORY_TEST_CHILD_PID"]).write_text(str(os.getpid()), "utf-8")
    while True:
        time.sleep(60)
