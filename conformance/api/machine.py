"""Facts about the machine this process runs on, shared by adapters and the bench."""

from __future__ import annotations

import os


def cores() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
