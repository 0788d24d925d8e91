"""scoreboard.html: every implementation, every clause, parity and speed on one page.

Written by `gpt2-conformance merge ... --out-dir DIR` from the merged document (document.merged).
One self-contained static file: inline CSS, hand-written inline SVG charts, a few lines of
inline JavaScript (filter by clause group, sort by a column, open every message before
printing). It requests nothing from any host: the only URLs on the page are the waiver source
links, as plain <a href>, and (with `drafts`, see upstream_drafts) a waived cell's relative link to the
upstream issue draft(s) explaining it. Statuses are text and colour, never colour alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from html import escape

from gpt2_conformance import results as res
from gpt2_conformance.merge.model import ABSENT, UNKNOWN, num, pct
from gpt2_conformance.merge.parity import parity_cells

STATUS_CLASS = {
    res.PASS: "pass",
    res.FAIL: "fail",
    res.WAIVED: "waived",
    res.NOT_CLAIMED: "nc",
    res.SKIPPED: "skip",
    res.ERROR: "error",
    ABSENT: "absent",
}
STATUS_ORDER = [res.FAIL, res.ERROR, res.WAIVED, res.SKIPPED, res.NOT_CLAIMED, ABSENT, res.PASS]

CSS = """
:root { --pass:#d7f0d7; --fail:#f7c6c6; --waived:#fbe7b5; --nc:#e4e4e4; --skip:#dfe7f2; --error:#e8c8f0;
        --absent:#fff; --ink:#1b1b1b; --muted:#555; --line:#bbb; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 1rem auto;
       max-width: 2200px; padding: 0 1rem; }  /* 15 columns of 7.5em fit beside the clause column */
h1 { font-size: 1.5rem; margin: 0 0 .3rem; } h2 { font-size: 1.2rem; margin: 1.6rem 0 .4rem; }
h3 { font-size: 1rem; margin: 1rem 0 0; }
.meta { color: var(--muted); margin: 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 6px; vertical-align: top; text-align: left; }
thead th { background: #f4f4f4; position: sticky; top: 0; }
th.col { cursor: pointer; min-width: 7.5em; max-width: 10em; font-weight: normal; overflow-wrap: anywhere; }
th.col .impl { font-weight: bold; display: block; } th.col span, th.col small { display: block; }
th.col small, .clause .title { color: var(--muted); }
th.col small.implementation { display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical;
  overflow: hidden; }  /* in full in the Columns table and the tooltip */
tbody th.clause { position: sticky; left: 0; background: #fff; min-width: 14em; }
.clause .cid { font-family: ui-monospace, monospace; display: block; }
.clause .title { font-weight: normal; }
tr.group th { background: #eef; position: sticky; left: 0; }
td.st { min-width: 6.5em; }
td.pass { background: var(--pass); } td.fail { background: var(--fail); font-weight: bold; }
td.waived { background: var(--waived); } td.nc { background: var(--nc); } td.skip { background: var(--skip); }
td.error { background: var(--error); font-weight: bold; } td.absent { background: var(--absent); font-style: italic; }
details summary { cursor: pointer; } details p { margin: .3em 0 0; font-weight: normal; max-width: 40em;
  overflow-wrap: anywhere; }
.legend span { display: inline-block; padding: 1px 6px; margin: 2px 4px 2px 0; border: 1px solid var(--line); }
.legend .pass { background: var(--pass); } .legend .fail { background: var(--fail); }
.legend .waived { background: var(--waived); } .legend .nc { background: var(--nc); }
.legend .skip { background: var(--skip); } .legend .error { background: var(--error); }
.filters { margin: .5rem 0; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; align-items: center; }
.ident { font-weight: bold; color: #185c18; }
.problem { color: #8b0000; font-weight: bold; }
figure { margin: 1rem 0; max-width: 760px; } figure svg { width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 13px; }
svg text { font: 11px system-ui, sans-serif; fill: #1b1b1b; }
@media (max-width: 700px) { body { font-size: 13px; padding: 0 .4rem; } tbody th.clause { min-width: 9em; }
  .clause .title { display: none; } th.col { min-width: 5.5em; } }
@media print { .filters { display: none; } .scroll { overflow: visible; border: 0; }
  thead th, tbody th.clause, tr.group th { position: static; } tr { break-inside: avoid; }
  body { max-width: none; } td, th { -webkit-print-color-adjust: exact; print-color-adjust: exact; } }
"""

# Filter rows by clause group, sort clause rows by one column's status (click its header;
# click "Clause" for spec order), open every message before printing; the URL's fragment
# (#group=BOUNDS&sort=2&issues, sort counting columns from 1) selects a view to link to.
JS = """
const ORDER = %s;
const table = document.getElementById('matrix');
function rows() { return Array.from(table.tBodies[0].rows); }
function applyFilter() {
  const group = document.getElementById('group').value;
  const onlyIssues = document.getElementById('issues').checked;
  rows().forEach(r => {
    const inGroup = !group || r.dataset.group === group;
    const allPass = r.dataset.clause && !r.querySelector('td:not(.pass)');
    r.hidden = !inGroup || (onlyIssues && (allPass || !r.dataset.clause));
  });
}
function sortBy(col) {
  const body = table.tBodies[0];
  const key = r => col < 0 ? +r.dataset.index
                           : ORDER.indexOf(r.cells[col + 1].dataset.status) * 1000 + +r.dataset.index;
  const groups = {};
  rows().forEach(r => (groups[r.dataset.group] = groups[r.dataset.group] || []).push(r));
  Object.values(groups).forEach(list => {
    const head = list.filter(r => !r.dataset.clause), clauses = list.filter(r => r.dataset.clause);
    clauses.sort((a, b) => key(a) - key(b));
    head.concat(clauses).forEach(r => body.appendChild(r));
  });
}
document.getElementById('group').addEventListener('change', applyFilter);
document.getElementById('issues').addEventListener('change', applyFilter);
table.tHead.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => sortBy(i - 1)));
window.addEventListener('beforeprint', () => document.querySelectorAll('details').forEach(d => d.open = true));
// a view can be linked: #group=BOUNDS&sort=2&issues
const view = new URLSearchParams(location.hash.slice(1));
if (view.has('group')) document.getElementById('group').value = view.get('group');
document.getElementById('issues').checked = view.has('issues');
if (view.has('sort')) sortBy(+view.get('sort') - 1);
applyFilter();
"""


def upstream_drafts(upstream_dir: str, out_dir: str) -> dict:
    """{backend: {clause: [(draft title, href)]}} from the status.json files `gpt2-conformance
    upstream` wrote under upstream_dir; each href relative to out_dir (where scoreboard.html goes)."""
    drafts: dict = {}
    if not os.path.isdir(upstream_dir):
        return drafts
    for folder in sorted(os.listdir(upstream_dir)):
        path = os.path.join(upstream_dir, folder, "status.json")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
        for d in rec.get("drafts", []):
            href = os.path.relpath(os.path.join(upstream_dir, folder, f"{d['cause']}.md"), out_dir).replace(os.sep, "/")
            for clause in d.get("clauses", []):
                drafts.setdefault(rec.get("backend", folder), {}).setdefault(clause, []).append((d["title"], href))
    return drafts


def html(doc: dict, drafts: dict | None = None) -> str:
    cols = doc["columns"]
    groups = list(dict.fromkeys(c["group"] for c in doc["clauses"]))
    golden = "; ".join(doc["golden_data"]) or UNKNOWN
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>gpt2-conformance scoreboard</title>",
        f"<style>{CSS}</style></head><body>",
        "<header><h1>gpt2-conformance scoreboard</h1>",
        f'<p class="meta">Spec <b>{escape(doc["spec_version"])}</b> · golden data: {escape(golden)} · '
        f"{len(cols)} column(s) from {len(doc['inputs'])} input file(s) · merged {escape(doc['created'])}</p>",
        "</header>",
    ]
    parts += _matrix(doc, groups, drafts or {}) if cols else ["<p>No conformance report was merged.</p>"]
    parts += _columns(cols)
    parts += _parity(doc["parity"]) if cols else []
    parts += _bench(doc["bench"])
    parts.append(f"<script>{JS % _js_list(STATUS_ORDER)}</script>" if cols else "")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _js_list(items: list[str]) -> str:
    return "[" + ", ".join(f"'{s}'" for s in items) + "]"


# -- the matrix -------------------------------------------------------------------------
def _matrix(doc: dict, groups: list[str], drafts: dict) -> list[str]:
    cols = doc["columns"]
    legend = "".join(f'<span class="{STATUS_CLASS[s]}">{escape(s)}</span>' for s in res.STATUSES)
    out = [
        '<section><h2 id="clauses">Clause × implementation</h2>',
        f'<p class="legend">{legend} — every cell that is not PASS opens its message; a waived deviation '
        "also its reason and source line. Click a column header to sort its failures first.</p>",
        '<div class="filters"><label>Clause group <select id="group"><option value="">all</option>'
        + "".join(f'<option value="{escape(g)}">{escape(g)}</option>' for g in groups)
        + "</select></label>"
        '<label><input type="checkbox" id="issues"> only clauses that are not PASS everywhere</label></div>',
        '<div class="scroll"><table id="matrix"><thead><tr><th scope="col">Clause</th>',
    ]
    for c in cols:
        device = c["device"] + ("" if c["device_name"] == UNKNOWN else f" · {c['device_name']}")
        tooltip = c["implementation"] + "; " + ", ".join(f"{k} {v}" for k, v in c["versions"].items())
        out.append(
            f'<th scope="col" class="col" data-column="{escape(c["label"])}" title="{escape(tooltip)}">'
            f'<span class="impl">{escape(c["label"])}</span><span>{escape(device)}</span>'
            f'<small class="implementation">{escape(c["implementation"])}</small>'
            f"<small>{escape(c['created'][:16])}</small>"
            f"{_host(c['host'])}</th>"
        )
    out.append("</tr></thead><tbody>")
    index = 0
    for g in groups:
        out.append(f'<tr class="group" data-group="{escape(g)}"><th colspan="{len(cols) + 1}">{escape(g)}</th></tr>')
        for row in (r for r in doc["clauses"] if r["group"] == g):
            out.append(
                f'<tr data-clause="{escape(row["id"])}" data-group="{escape(g)}" data-index="{index}">'
                f'<th scope="row" class="clause"><span class="cid">{escape(row["id"])}</span>'
                f'<span class="title">{escape(row["title"])}</span></th>'
                + "".join(
                    _cell(row["cells"][c["label"]], drafts.get(c.get("backend"), {}).get(row["id"], [])) for c in cols
                )
                + "</tr>"
            )
            index += 1
    out.append("</tbody><tfoot><tr><th>Summary</th>")
    for c in cols:
        s = c["summary"]
        text = ", ".join(f"{n} {k}" for k, n in s.items() if n) or "-"
        error = f"<br><b>error:</b> {escape(c['error'])}" if c["error"] else ""
        out.append(f"<td>{escape(text)}; exit code {escape(str(c['exit_code']))}{error}</td>")
    out.append("</tr></tfoot></table></div></section>")
    return out


def _host(host: str) -> str:
    return "" if host == UNKNOWN else f"<small>{escape(host)}</small>"


def _cell(cell: dict, drafts: Sequence[tuple[str, str]] = ()) -> str:
    status = cell["status"]
    cls = STATUS_CLASS.get(status, "absent")
    head = f'<td class="st {cls}" data-status="{escape(status)}">'
    if status == res.PASS:
        return head + "PASS</td>"
    body = f"<p>{escape(cell['message'])}</p>" if cell["message"] else ""
    waiver = cell.get("waiver") or {}
    if waiver:
        link = waiver.get("link", "")
        source = (
            f' <a href="{escape(link)}">source</a>'
            if link.startswith("https://")
            else (f" ({escape(link)})" if link else "")
        )
        body += f"<p><b>Waived:</b> {escape(waiver.get('reason', ''))}{source}</p>"
        if drafts:
            body += (
                "<p><b>Upstream draft:</b> "
                + "; ".join(f'<a href="{escape(href)}">{escape(title)}</a>' for title, href in drafts)
                + "</p>"
            )
    return (
        head + (f"<details><summary>{escape(status)}</summary>{body}</details>" if body else escape(status)) + "</td>"
    )


def _columns(cols: list[dict]) -> list[str]:
    if not cols:
        return []
    out = [
        '<section><h2 id="columns">Columns</h2><div class="scroll"><table><thead><tr><th>Column</th>'
        "<th>Device</th><th>Implementation</th><th>Versions</th><th>Host</th><th>Date</th><th>Golden data</th>"
        "<th>Report</th></tr></thead><tbody>"
    ]
    for c in cols:
        versions = ", ".join(f"{k} {v}" for k, v in c["versions"].items()) or UNKNOWN
        stale = f"<br>stale waivers: {escape('; '.join(c['stale_waivers']))}" if c["stale_waivers"] else ""
        out.append(
            f"<tr><th>{escape(c['label'])}</th><td>{escape(c['device'])} · {escape(c['device_name'])}</td>"
            f"<td>{escape(c['implementation'])}</td><td>{escape(versions)}</td><td>{escape(c['host'])}</td>"
            f"<td>{escape(c['created'])}</td><td>{escape(c['golden_data'])}</td>"
            f"<td>{escape(c['file'])}{stale}</td></tr>"
        )
    out.append("</tbody></table></div></section>")
    return out


# -- parity -----------------------------------------------------------------------------
def _parity(p: dict) -> list[str]:
    out = [
        '<section><h2 id="parity">Parity</h2>',
        f"<p>Each cell: max |diff| over the whole output from {escape(p['reference'])}, and its digest class: "
        'cells with the same letter are bit-identical. <span class="ident">= bit-identical</span> marks an '
        "output identical to the reference bit for bit. float32 h (a gather and one addition) must be "
        "bit-identical on every device; logits may differ by summation order. The last column compares the "
        f"logits with column <b>{escape(str(p['reference_column']))}</b>, {escape(p['sample_note'])}. "
        f"Inputs: {escape(p['inputs'])}.</p>",
        '<div class="scroll"><table id="parity-table"><thead><tr><th>Column</th><th>h_prefill</th><th>h_decode</th>'
        "<th>logits</th><th>logits (sample) vs reference column</th></tr></thead><tbody>",
    ]
    for row in p["rows"]:
        if "error" in row:
            out.append(
                f'<tr><th>{escape(row["column"])}</th><td colspan="4">no fingerprint: {escape(row["error"])}</td></tr>'
            )
            continue
        cells = [
            f"<td>{escape(text)}</td>"
            if digest is None
            else f"<td>{escape(text)} [{escape(digest)}]"
            + (' <span class="ident">= bit-identical</span>' if identical else "")
            + "</td>"
            for text, digest, identical in parity_cells(row)
        ]
        out.append(f"<tr><th>{escape(row['column'])}</th>{''.join(cells)}</tr>")
    out.append("</tbody></table></div>")
    for s in p["same_backend"]:
        verdict = "bit-identical" if s["h_bit_identical"] else "NOT bit-identical"
        out.append(
            f"<p>{escape(s['backend'])} across {escape(', '.join(s['columns']))}: h {verdict}; logits max "
            f"|diff| on the sample {num(s['logits_sample_max_abs_diff'])}.</p>"
        )
    out += [f"<p>Note: {escape(x)}</p>" for x in p["notes"]]
    out += [f'<p class="problem">Parity problem: {escape(x)}</p>' for x in p["problems"]]
    out.append("</section>")
    return out


# -- speed charts -----------------------------------------------------------------------
def _series_label(row: dict, hosts: int) -> str:
    return f"{row['backend']} {row['device']}" + (f" ({row['host']})" if hosts > 1 else "")


def hbar_svg(items: Sequence[tuple[str, float, str, float | None]], unit: str, title: str) -> str:
    """Horizontal bars, one per (label, value, text, limit), on a linear axis from 0. A limit,
    where given, is drawn across its own bar as a dashed red line (each row may have its own
    limit)."""
    label_w, bar_w, row_h, top = 190, 430, 22, 10
    top_value = max([v for _, v, _, _ in items] + [lim for *_, lim in items if lim] + [1e-12]) * 1.08
    height = top + row_h * len(items) + 34
    x = lambda v: label_w + bar_w * v / top_value  # noqa: E731
    out = [f'<svg viewBox="0 0 {label_w + bar_w + 150} {height}" role="img"><title>{escape(title)}</title>']
    for i, (label, value, text, limit) in enumerate(items):
        y = top + i * row_h
        out.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{max(x(value) - label_w, 1):.1f}" height="{row_h - 6}" '
            f'fill="#4f7fbf"/><text x="{max(x(value), x(limit or 0)) + 4:.1f}" y="{y + 14}">{escape(text)}</text>'
        )
        for at, dash in ((limit, "4 2"),):
            if at:
                out.append(
                    f'<line x1="{x(at):.1f}" y1="{y}" x2="{x(at):.1f}" y2="{y + row_h}" stroke="#b00020" '
                    f'stroke-width="2" stroke-dasharray="{dash}"/>'
                )
    axis_y = top + row_h * len(items)
    out.append(
        f'<line x1="{label_w}" y1="{top - 4}" x2="{label_w}" y2="{axis_y}" stroke="#333"/>'
        f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + bar_w}" y2="{axis_y}" stroke="#333"/>'
    )
    for v in _ticks(top_value):
        out.append(
            f'<line x1="{x(v):.1f}" y1="{axis_y}" x2="{x(v):.1f}" y2="{axis_y + 4}" stroke="#333"/>'
            f'<text x="{x(v):.1f}" y="{axis_y + 14}" text-anchor="middle">{v:g}</text>'
        )
    out.append(f'<text x="{label_w + bar_w / 2}" y="{axis_y + 30}" text-anchor="middle">{escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)


def _ticks(top: float) -> list[float]:
    """Round axis ticks (1, 2 or 5 times a power of ten) from 0 to at most `top`."""
    import math

    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [round(k * step, 12) for k in range(int(top / step) + 1)]


def _decode_charts(bench: list[dict], hosts: int) -> list[str]:
    """The decode step (embedding + tied head, B=1, T=1) per implementation; from a bench JSON
    without step rows, its two parts as timed apart (forward and logits at B=1)."""
    steps = [b for b in bench if b["kind"] == "step" and b["batch"] == 1]
    parts = [
        b
        for b in bench
        if b["kind"] in ("forward", "logits") and b["group"].split(" ")[0].endswith("_decode") and b["batch"] == 1
    ]
    out = []
    for rows, what in (
        [(steps, "one generated token: the embedding and the tied head, timed as one call")]
        if steps
        else [
            ([b for b in parts if b["kind"] == "forward"], "the embedding forward alone"),
            ([b for b in parts if b["kind"] == "logits"], "the tied logits head alone"),
        ]
    ):
        for group in sorted({b["group"] for b in rows}):
            chosen = sorted((b for b in rows if b["group"] == group), key=lambda b: b["median_s"])
            items = [
                (
                    _series_label(b, hosts),
                    b["median_s"] * 1e3,
                    f"{b['median_s'] * 1e3:.3g} ms ({b['mode']})" + (" MODEL ERROR" if b.get("model_error") else ""),
                    None,
                )
                for b in chosen
            ]
            out.append(
                f"<h3>Decode step: {escape(group)}</h3><figure>"
                f"{hbar_svg(items, 'median milliseconds per call (shorter is faster)', group)}"
                f"<figcaption>Decode-step cost per implementation: the median time of {escape(what)}, at "
                f"{escape(group.split(' ')[-1])} (batch 1, one new token after a cache of past_length tokens), "
                "in each implementation's fastest mode with the bounds check on (named after each bar). "
                "Shorter bars are faster; times from different machines compare only as far as the machines "
                "do.</figcaption></figure>"
            )
    return out


def _bench(bench: list[dict]) -> list[str]:
    out = ['<section><h2 id="speed">Speed</h2>']
    if not bench:
        return out + [
            "<p>No bench JSON was merged: run <code>gpt2-conformance bench --out-dir DIR</code> on each "
            "machine and pass <code>DIR/bench.json</code> to merge.</p></section>"
        ]
    hosts = len({b["host"] for b in bench})
    loads = sorted({(b["host"], b["other_load_cores"]) for b in bench if b.get("other_load_cores") is not None})
    if loads:
        out.append(
            "<p>Load from other processes during each bench: "
            + escape(", ".join(f"{h}: {c:.2f} cores" for h, c in loads))
            + " (above 0.25 cores a machine was shared and its figures "
            "are low and noisy).</p>"
        )
    out += _decode_charts(bench, hosts)
    prefill = sorted(
        (b for b in bench if b["group"] == "forward_prefill B8-T1024-d768" and b.get("gbps") is not None),
        key=lambda b: -b["gbps"],
    )
    if prefill:
        items = [
            (
                _series_label(b, hosts),
                b["gbps"],
                f"{b['gbps']:.1f} GB/s"
                + (f" of {b['limit_gbps']:.1f} ({b['gbps'] / b['limit_gbps']:.0%})" if b.get("limit_gbps") else "")
                + f", {b['mode']}",
                b.get("limit_gbps"),
            )
            for b in prefill
        ]
        kinds = sorted({b["limit_kind"] for b in prefill if b.get("limit_kind")})
        what = f" ({'; '.join(kinds)})" if kinds else ""
        out.append(
            f"<h3>Prefill bandwidth against the limit</h3><figure>"
            f"{hbar_svg(items, 'GB/s moved (longer is faster)', 'prefill GB/s')}"
            "<figcaption>Prefill bandwidth: the embedding forward at B=8, T=1024, d=768 (the least bytes "
            "it must move: the wte rows read, the wpe rows once, h written), in GB/s, per implementation in its "
            "fastest mode with the bounds check on (named after each bar). On each bar the dashed red line is "
            f"its limit, a stream of the same bytes timed in the same rounds{escape(what)}. Longer bars are "
            "better; the bench's ranking (bench.md) says which differences hold.</figcaption></figure>"
        )
    out.append(
        "<details><summary>Every bench row merged (fastest mode with the check on per workload)</summary>"
        '<div class="scroll"><table><thead><tr><th>Workload</th><th>Backend</th><th>Device</th><th>Host</th>'
        "<th>Mode</th><th>Check</th><th>Median ms</th><th>GB/s</th><th>% of limit</th></tr></thead><tbody>"
    )
    for b in bench:
        out.append(
            f"<tr><td>{escape(b['group'])}</td><td>{escape(b['backend'])}</td><td>{escape(b['device'])}</td>"
            f"<td>{escape(b['host'])}</td><td>{escape(b['mode'])}</td><td>{escape(str(b['check']))}</td>"
            f"<td>{b['median_s'] * 1e3:.3f}</td><td>{num(b['gbps'])}</td>"
            f"<td>{pct(b['pct_of_limit'])}</td></tr>"
        )
    out.append("</tbody></table></div></details></section>")
    return out
