"""merged.md: the merged document as Markdown (columns, clause x column, parity, bench)."""

from __future__ import annotations

from gpt2_conformance.merge.model import ABSENT, NEITHER, SHORT, UNKNOWN, num, pct
from gpt2_conformance.merge.parity import parity_cells


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(doc: dict) -> str:
    cols = doc["columns"]
    out = [
        "# gpt2-conformance: merged verdict",
        "",
        f"Spec {doc['spec_version']}; golden data: {'; '.join(doc['golden_data']) or UNKNOWN}; "
        f"{len(cols)} conformance report(s), {len({b['file'] for b in doc['bench']})} bench file(s); "
        f"merged {doc['created']}.",
        "",
    ]
    if doc["ignored"]:
        out += [f"Ignored (in a folder, but {NEITHER}): " + ", ".join(_cell(x) for x in doc["ignored"]) + ".", ""]
    if cols:
        out += [
            "## Columns",
            "",
            "| Column | Device name | Implementation | Versions | Host | Created | Exit code |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in cols:
            versions = ", ".join(f"{k} {v}" for k, v in c["versions"].items()) or UNKNOWN
            out.append(
                f"| {_cell(c['label'])} | {_cell(c['device_name'])} | {_cell(c['implementation'])} | "
                f"{_cell(versions)} | {_cell(c['host'])} | {c['created']} | {c['exit_code']} |"
            )
        out += [
            "",
            "## Clause x column",
            "",
            "| Clause | " + " | ".join(_cell(c["label"]) for c in cols) + " |",
            "|---|" + "---|" * len(cols),
        ]
        for row in doc["clauses"]:
            out.append(
                f"| {row['id']} | "
                + " | ".join(SHORT.get(row["cells"][c["label"]]["status"], ABSENT) for c in cols)
                + " |"
            )
        out += [
            "",
            "`waived` = DEVIATION (WAIVED), a failure listed with its source line in the implementation's "
            "waiver file; `n/c` = NOT CLAIMED; `skip` = SKIPPED (e.g. no GPU); `absent` = the report has no such "
            "clause.",
            "",
        ]
        out += _parity_markdown(doc["parity"])
    if doc["bench"]:
        out += [
            "## Bench",
            "",
            "Per workload, backend, device and host: the fastest mode with the bounds check on "
            "(else the fastest mode). Medians as measured on each machine; a busy machine's figures are low.",
            "",
            "| Workload | Backend | Device | Host | Mode | Check | Median ms | GB/s | % of limit |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for b in doc["bench"]:
            out.append(
                f"| {_cell(b['group'])} | {b['backend']} | {b['device']} | {_cell(b['host'])} | {b['mode']} | "
                f"{_cell(b['check'])} | {b['median_s'] * 1e3:.3f} | {num(b['gbps'])} | "
                f"{pct(b['pct_of_limit'])} |"
            )
    return "\n".join(out) + "\n"


def _parity_markdown(p: dict) -> list[str]:
    out = [
        "## Parity",
        "",
        f"Each cell: max |diff| over the whole output from {p['reference']}; [A], [B], ... is "
        "the output's digest class (cells with the same letter are bit-identical); `=` marks an output bit-identical "
        f"to the reference. The last column: max |diff| of the logits from column {p['reference_column']}, "
        f"{p['sample_note']}. Inputs: {p['inputs']}.",
        "",
        "| Column | h_prefill | h_decode | logits | logits (sample) vs reference column |",
        "|---|---|---|---|---|",
    ]
    for row in p["rows"]:
        if "error" in row:
            out.append(f"| {_cell(row['column'])} | {_cell(row['error'])} | | | |")
            continue
        cells = [
            text if digest is None else f"{text} [{digest}]" + (" =" if identical else "")
            for text, digest, identical in parity_cells(row)
        ]
        out.append(f"| {_cell(row['column'])} | " + " | ".join(cells) + " |")
    for s in p["same_backend"]:
        out.append("")
        out.append(
            f"- {s['backend']} across {', '.join(s['columns'])}: h "
            f"{'bit-identical' if s['h_bit_identical'] else 'NOT bit-identical'}; logits max |diff| on the "
            f"sample {num(s['logits_sample_max_abs_diff'])}"
        )
    out += [""] * bool(p["notes"]) + [f"- Note: {_cell(x)}" for x in p["notes"]]
    if p["problems"]:
        out += [""] + [f"- **PARITY PROBLEM:** {_cell(x)}" for x in p["problems"]]
    return out + [""]
