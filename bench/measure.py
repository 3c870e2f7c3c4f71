"""What the benchmarks measure of their own process, shared by the runner and the cases."""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    """This process's peak RSS (``VmHWM``). Not getrusage's ru_maxrss where /proc is there: Linux keeps that across
    execve, so a child would report the high-water mark of the parent that generated its input."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
