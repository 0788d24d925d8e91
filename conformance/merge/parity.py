"""The cross-run parity section of the merged document.

Each report carries its run's fingerprint (gpt2_conformance.run.parity): per output the sha256
of its float32 bytes, max |diff| from the NumPy reference computed in the same child process,
and values at fixed sample positions. h is a gather plus one addition, so float32 h must be
bit-identical everywhere for the same tables and ids: merge compares digests, and flags a backend
whose h digests differ between its columns (e.g. CPU and GPU). Logits may differ by summation
order: merge gives max |diff| between runs on the sampled positions only, and says so.
"""

from __future__ import annotations

from gpt2_conformance.merge.model import H_CASES, MergeError, Run, num


def _fingerprint(r: Run) -> dict:
    fp = r.data.get("parity") or {}
    if not fp:
        return {"error": "no fingerprint in this report"}
    if "error" in fp:
        return {"error": str(fp["error"])}
    cases = fp.get("cases")
    if (
        not isinstance(cases, dict)
        or not fp.get("inputs_sha256")
        or not all(isinstance(c, dict) and isinstance(c.get("sha256"), str) for c in cases.values())
    ):
        raise MergeError(
            f"{r.path}: parity has no 'cases' with a sha256 each or no 'inputs_sha256' "
            "(not a gpt2_conformance.run.parity fingerprint)"
        )
    return fp


def _sample_diff(a: dict, b: dict) -> float | None:
    """max |diff| over the sample positions two fingerprints share, or None without any."""
    va = dict(zip(a.get("sample_index", []), a.get("sample", []), strict=False))
    common = [(va[i], v) for i, v in zip(b.get("sample_index", []), b.get("sample", []), strict=False) if i in va]
    return max(abs(x - y) for x, y in common) if common else None


def section(runs: list[Run]) -> dict:
    """The parity section of merged.json (see the module docstring), for labelled columns."""
    fps = {r.label: _fingerprint(r) for r in runs}
    usable = {k: v for k, v in fps.items() if "error" not in v}
    ref_label = next((r.label for r in runs if r.backend == "numpy" and r.label in usable), next(iter(usable), None))
    digests: dict[str, dict[str, str]] = {}  # case -> sha256 -> letter, in column order
    ref = None if ref_label is None else usable[ref_label]  # None only where no run is usable
    rows = [_parity_row(r.label, fps[r.label], ref, digests) for r in runs]
    by_inputs: dict[str, list[Run]] = {}
    for r in runs:
        if r.label in usable:
            by_inputs.setdefault(usable[r.label]["inputs_sha256"], []).append(r)
    notes = (
        []
        if len(by_inputs) < 2
        else [
            "runs used different parity inputs (different suite versions?), compared within each set only: "
            + "; ".join(", ".join(r.label for r in members) for members in by_inputs.values())
        ]
    )
    problems, same_backend = [], []
    for members in by_inputs.values():
        problems += _h_problems(members, usable, digests)
        same_backend += _same_backend(members, usable)
    any_fp = next(iter(usable.values()), {})
    return {
        "reference": "the NumPy reference run in the same child process as the column's backend",
        "reference_column": ref_label,
        "inputs": any_fp.get("inputs", ""),
        "sample_note": "over fixed sample positions only ("
        + ", ".join(
            f"{c}: {len(v.get('sample_index', []))} of {_size(v)} elements" for c, v in any_fp.get("cases", {}).items()
        )
        + ")",
        "digests": {case: {letter: sha for sha, letter in m.items()} for case, m in digests.items()},
        "rows": rows,
        "same_backend": same_backend,
        "notes": notes,
        "problems": problems,
    }


def _parity_row(label: str, fp: dict, ref: dict | None, digests: dict) -> dict:
    if "error" in fp:
        return {"column": label, "error": fp["error"]}
    comparable = ref is not None and fp["inputs_sha256"] == ref["inputs_sha256"]
    cells = {}
    for case, c in fp["cases"].items():
        letters = digests.setdefault(case, {})
        letter = letters.setdefault(c["sha256"], chr(ord("A") + len(letters)))
        cells[case] = {
            "max_abs_diff_reference": c.get("max_abs_diff"),
            "digest": letter,
            "bit_identical_to_reference": c["sha256"] == c.get("reference_sha256"),
            "sample_max_abs_diff_vs_reference_column": _sample_diff(ref["cases"][case], c)
            if ref is not None and comparable and case in ref["cases"]
            else None,
        }
    return {
        "column": label,
        "inputs_sha256": fp["inputs_sha256"],
        "cases": cells,
        "comparable_with_reference_column": comparable,
    }


def _h_problems(members: list[Run], usable: dict, digests: dict) -> list[str]:
    """float32 h must be bit-identical for the same inputs: between the columns of one backend
    (devices, versions, hosts), and for the NumPy reference on every machine."""
    problems = []
    for case in H_CASES:
        refs = {
            usable[r.label]["cases"][case].get("reference_sha256") for r in members if case in usable[r.label]["cases"]
        }
        if len(refs) > 1:
            problems.append(
                f"the NumPy reference's {case} differs between the machines of " + ", ".join(r.label for r in members)
            )
    for backend in dict.fromkeys(r.backend for r in members):
        labels = [r.label for r in members if r.backend == backend]
        for case in H_CASES:
            claimed = [label for label in labels if case in usable[label]["cases"]]  # not claimed: absent
            shas = [usable[label]["cases"][case]["sha256"] for label in claimed]
            if len(set(shas)) > 1:
                problems.append(
                    f"{backend}: float32 {case} is not bit-identical between "
                    + ", ".join(f"{label} [{digests[case][sha]}]" for label, sha in zip(claimed, shas, strict=True))
                )
    return problems


def _same_backend(members: list[Run], usable: dict) -> list[dict]:
    """Per backend with several columns (same inputs): h identical?, logits max |diff| on the sample."""
    out = []
    for backend in dict.fromkeys(r.backend for r in members):
        labels = [r.label for r in members if r.backend == backend]
        if len(labels) < 2:
            continue
        cases = [usable[label]["cases"] for label in labels]
        pairs = [
            _sample_diff(a["logits"], b["logits"])
            for i, a in enumerate(cases)
            for b in cases[i + 1 :]
            if "logits" in a and "logits" in b
        ]
        diffs = [d for d in pairs if d is not None]
        out.append(
            {
                "backend": backend,
                "columns": labels,
                "h_bit_identical": all(len({c[case]["sha256"] for c in cases if case in c}) <= 1 for case in H_CASES),
                "logits_sample_max_abs_diff": max(diffs) if diffs else None,
            }
        )
    return out


def parity_cells(row: dict) -> list[tuple[str, str | None, bool]]:
    """One parity row's cells, for Markdown and HTML alike: (max |diff| or "not claimed", digest
    letter or None, bit-identical to the reference) per case, then the sampled logits column."""
    cells = []
    for case in ("h_prefill", "h_decode", "logits"):
        c = row["cases"].get(case)
        cells.append(
            ("not claimed", None, False)
            if c is None
            else (num(c["max_abs_diff_reference"]), c["digest"], c["bit_identical_to_reference"])
        )
    logits = row["cases"].get("logits")
    cells.append((num(logits["sample_max_abs_diff_vs_reference_column"]) if logits else "not claimed", None, False))
    return cells


def _size(case: dict) -> int:
    n = 1
    for s in case.get("shape", []):
        n *= s
    return n
