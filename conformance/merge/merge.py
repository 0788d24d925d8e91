"""`gpt2-conformance merge FILE.json... [--out-dir DIR]`: one verdict from many machines.

Reads conformance reports (`run --report-dir`, "format": "gpt2-conformance-report/2") and bench
JSON (`bench --out-dir`, pytest-benchmark's layout) from any number of machines, devices and
versions, in any order (a folder stands for every *.json under it), and writes one clause x
column matrix, one parity table and one bench table: merged.md, merged.json and scoreboard.html
in --out-dir (without it, the Markdown goes to stdout).

Columns. A column is one report: (backend, device, device name, implementation, versions,
host). Two reports that differ only in host are two columns, labelled with their hosts; two
reports with the same column identity are a conflict (an error naming both files), never one
overwriting the other, even when their verdicts agree. Reports of different spec versions
cannot be merged (an error listing the files per version).

Parity. Each report carries its run's fingerprint (conformance/run/parity.py): per output the
sha256 of its float32 bytes, max |diff| from the NumPy reference computed in the same child
process, and values at fixed sample positions. h is a gather plus one addition, so float32 h must
be bit-identical everywhere for the same tables and ids: merge compares digests, and flags a
backend whose h digests differ between its columns (e.g. CPU and GPU). Logits may differ by
summation order: merge gives max |diff| between runs on the sampled positions only, and says so.

Exit codes: 0 merged, no run failed, parity holds; 1 merged, but a run failed or h differs
between columns of one backend; 2 unreadable, malformed or conflicting inputs (nothing written);
4 merged, no run failed, but a run could not judge some clauses (ERROR).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from dataclasses import dataclass, field

from gpt2_conformance import results as res

MERGED_FORMAT = "gpt2-conformance-merged/1"
UNKNOWN = "?"  # a field an older report does not carry
SHORT = {res.PASS: "PASS", res.FAIL: "FAIL", res.WAIVED: "waived", res.NOT_CLAIMED: "n/c", res.SKIPPED: "skip",
         res.ERROR: "ERROR"}
ABSENT = "absent"  # a clause a report does not have (never shown as a pass)
H_CASES = ("h_prefill", "h_decode")


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
        return (self.backend, self.device, self.device_name, self.implementation,
                json.dumps(self.versions, sort_keys=True), self.host)


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
        raise MergeError(f"{path}: top level is a JSON {type(data).__name__}, but should be an object "
                         "(a gpt2-conformance report or a pytest-benchmark JSON)")
    return data


def _need(path: str, obj: dict, key: str, kind: type, where: str = "") -> object:
    if key not in obj:
        raise MergeError(f"{path}: {where}{key} is missing")
    if not isinstance(obj[key], kind):
        raise MergeError(f"{path}: {where}{key} is {type(obj[key]).__name__} {obj[key]!r:.40}, but should be "
                         f"{kind.__name__}")
    return obj[key]


def _text(value) -> str:
    """An environment field as text: "?" when absent, a dict as "k v, k v"."""
    if value in (None, ""):
        return UNKNOWN
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or UNKNOWN
    return str(value)


def read_report(path: str, data: dict) -> Run:
    if data["format"] != res.REPORT_FORMAT:
        raise MergeError(f"{path}: report format {data['format']!r}, but merge reads {res.REPORT_FORMAT!r} "
                         "(rerun `gpt2-conformance run --report-dir` with this version)")
    for key in ("backend", "device", "spec_version"):
        _need(path, data, key, str)
    env = data.get("environment") or {}
    if not isinstance(env, dict):
        raise MergeError(f"{path}: environment is {type(env).__name__}, but should be an object")
    versions = env.get("versions") or {}
    run = Run(path, data, data["backend"], data["device"], _text(env.get("device_name")),
              _text(env.get("implementation")), versions if isinstance(versions, dict) else {"?": str(versions)},
              _text(env.get("host")), data["spec_version"], _text(data.get("created")))
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
        rows.append({"file": path, "host": _text(machine.get("node")),
                     "device": params.get("device") or info.get("device") or UNKNOWN,
                     "backend": params.get("backend", UNKNOWN), "mode": params.get("mode", UNKNOWN),
                     "implementation": extra.get("implementation", ""), "group": group, "name": name,
                     "fullname": b.get("fullname") or name, "kind": extra.get("kind") or group.split("_")[0],
                     "batch": extra.get("batch", params.get("batch")), "median_s": float(median),
                     "gbps": extra.get("gbps"), "pct_of_limit": extra.get("pct_of_limit"),
                     "limit_gbps": extra.get("limit_gbps"), "limit_kind": extra.get("limit_kind", ""),
                     "check": extra.get("check", ""), "model_error": extra.get("model_error"),
                     "datetime": data.get("datetime", UNKNOWN), "other_load_cores": info.get("other_load_cores")})
    return rows


def load(paths: list[str]) -> tuple[list[Run], list[dict], list[str]]:
    """(conformance runs, bench rows, ignored files) of every input; MergeError on the first bad
    one. A JSON file found in a folder that is neither kind (e.g. the bench's raw
    bench-results.json) is ignored and listed; one named on the command line is an error."""
    runs, bench, ignored, seen = [], [], [], set()
    for path, in_folder in expand(paths):
        if os.path.realpath(path) in seen:
            raise MergeError(f"{path}: given twice")
        seen.add(os.path.realpath(path))
        data = _load_json(path)
        if "format" in data:
            runs.append(read_report(path, _checked_format(path, data)))
        elif is_bench(data):
            bench += read_bench(path, data)
        elif in_folder:
            ignored.append(path)
        else:
            raise MergeError(f"{path}: {NEITHER}")
    if not runs and not bench:
        raise MergeError("no conformance report or bench JSON among the inputs"
                         + (f" (ignored: {', '.join(ignored)})" if ignored else ""))
    check(runs, bench)
    return runs, bench, ignored


NEITHER = ("neither a gpt2-conformance report (no 'format' key) nor a pytest-benchmark JSON (no 'benchmarks' list "
           "with 'machine_info')")


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
            raise MergeError(f"duplicate cell: {seen[r.identity].path} and {r.path} both report {r.backend} on "
                             f"{r.device} (device {r.device_name}, implementation {r.implementation}, host {r.host}, "
                             "same versions); pass one of them")
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
            raise MergeError(f"duplicate bench result: {cells[key]} and {row['file']} both time {row['fullname']} on "
                             f"host {row['host']} ({row['device']}); pass one of them")
        if key in cells:
            raise MergeError(f"{row['file']}: benchmark {row['fullname']} appears twice")
        cells[key] = row["file"]


def label_columns(runs: list[Run]) -> None:
    """"backend device", plus whatever tells apart columns that share backend and device
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
                differing = sorted({k for m in members for k in m.versions
                                    if len({str(o.versions.get(k)) for o in members}) > 1})
                extra.append(", ".join(f"{k} {r.versions.get(k, UNKNOWN)}" for k in differing))
            if len({m.host for m in members}) > 1:
                extra.append(f"host {r.host}")
            r.label = f"{backend} {device}" + (f" ({'; '.join(extra)})" if extra else "")


# -- parity -----------------------------------------------------------------------------
def _fingerprint(r: Run) -> dict:
    fp = r.data.get("parity") or {}
    if not fp:
        return {"error": "no fingerprint in this report"}
    if "error" in fp:
        return {"error": str(fp["error"])}
    cases = fp.get("cases")
    if not isinstance(cases, dict) or not fp.get("inputs_sha256") or not all(
            isinstance(c, dict) and isinstance(c.get("sha256"), str) for c in cases.values()):
        raise MergeError(f"{r.path}: parity has no 'cases' with a sha256 each or no 'inputs_sha256' "
                         "(not a gpt2_conformance.run.parity fingerprint)")
    return fp


def _sample_diff(a: dict, b: dict) -> float | None:
    """max |diff| over the sample positions two fingerprints share, or None without any."""
    va = dict(zip(a.get("sample_index", []), a.get("sample", [])))
    common = [(va[i], v) for i, v in zip(b.get("sample_index", []), b.get("sample", [])) if i in va]
    return max(abs(x - y) for x, y in common) if common else None


def parity(runs: list[Run]) -> dict:
    """The parity section of merged.json (see the module docstring)."""
    fps = {r.label: _fingerprint(r) for r in runs}
    usable = {k: v for k, v in fps.items() if "error" not in v}
    ref_label = next((r.label for r in runs if r.backend == "numpy" and r.label in usable), next(iter(usable), None))
    digests: dict[str, dict[str, str]] = {}  # case -> sha256 -> letter, in column order
    rows = [_parity_row(r.label, fps[r.label], usable.get(ref_label), digests) for r in runs]
    by_inputs: dict[str, list[Run]] = {}
    for r in runs:
        if r.label in usable:
            by_inputs.setdefault(usable[r.label]["inputs_sha256"], []).append(r)
    notes = [] if len(by_inputs) < 2 else [
        "runs used different parity inputs (different suite versions?), compared within each set only: "
        + "; ".join(", ".join(r.label for r in members) for members in by_inputs.values())]
    problems, same_backend = [], []
    for members in by_inputs.values():
        problems += _h_problems(members, usable, digests)
        same_backend += _same_backend(members, usable)
    any_fp = next(iter(usable.values()), {})
    return {"reference": "the NumPy reference run in the same child process as the column's backend",
            "reference_column": ref_label, "inputs": any_fp.get("inputs", ""),
            "sample_note": "over fixed sample positions only ("
                           + ", ".join(f"{c}: {len(v.get('sample_index', []))} of {_size(v)} elements"
                                       for c, v in any_fp.get("cases", {}).items()) + ")",
            "digests": {case: {letter: sha for sha, letter in m.items()} for case, m in digests.items()},
            "rows": rows, "same_backend": same_backend, "notes": notes, "problems": problems}


def _parity_row(label: str, fp: dict, ref: dict | None, digests: dict) -> dict:
    if "error" in fp:
        return {"column": label, "error": fp["error"]}
    comparable = ref is not None and fp["inputs_sha256"] == ref["inputs_sha256"]
    cells = {}
    for case, c in fp["cases"].items():
        letters = digests.setdefault(case, {})
        letter = letters.setdefault(c["sha256"], chr(ord("A") + len(letters)))
        cells[case] = {"max_abs_diff_reference": c.get("max_abs_diff"), "digest": letter,
                       "bit_identical_to_reference": c["sha256"] == c.get("reference_sha256"),
                       "sample_max_abs_diff_vs_reference_column":
                           _sample_diff(ref["cases"][case], c) if comparable and case in ref["cases"] else None}
    return {"column": label, "inputs_sha256": fp["inputs_sha256"], "cases": cells,
            "comparable_with_reference_column": comparable}


def _h_problems(members: list[Run], usable: dict, digests: dict) -> list[str]:
    """float32 h must be bit-identical for the same inputs: between the columns of one backend
    (devices, versions, hosts), and for the NumPy reference on every machine."""
    problems = []
    for case in H_CASES:
        refs = {usable[r.label]["cases"][case].get("reference_sha256") for r in members
                if case in usable[r.label]["cases"]}
        if len(refs) > 1:
            problems.append(f"the NumPy reference's {case} differs between the machines of "
                            + ", ".join(r.label for r in members))
    for backend in dict.fromkeys(r.backend for r in members):
        labels = [r.label for r in members if r.backend == backend]
        for case in H_CASES:
            claimed = [label for label in labels if case in usable[label]["cases"]]  # not claimed: absent
            shas = [usable[label]["cases"][case]["sha256"] for label in claimed]
            if len(set(shas)) > 1:
                problems.append(f"{backend}: float32 {case} is not bit-identical between "
                                + ", ".join(f"{label} [{digests[case][sha]}]" for label, sha in zip(claimed, shas)))
    return problems


def _same_backend(members: list[Run], usable: dict) -> list[dict]:
    """Per backend with several columns (same inputs): h identical?, logits max |diff| on the sample."""
    out = []
    for backend in dict.fromkeys(r.backend for r in members):
        labels = [r.label for r in members if r.backend == backend]
        if len(labels) < 2:
            continue
        cases = [usable[label]["cases"] for label in labels]
        diffs = [_sample_diff(a["logits"], b["logits"]) for i, a in enumerate(cases) for b in cases[i + 1:]
                 if "logits" in a and "logits" in b]
        diffs = [d for d in diffs if d is not None]
        out.append({"backend": backend, "columns": labels,
                    "h_bit_identical": all(len({c[case]["sha256"] for c in cases if case in c}) <= 1 for case in H_CASES),
                    "logits_sample_max_abs_diff": max(diffs) if diffs else None})
    return out


def parity_cells(row: dict) -> list[tuple[str, str | None, bool]]:
    """One parity row's cells, for Markdown and HTML alike: (max |diff| or "not claimed", digest
    letter or None, bit-identical to the reference) per case, then the sampled logits column."""
    cells = []
    for case in ("h_prefill", "h_decode", "logits"):
        c = row["cases"].get(case)
        cells.append(("not claimed", None, False) if c is None else
                     (_num(c["max_abs_diff_reference"]), c["digest"], c["bit_identical_to_reference"]))
    logits = row["cases"].get("logits")
    cells.append((_num(logits["sample_max_abs_diff_vs_reference_column"]) if logits else "not claimed", None, False))
    return cells


def _size(case: dict) -> int:
    n = 1
    for s in case.get("shape", []):
        n *= s
    return n


# -- the merged document ----------------------------------------------------------------
def bench_table(bench: list[dict]) -> list[dict]:
    """Per (workload, backend, device, host): its fastest mode with the bounds check on (the
    bench's own rule for the bar), else its fastest mode, named."""
    best: dict[tuple, dict] = {}
    for row in bench:
        key = (row["group"], row["backend"], row["device"], row["host"])
        checked = str(row.get("check") or "").startswith("on")
        rank = (not checked, row["median_s"])
        if key not in best or rank < best[key]["_rank"]:
            best[key] = dict(row, _rank=rank)
    return [{k: v for k, v in r.items() if k != "_rank"} for r in best.values()]


def column_order(runs: list[Run]) -> list[Run]:
    """Backends in the registry's order (the NumPy reference first), then any other backend by
    name; within a backend, devices and labels in order."""
    from gpt2_conformance import registry

    known = {name: i for i, name in enumerate(registry.available())}
    return sorted(runs, key=lambda r: (known.get(r.backend, len(known)), r.backend, r.device, r.label))


def merged(runs: list[Run], bench: list[dict], ignored: list[str] = ()) -> dict:
    label_columns(runs)
    runs = column_order(runs)
    clause_ids: list[str] = []
    described = {}
    for r in runs:
        for cid, c in r.clauses.items():
            if cid not in described:
                clause_ids.append(cid)
                described[cid] = {"id": cid, "group": c.get("group", UNKNOWN), "title": c.get("title", "")}
    columns = [{"label": r.label, "backend": r.backend, "device": r.device, "device_name": r.device_name,
                "implementation": r.implementation, "versions": r.versions, "host": r.host, "created": r.created,
                "file": r.path, "exit_code": r.data.get("exit_code"), "error": r.data.get("error", ""),
                "golden_data": _text((r.data.get("environment") or {}).get("golden_data")),
                "summary": r.data.get("summary", {}), "stale_waivers": r.data.get("stale_waivers", [])}
               for r in runs]
    matrix = []
    for cid in clause_ids:
        cells = {}
        for r in runs:
            c = r.clauses.get(cid)
            cells[r.label] = ({"status": c["status"], "message": c.get("message", ""), "waiver": c.get("waiver") or {}}
                              if c else {"status": ABSENT, "message": "this report has no such clause", "waiver": {}})
        matrix.append(dict(described[cid], cells=cells))
    golden = sorted({c["golden_data"] for c in columns})
    return {"format": MERGED_FORMAT, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "spec_version": runs[0].spec_version if runs else UNKNOWN, "golden_data": golden,
            "inputs": [r.path for r in runs] + sorted({b["file"] for b in bench}),
            "ignored": list(ignored),  # JSON files in a folder that are neither kind
            "columns": columns, "clauses": matrix, "parity": parity(runs) if runs else {},
            "bench": bench_table(bench)}


def exit_code(doc: dict) -> int:
    codes = [c["exit_code"] for c in doc["columns"]]
    if 1 in codes or doc["parity"].get("problems"):
        return 1
    return 4 if 4 in codes else 0


# -- Markdown ---------------------------------------------------------------------------
def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0f}%"


def markdown(doc: dict) -> str:
    cols = doc["columns"]
    out = ["# gpt2-conformance: merged verdict", "",
           f"Spec {doc['spec_version']}; golden data: {'; '.join(doc['golden_data']) or UNKNOWN}; "
           f"{len(cols)} conformance report(s), {len({b['file'] for b in doc['bench']})} bench file(s); "
           f"merged {doc['created']}.", ""]
    if doc["ignored"]:
        out += [f"Ignored (in a folder, but {NEITHER}): " + ", ".join(_cell(x) for x in doc["ignored"]) + ".", ""]
    if cols:
        out += ["## Columns", "", "| Column | Device name | Implementation | Versions | Host | Created | Exit code |",
                "|---|---|---|---|---|---|---|"]
        for c in cols:
            versions = ", ".join(f"{k} {v}" for k, v in c["versions"].items()) or UNKNOWN
            out.append(f"| {_cell(c['label'])} | {_cell(c['device_name'])} | {_cell(c['implementation'])} | "
                       f"{_cell(versions)} | {_cell(c['host'])} | {c['created']} | {c['exit_code']} |")
        out += ["", "## Clause x column", "", "| Clause | " + " | ".join(_cell(c["label"]) for c in cols) + " |",
                "|---|" + "---|" * len(cols)]
        for row in doc["clauses"]:
            out.append(f"| {row['id']} | " + " | ".join(SHORT.get(row["cells"][c["label"]]["status"], ABSENT)
                                                       for c in cols) + " |")
        out += ["", "`waived` = DEVIATION (WAIVED), a failure listed with its source line in the implementation's "
                "waiver file; `n/c` = NOT CLAIMED; `skip` = SKIPPED (e.g. no GPU); `absent` = the report has no such "
                "clause.", ""]
        out += _parity_markdown(doc["parity"])
    if doc["bench"]:
        out += ["## Bench", "", "Per workload, backend, device and host: the fastest mode with the bounds check on "
                "(else the fastest mode). Medians as measured on each machine; a busy machine's figures are low.", "",
                "| Workload | Backend | Device | Host | Mode | Check | Median ms | GB/s | % of limit |",
                "|---|---|---|---|---|---|---|---|---|"]
        for b in doc["bench"]:
            out.append(f"| {_cell(b['group'])} | {b['backend']} | {b['device']} | {_cell(b['host'])} | {b['mode']} | "
                       f"{_cell(b['check'])} | {b['median_s'] * 1e3:.3f} | {_num(b['gbps'])} | "
                       f"{_pct(b['pct_of_limit'])} |")
    return "\n".join(out) + "\n"


def _parity_markdown(p: dict) -> list[str]:
    out = ["## Parity", "", f"Each cell: max |diff| over the whole output from {p['reference']}; [A], [B], ... is "
           "the output's digest class (cells with the same letter are bit-identical); `=` marks an output bit-identical "
           f"to the reference. The last column: max |diff| of the logits from column {p['reference_column']}, "
           f"{p['sample_note']}. Inputs: {p['inputs']}.", "",
           "| Column | h_prefill | h_decode | logits | logits (sample) vs reference column |", "|---|---|---|---|---|"]
    for row in p["rows"]:
        if "error" in row:
            out.append(f"| {_cell(row['column'])} | {_cell(row['error'])} | | | |")
            continue
        cells = [text if digest is None else f"{text} [{digest}]" + (" =" if identical else "")
                 for text, digest, identical in parity_cells(row)]
        out.append(f"| {_cell(row['column'])} | " + " | ".join(cells) + " |")
    for s in p["same_backend"]:
        out.append("")
        out.append(f"- {s['backend']} across {', '.join(s['columns'])}: h "
                   f"{'bit-identical' if s['h_bit_identical'] else 'NOT bit-identical'}; logits max |diff| on the "
                   f"sample {_num(s['logits_sample_max_abs_diff'])}")
    out += [""] * bool(p["notes"]) + [f"- Note: {_cell(x)}" for x in p["notes"]]
    if p["problems"]:
        out += [""] + [f"- **PARITY PROBLEM:** {_cell(x)}" for x in p["problems"]]
    return out + [""]


# -- command ----------------------------------------------------------------------------
def add_parser(subparsers) -> None:
    p = subparsers.add_parser("merge", help="merge conformance and bench JSON from many machines into one matrix, "
                                            "parity table, bench table and scoreboard page")
    p.add_argument("files", nargs="+", metavar="FILE.json",
                   help="reports of `run --report-dir` and `bench --out-dir` (a folder: every *.json under it)")
    p.add_argument("--out-dir", help="write merged.md, merged.json and scoreboard.html here "
                                     "(default: print the Markdown)")


def write_all(doc: dict, out_dir: str) -> list[str]:
    from gpt2_conformance.merge import scoreboard

    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, n) for n in ("merged.md", "merged.json", "scoreboard.html")]
    for path, text in zip(paths, (markdown(doc), json.dumps(doc, indent=2), scoreboard.html(doc))):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return paths


def run(args) -> int:
    try:
        runs, bench, ignored = load(args.files)
        doc = merged(runs, bench, ignored)
    except MergeError as exc:
        print(f"gpt2-conformance merge: error: {exc}", file=sys.stderr)
        return 2
    for path in doc["ignored"]:
        print(f"gpt2-conformance merge: ignored {path}: {NEITHER}", file=sys.stderr)
    if args.out_dir:
        for path in write_all(doc, args.out_dir):
            print(f"wrote {path}")
    else:
        print(markdown(doc))
    for problem in doc["parity"].get("problems", []):
        print(f"gpt2-conformance merge: parity problem: {problem}", file=sys.stderr)
    return exit_code(doc)
