"""The ranking as people read it: the console table and bench.md (the same rows, two renderers).

Each workload is one table, fastest first: rank (`tie` where the interval of the ratio to the
fastest holds 1), the ratio with its 95% interval, the median, the % of the limit with its
interval (MODEL ERROR where a row beats a stream of its own least bytes), and the check the mode
runs. Rows that failed follow with their error.
"""

from __future__ import annotations


def ratio_text(row: dict) -> str:
    if row.get("ratio") is None or row["rank"] == 1:
        return "-" if row.get("ratio") is None else "1.00x"
    return f"{row['ratio']:.2f}x [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"


def pct_text(row: dict) -> str:
    if row.get("model_error"):
        return "MODEL ERROR " + row["model_error"]
    if row.get("pct_of_limit") is None:
        return "-"
    return f"{row['pct_of_limit']:.0f}% [{row['pct_low']:.0f}, {row['pct_high']:.0f}]"


def header_lines(meta: dict) -> list[str]:
    lines = [
        f"{meta['device']}, {meta['cores']} cores; {meta['rounds']} rounds of {meta['block_s'] * 1e3:.0f} ms "
        f"blocks per row in {meta.get('processes', 1)} process(es) each, turns shuffled each round; ratios to "
        "the fastest with 95% intervals"
    ]
    load = meta.get("other_load_cores")
    if load is not None and load > meta.get("busy_cores", 0.25):
        lines.append(
            f"NOT A VERDICT: other processes kept {load:.2f} cores busy during the run; rerun on an idle machine"
        )
    elif load is not None:
        lines.append(f"other processes: {load:.2f} cores busy during the run")
    return lines


def _cells(row: dict) -> list[str]:
    if row.get("error"):
        return ["ERROR", f"{row['label']} {row['mode']}", row["error"][:160], "", "", ""]
    t = row["median_s"]
    return [
        str(row["rank"]),
        f"{row['label']} {row['mode']}",
        ratio_text(row),
        f"{t * 1e3:.3f} ms" if t >= 1e-4 else f"{t * 1e6:.1f} us",
        pct_text(row),
        row.get("check", ""),
    ]


COLUMNS = ["rank", "implementation", "time / fastest [95% CI]", "median", "% of limit [95% CI]", "check"]


def _limit_text(table: dict) -> str:
    lim = table.get("limit")
    return f"limit {lim['gbps']:.1f} GB/s ({lim['description']})" if lim else "no limit measured"


class ConsoleTable:
    def render(self, tables: list[dict], meta: dict) -> str:
        out = header_lines(meta)
        for table in tables:
            rows = [COLUMNS] + [_cells(r) for r in table["rows"] if not r.get("error")]
            widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
            out += ["", f"{table['group']}: {_limit_text(table)}"]
            out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
            out += [f"  ERROR  {r['label']} {r['mode']}: {r['error']}" for r in table["rows"] if r.get("error")]
        return "\n".join(out)


class MarkdownReport:
    filename = "bench.md"

    def render(self, tables: list[dict], meta: dict) -> str:
        out = ["# gpt2-conformance bench", "", *[f"{line}  " for line in header_lines(meta)], ""]
        for table in tables:
            out += [
                f"## {table['group']}",
                "",
                _limit_text(table),
                "",
                "| " + " | ".join(COLUMNS) + " |",
                "|" + "---|" * len(COLUMNS),
            ]
            out += ["| " + " | ".join(c.replace("|", "/") for c in _cells(r)) + " |" for r in table["rows"]]
            out.append("")
        if "bench.png" in meta.get("outputs", ()):
            out += ["![ratios to the fastest](bench.png)", ""]
        out += [
            "Every row was timed in blocks that took turns with the other rows', round by round; each ratio is "
            "the median over the rounds of that round's ratio, its interval a bootstrap over the rounds. "
            "`tie`: the interval holds 1.",
            "",
        ]
        return "\n".join(out)

    def write(self, tables: list[dict], meta: dict, path: str) -> str:
        content = self.render(tables, meta)
        with open(path, "w") as f:
            f.write(content)
        return path
