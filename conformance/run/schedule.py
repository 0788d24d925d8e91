"""The order `run --backend all` starts the backends in, so `--jobs` processes finish together.

Longest first, by how long each took in the last run on this device (as CTest orders tests by
the cost data of its last run): the short ones fill in at the end. With --jobs 2 on 2 cores the
registry's order left one core idle for the last backend; longest first comes within a few
seconds of the total divided by the jobs. A backend with no recorded time starts first (it may be
long); with no record at all, the judged implementations start before the references (they run a
real model's own code, and take longer: the run's own table of times shows it). The times are kept in
this user's private cache folder (machine.private_cache_folder); a missing or unreadable record
only costs the order, never a verdict. Scorecards are printed in the registry's order whatever
order the backends start in.
"""

from __future__ import annotations

import json
import os

from gpt2_conformance import registry
from gpt2_conformance.api import backend as api_backend
from gpt2_conformance.api import machine

FOLDER = "verdict-times"


def _path(device: str) -> str | None:
    folder = machine.private_cache_folder(FOLDER)
    return os.path.join(folder, f"{device}.json") if folder else None  # device: one of run's --device choices


def recorded(device: str) -> dict[str, float]:
    """backend -> seconds of its last verdict on `device`; {} where there is no readable record."""
    path = _path(device)
    try:
        with open(path or "", encoding="utf-8") as f:
            times = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(times, dict):
        return {}
    return {k: float(v) for k, v in times.items() if isinstance(k, str) and isinstance(v, (int, float))}


def order(names: list[str], device: str) -> list[str]:
    """`names` in the order to start them: unrecorded first, then the longest recorded first; the
    registry's order breaks ties (and is the order among unrecorded ones, judged before references)."""
    times = recorded(device)

    def key(item):
        index, name = item
        if name in times:
            return (1, -times[name], index)
        entry = registry.entry(name)
        return (0, entry is not None and entry.kind == api_backend.REFERENCE, index)

    return [name for _, name in sorted(enumerate(names), key=key)]


def record(durations: dict[str, float], device: str) -> None:
    """Keeps these verdicts' times for the next run's order (others' records are kept)."""
    path = _path(device)
    if not path or not durations:
        return
    times = {**recorded(device), **{k: round(float(v), 1) for k, v in durations.items()}}
    machine.replace_atomically(path, lambda f: f.write(json.dumps(times, indent=1, sort_keys=True).encode()))
