"""What the modules of `merge` share: the merged document's format name and status words, the
error merge raises, one report as a Run, and the small formatters both renderings use (Markdown
in markdown.py, HTML in scoreboard.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpt2_conformance import results as res

MERGED_FORMAT = "gpt2-conformance-merged/1"
UNKNOWN = "?"  # a field an older report does not carry
SHORT = {
    res.PASS: "PASS",
    res.FAIL: "FAIL",
    res.WAIVED: "waived",
    res.NOT_CLAIMED: "n/c",
    res.SKIPPED: "skip",
    res.ERROR: "ERROR",
}
ABSENT = "absent"  # a clause a report does not have (never shown as a pass)
H_CASES = ("h_prefill", "h_decode")
RAW_BENCH = "the bench's raw output; merge reads the bench.json written beside it"
NEITHER = (
    "neither a gpt2-conformance report (no 'format' key) nor a pytest-benchmark JSON (no 'benchmarks' list "
    "with 'machine_info')"
)


class MergeError(ValueError):
    """An input merge cannot use: unreadable, malformed, or in conflict with another input."""


@dataclass
class Run:
    """One conformance report, with the fields that tell runs apart."""

    path: str
    data: dict
    backend: str
    device: str
    device_name: str
    implementation: str
    versions: dict
    host: str
    spec_version: str
    created: str
    label: str = ""
    clauses: dict = field(default_factory=dict)  # id -> clause dict, in report order

    @property
    def identity(self) -> tuple:
        return (
            self.backend,
            self.device,
            self.device_name,
            self.implementation,
            json.dumps(self.versions, sort_keys=True),
            self.host,
        )


def as_text(value) -> str:
    """An environment field as text: "?" when absent, a dict as "k v, k v"."""
    if value in (None, ""):
        return UNKNOWN
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or UNKNOWN
    return str(value)


def num(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def pct(x) -> str:
    return "-" if x is None else f"{x:.0f}%"
