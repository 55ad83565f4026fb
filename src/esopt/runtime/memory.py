"""Process memory readings for benchmarks and the resource ledger."""

from __future__ import annotations

import resource
import sys


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB.

    Reads VmHWM: getrusage's ru_maxrss survives execve on Linux, so a child started by a
    big parent would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_memory_mb() -> float:
    """The ledger's peak memory, in MiB: torch.cuda.max_memory_allocated when this process
    has used a GPU, else the peak RSS (the paper's Table 1 reports GPU memory)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    return peak_rss_mb()
