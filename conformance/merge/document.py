"""The merged document (merged.json): columns in registry order, the clause x column matrix,
the parity section and the bench table; and the one exit code it stands for.

A published document carries no machine-local path: input files are named relative to the
output folder (without one, the working directory) when they lie under it, else by their file
name (with as many parent folders as it takes to tell two apart); an absolute path in a report's
golden-data line is dropped (the package's own fixtures) or cut to its file name (a checkpoint).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Sequence
from pathlib import PurePath

from gpt2_conformance import results as res
from gpt2_conformance.merge import parity
from gpt2_conformance.merge.inputs import label_columns
from gpt2_conformance.merge.model import ABSENT, MERGED_FORMAT, UNKNOWN, Run, as_text


def bench_table(bench: list[dict]) -> list[dict]:
    """Per (workload, backend, device, host): its fastest mode with the bounds check on, else its
    fastest mode, named."""
    best: dict[tuple, dict] = {}
    for row in bench:
        key = (row["group"], row["backend"], row["device"], row["host"])
        checked = str(row.get("check") or "").startswith("on")
        rank = (not checked, row["median_s"])
        if key not in best or rank < best[key]["_rank"]:
            best[key] = dict(row, _rank=rank)
    return [{k: v for k, v in r.items() if k != "_rank"} for r in best.values()]


_PATH_IN_PARENS = re.compile(r"\s*\((?:/|[A-Za-z]:[\\/])[^()]*\)")  # " (/abs/dir)"
_PATH = re.compile(r"(?<![\w.:/\\~-])(?:/|[A-Za-z]:[\\/])[^\s()'\",;]*")  # /abs/file, C:\dir\file


def without_paths(text: str) -> str:
    """`text` with no absolute path: one alone in parentheses (the shipped fixtures' folder in
    "shipped fixtures (/abs/dir): ...") is dropped, any other cut to its last part (a checkpoint
    "/abs/dir/model.safetensors" becomes "model.safetensors")."""
    text = _PATH_IN_PARENS.sub("", text)
    return _PATH.sub(lambda m: next((p for p in reversed(re.split(r"[\\/]", m.group(0))) if p), m.group(0)), text)


def shown_names(paths: list[str], base: str) -> dict[str, str]:
    """{path: the name a published document gives it}: relative to `base` for a file under it,
    else the shortest tail of its path (normally the file name) that no other input shares."""
    base_path = PurePath(os.path.abspath(base))
    names, outside = {}, {}
    for p in dict.fromkeys(paths):
        full = PurePath(os.path.abspath(p))
        if full != base_path and full.is_relative_to(base_path):
            names[p] = full.relative_to(base_path).as_posix()
        else:
            outside[p] = full.parts[1:]  # without the root (or drive)
    taken = set(names.values())
    for p, parts in outside.items():
        tail = "/".join(parts)
        for k in range(1, len(parts) + 1):
            tail = "/".join(parts[-k:])
            if tail not in taken and all(q == p or "/".join(other[-k:]) != tail for q, other in outside.items()):
                break
        names[p] = tail
        taken.add(tail)
    return names


def column_order(runs: list[Run]) -> list[Run]:
    """Backends in the registry's order (the NumPy reference first), then any other backend by
    name; within a backend, devices and labels in order."""
    from gpt2_conformance import registry

    known = {name: i for i, name in enumerate(registry.available())}
    return sorted(runs, key=lambda r: (known.get(r.backend, len(known)), r.backend, r.device, r.label))


def merged(runs: list[Run], bench: list[dict], ignored: Sequence[str] = (), base: str | None = None) -> dict:
    """The merged document; files are named as shown_names(..., base or the working directory)."""
    label_columns(runs)
    runs = column_order(runs)
    names = shown_names([r.path for r in runs] + [b["file"] for b in bench] + list(ignored), base or os.getcwd())
    clause_ids: list[str] = []
    described = {}
    for r in runs:
        for cid, c in r.clauses.items():
            if cid not in described:
                clause_ids.append(cid)
                described[cid] = {"id": cid, "group": c.get("group", UNKNOWN), "title": c.get("title", "")}
    columns = [
        {
            "label": r.label,
            "backend": r.backend,
            "device": r.device,
            "device_name": r.device_name,
            "implementation": r.implementation,
            "versions": r.versions,
            "host": r.host,
            "created": r.created,
            "file": names[r.path],
            "exit_code": r.data.get("exit_code"),
            "error": r.data.get("error", ""),
            "golden_data": without_paths(as_text((r.data.get("environment") or {}).get("golden_data"))),
            "summary": r.data.get("summary", {}),
            "stale_waivers": r.data.get("stale_waivers", []),
        }
        for r in runs
    ]
    matrix = []
    for cid in clause_ids:
        cells = {}
        for r in runs:
            c = r.clauses.get(cid)
            cells[r.label] = (
                {"status": c["status"], "message": c.get("message", ""), "waiver": c.get("waiver") or {}}
                if c
                else {"status": ABSENT, "message": "this report has no such clause", "waiver": {}}
            )
        matrix.append(dict(described[cid], cells=cells))
    golden = sorted({c["golden_data"] for c in columns})
    return {
        "format": MERGED_FORMAT,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "spec_version": runs[0].spec_version if runs else UNKNOWN,
        "golden_data": golden,
        "inputs": [names[r.path] for r in runs] + sorted({names[b["file"]] for b in bench}),
        "ignored": [names[p] for p in ignored],  # JSON files in a folder that are neither kind
        "columns": columns,
        "clauses": matrix,
        "parity": parity.section(runs) if runs else {},
        "bench": bench_table([dict(b, file=names[b["file"]]) for b in bench]),
    }


def exit_code(doc: dict) -> int:
    """1 if a column failed or parity has a problem, else 4 if a column could not judge some
    clauses, else 0. Not results.combined_exit_code: that one says 1 for no run at all and 3
    when every run checked nothing, where a merge (e.g. of bench files only) says 0."""
    codes = [c["exit_code"] for c in doc["columns"]]
    if 1 in codes or doc["parity"].get("problems"):
        return 1
    return 4 if 4 in codes else 0


def why_exit(doc: dict) -> list[str]:
    """One line per run that makes the merge's exit code what it is: each failed run (1), or, where
    none failed, each run that could not judge some clauses (4); each names the backend, its
    column and its file, and what in its report decides it. Parity problems say their own."""
    code = exit_code(doc)
    if code not in (1, 4):
        return []
    status = res.FAIL if code == 1 else res.ERROR
    lines = []
    for c in doc["columns"]:
        if c["exit_code"] != code:
            continue
        clauses = [row["id"] for row in doc["clauses"] if row["cells"].get(c["label"], {}).get("status") == status]
        if code == 4:
            why = f"the suite could not judge {_count(clauses, 'clause')} (ERROR): {', '.join(clauses)}"
        else:
            reasons = [f"it could not run: {c['error']}"] if c["error"] else []
            reasons += [f"{_count(clauses, 'clause')} failed: {', '.join(clauses)}"] if clauses else []
            stale = c["stale_waivers"]
            reasons += [f"{_count(stale, 'stale waiver')}: {', '.join(map(str, stale))}"] if stale else []
            why = "; ".join(reasons) or "its report's exit code is 1"
        verdict = "failed" if code == 1 else "was not judged whole"
        lines.append(f"the run of {c['backend']} ({c['label']}, {c['file']}) {verdict}: {why}; so merge exits {code}")
    return lines


def _count(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"
