"""What reaches the console: the scorecards, not the frameworks' own logging.

TensorFlow writes its absl, oneDNN and cudart lines to file descriptor 2 from native code as it
is imported, where Python's logging settings cannot reach them. Unless --verbose, the CLI sends
this process's native output to the run's log file while it imports adapters; the suite's child
processes write theirs to the same log (gpt2_conformance.run.runner)."""

from __future__ import annotations

import contextlib
import os
import re
import sys


def file_stem(name: str, device: str) -> str:
    """The one naming rule for every file a run writes (reports and logs): "gpt2-conformance-NAME-
    DEVICE", with anything but letters, digits, `.`, `_` and `-` as `_` (an --adapter spec's `:`
    is refused by artifact uploaders and by Windows)."""
    return f"gpt2-conformance-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}-{device}"


def log_path(folder: str, name: str, device: str) -> str:
    """Where a backend's framework output goes: the run's folder (--report-dir, or a new temporary
    folder for each run, so concurrent runs never write into one another's logs)."""
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{file_stem(name, device)}.log")


@contextlib.contextmanager
def native_output_to(path: str | None):
    """File descriptors 1 and 2 appended to `path` for the duration (None: left alone)."""
    if path is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "a", encoding="utf-8") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        if os.path.exists(path) and os.path.getsize(path) == 0:
            os.remove(path)  # nothing was said: leave no empty log behind
