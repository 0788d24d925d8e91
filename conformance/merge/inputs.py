"""Reading merge's inputs and refusing what cannot be merged honestly.

Inputs are conformance reports (`run --report-dir`, "format": "gpt2-conformance-report/2") and
bench JSON (`bench --out-dir`, pytest-benchmark's layout) from any number of machines, devices
and versions, in any order; a folder stands for every *.json under it.

Columns. A column is one report: (backend, device, device name, implementation, versions,
host). Two reports that differ only in host are two columns, labelled with their hosts; two
reports with the same column identity are a conflict (an error naming both files), never one
overwriting the other, even when their verdicts agree. Reports of different spec versions
cannot be merged (an error listing the files per version).
"""

from __future__ import annotations

import json
import os
from typing import TypeVar, overload

from gpt2_conformance import results as res
from gpt2_conformance.merge.model import MERGED_FORMAT, NEITHER, RAW_BENCH, UNKNOWN, MergeError, Run, as_text

T = TypeVar("T")


# -- reading ----------------------------------------------------------------------------
def expand(paths: list[str]) -> list[tuple[str, bool]]:
    """[(file, found in a folder)]: files as given; a folder stands for every *.json under it
    (a CI artifact download)."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(d, f) for d, _, files in os.walk(p) for f in files if f.endswith(".json"))
            if not found:
                raise MergeError(f"{p}: folder holds no .json file")
            out += [(f, True) for f in found]
        else:
            out.append((p, False))
    return out


def _load_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise MergeError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise MergeError(f"{path}: not a text file (expected JSON)") from None
    except json.JSONDecodeError as exc:
        raise MergeError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except OSError as exc:
        raise MergeError(f"{path}: cannot read: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise MergeError(
            f"{path}: top level is a JSON {type(data).__name__}, but should be an object "
            "(a gpt2-conformance report or a pytest-benchmark JSON)"
        )
    return data


@overload
def _need(path: str, obj: dict, key: str, kind: type[T], where: str = "") -> T: ...
@overload
def _need(path: str, obj: dict, key: str, kind: tuple[type[T], ...], where: str = "") -> T: ...
def _need(path: str, obj: dict, key: str, kind: type | tuple[type, ...], where: str = "") -> object:
    if key not in obj:
        raise MergeError(f"{path}: {where}{key} is missing")
    if not isinstance(obj[key], kind):
        kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise MergeError(f"{path}: {where}{key} is {type(obj[key]).__name__} {obj[key]!r:.40}, but should be {kinds}")
    return obj[key]


def read_report(path: str, data: dict) -> Run:
    if data["format"] != res.REPORT_FORMAT:
        raise MergeError(
            f"{path}: report format {data['format']!r}, but merge reads {res.REPORT_FORMAT!r} "
            "(rerun `gpt2-conformance run --report-dir` with this version)"
        )
    for key in ("backend", "device", "spec_version"):
        _need(path, data, key, str)
    env = data.get("environment") or {}
    if not isinstance(env, dict):
        raise MergeError(f"{path}: environment is {type(env).__name__}, but should be an object")
    versions = env.get("versions") or {}
    run = Run(
        path,
        data,
        data["backend"],
        data["device"],
        as_text(env.get("device_name")),
        as_text(env.get("implementation")),
        versions if isinstance(versions, dict) else {"?": str(versions)},
        as_text(env.get("host")),
        data["spec_version"],
        as_text(data.get("created")),
    )
    for i, c in enumerate(_need(path, data, "clauses", list)):
        where = f"clauses[{i}]."
        if not isinstance(c, dict):
            raise MergeError(f"{path}: clauses[{i}] is {type(c).__name__}, but should be an object")
        cid = _need(path, c, "id", str, where)
        status = _need(path, c, "status", str, where)
        if status not in res.STATUSES:
            raise MergeError(f"{path}: {where}status is {status!r}, but should be one of {', '.join(res.STATUSES)}")
        if cid in run.clauses:
            raise MergeError(f"{path}: clause {cid} appears twice")
        run.clauses[cid] = c
    return run


def is_bench(data: dict) -> bool:
    return isinstance(data.get("benchmarks"), list) and "machine_info" in data


def is_raw_bench(data: dict) -> bool:
    """The bench's raw output, bench-results.json ({"meta": ..., "results": [...]}), written by
    `gpt2-conformance bench` beside bench.json: not an input of merge, and not a foreign file."""
    return set(data) == {"meta", "results"} and isinstance(data["meta"], dict) and isinstance(data["results"], list)


def read_bench(path: str, data: dict) -> list[dict]:
    """One row per benchmark: identity, median and the bench's extra figures."""
    machine = data.get("machine_info") or {}
    info = data.get("gpt2_conformance_bench") or {}
    rows = []
    for i, b in enumerate(data["benchmarks"]):
        where = f"benchmarks[{i}]."
        if not isinstance(b, dict):
            raise MergeError(f"{path}: benchmarks[{i}] is {type(b).__name__}, but should be an object")
        name = _need(path, b, "name", str, where)
        stats = _need(path, b, "stats", dict, where)
        median = _need(path, stats, "median", (int, float), where + "stats.")
        params, extra = b.get("params") or {}, b.get("extra_info") or {}
        group = b.get("group") or name
        rows.append(
            {
                "file": path,
                "host": as_text(machine.get("node")),
                "device": params.get("device") or info.get("device") or UNKNOWN,
                "backend": params.get("backend", UNKNOWN),
                "mode": params.get("mode", UNKNOWN),
                "implementation": extra.get("implementation", ""),
                "group": group,
                "name": name,
                "fullname": b.get("fullname") or name,
                "kind": extra.get("kind") or group.split("_")[0],
                "batch": extra.get("batch", params.get("batch")),
                "median_s": float(median),
                "gbps": extra.get("gbps"),
                "pct_of_limit": extra.get("pct_of_limit"),
                "limit_gbps": extra.get("limit_gbps"),
                "limit_kind": extra.get("limit_kind", ""),
                "check": extra.get("check", ""),
                "model_error": extra.get("model_error"),
                "datetime": data.get("datetime", UNKNOWN),
                "other_load_cores": info.get("other_load_cores"),
            }
        )
    return rows


def load_bench(path: str) -> list[dict]:
    """The rows of one bench.json (read_bench), or MergeError naming the file and what is wrong."""
    data = _load_json(path)
    if not is_bench(data):
        raise MergeError(f"{path}: not a bench.json (no 'benchmarks' list beside 'machine_info')")
    return read_bench(path, data)


def load(paths: list[str]) -> tuple[list[Run], list[dict], list[str], list[str]]:
    """(conformance runs, bench rows, ignored files, raw bench files named on the command line)
    of every input; MergeError on the first bad one. The bench's raw bench-results.json is
    skipped: silently in a folder (it always lies beside bench.json), listed when named; so is
    merge's own merged.json in a folder (a folder merged into itself). Any
    other JSON file found in a folder that is neither kind is ignored and listed; one named on
    the command line is an error."""
    runs: list[Run] = []
    bench: list[dict] = []
    ignored: list[str] = []
    raw: list[str] = []
    seen: set[str] = set()
    raw_in_folders: list[str] = []
    for path, in_folder in expand(paths):
        if os.path.realpath(path) in seen:
            raise MergeError(f"{path}: given twice")
        seen.add(os.path.realpath(path))
        data = _load_json(path)
        if data.get("format") == MERGED_FORMAT:  # merge's own merged.json: an output, never an input
            if not in_folder:
                raise MergeError(f"{path}: a merged document (merge's own output); merge the reports it was made from")
            raw_in_folders.append(path)
        elif "format" in data:
            runs.append(read_report(path, _checked_format(path, data)))
        elif is_bench(data):
            bench += read_bench(path, data)
        elif is_raw_bench(data):
            (raw_in_folders if in_folder else raw).append(path)
        elif in_folder:
            ignored.append(path)
        else:
            raise MergeError(f"{path}: {NEITHER}")
    if not runs and not bench:
        found = [f"{p} ({RAW_BENCH})" for p in raw_in_folders + raw] + [f"{p} ({NEITHER})" for p in ignored]
        raise MergeError(
            "no conformance report or bench JSON among the inputs"
            + (f"; found only: {'; '.join(found)}" if found else "")
        )
    check(runs, bench)
    return runs, bench, ignored, raw


def _checked_format(path: str, data: dict) -> dict:
    if not isinstance(data["format"], str) or not data["format"].startswith("gpt2-conformance-report/"):
        raise MergeError(f"{path}: 'format' is {data['format']!r}, not a gpt2-conformance report")
    return data


# -- conflicts --------------------------------------------------------------------------
def check(runs: list[Run], bench: list[dict]) -> None:
    """Refuse what cannot be merged honestly: mixed spec versions, two reports for one column,
    one clause described two ways, two bench results for one (host, device, benchmark)."""
    versions: dict[str, list[str]] = {}
    for r in runs:
        versions.setdefault(r.spec_version, []).append(r.path)
    if len(versions) > 1:
        listed = "; ".join(f"spec {v}: {', '.join(p)}" for v, p in versions.items())
        raise MergeError(f"reports of different spec versions cannot be merged ({listed}); rerun them with one version")
    seen: dict[tuple, Run] = {}
    for r in runs:
        if r.identity in seen:
            raise MergeError(
                f"duplicate cell: {seen[r.identity].path} and {r.path} both report {r.backend} on "
                f"{r.device} (device {r.device_name}, implementation {r.implementation}, host {r.host}, "
                "same versions); pass one of them"
            )
        seen[r.identity] = r
    described: dict[str, tuple] = {}
    for r in runs:
        for cid, c in r.clauses.items():
            text = (c.get("group"), c.get("title"))
            first = described.setdefault(cid, (text, r.path))
            if first[0] != text:
                raise MergeError(f"clause {cid} is {first[0]} in {first[1]} but {text} in {r.path} (same spec version)")
    cells: dict[tuple, str] = {}
    for row in bench:
        key = (row["host"], row["device"], row["fullname"])
        if key in cells and cells[key] != row["file"]:
            raise MergeError(
                f"duplicate bench result: {cells[key]} and {row['file']} both time {row['fullname']} on "
                f"host {row['host']} ({row['device']}); pass one of them"
            )
        if key in cells:
            raise MergeError(f"{row['file']}: benchmark {row['fullname']} appears twice")
        cells[key] = row["file"]


def label_columns(runs: list[Run]) -> None:
    """ "backend device", plus whatever tells apart columns that share backend and device
    (device name, implementation, versions, host): explicit, never a silent overwrite."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.backend, r.device), []).append(r)
    for (backend, device), members in groups.items():
        for r in members:
            extra = []
            if len({m.device_name for m in members}) > 1:
                extra.append(r.device_name)
            if len({m.implementation for m in members}) > 1:
                extra.append(r.implementation)
            if len({json.dumps(m.versions, sort_keys=True) for m in members}) > 1:
                differing = sorted(
                    {k for m in members for k in m.versions if len({str(o.versions.get(k)) for o in members}) > 1}
                )
                extra.append(", ".join(f"{k} {r.versions.get(k, UNKNOWN)}" for k in differing))
            if len({m.host for m in members}) > 1:
                extra.append(f"host {r.host}")
            r.label = f"{backend} {device}" + (f" ({'; '.join(extra)})" if extra else "")
