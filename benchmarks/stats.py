"""What a measurement is summed up by: the nearest-rank percentile, a process's peak RSS.

``benchmarks.lifecycle_bench.percentile`` is another percentile (rounded
index), kept where its figures were measured with it.
"""

from __future__ import annotations

import math
import resource
from collections.abc import Sequence
from pathlib import Path


def nearest_rank(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


def peak_rss_kb() -> int:
    """This process's peak resident set (VmHWM), in KiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
