"""`bench --adapter NEW --against BASE --fail-above PCT`: did a change make an implementation
slower? Both sides are timed in turns in the same run (asv's `continuous` benchmarks both
commits in one run for the same reason), so the machine's drift falls on both; NEW fails where
its time over BASE's, with 95% confidence, is above 1 + PCT/100 (the interval's low end is,
ranking.compare). A run of an implementation against itself passes; one doing twice the work
fails.
"""

from __future__ import annotations

from gpt2_conformance.bench import ranking


def judge(tables: list[dict], new: str, base: str, fail_above: float) -> tuple[int, str]:
    """(exit code: 0 passed, 1 slower or not judged (a side failed), the lines to print)."""
    limit = 1 + fail_above / 100
    lines, code = [], 0
    for table in tables:
        rows = {r["label"]: r for r in table["rows"]}
        a, b = rows.get(new), rows.get(base)
        if a is None or b is None or a.get("error") or b.get("error"):
            why = "; ".join(f"{r['label']}: {r['error']}" for r in (a, b) if r and r.get("error"))
            why = why or "a side has no row"
            lines.append(f"gate {table['group']}: NOT JUDGED ({why})")
            code = 1
            continue
        r = ranking.compare(a["block_medians"], b["block_medians"], table.get("cohorts", 1))
        if r is None:
            lines.append(f"gate {table['group']}: NOT JUDGED (fewer than 3 rounds per cohort with both sides timed)")
            code = 1
        elif r.low > limit:
            lines.append(
                f"gate {table['group']}: SLOWER: {new} takes {r.text()} the time of {base}, "
                f"above {limit:.2f} with 95% confidence"
            )
            code = 1
        else:
            lines.append(
                f"gate {table['group']}: ok: {new} takes {r.text()} the time of {base} "
                f"(fails only where the interval lies above {limit:.2f})"
            )
    return (code, "\n".join(lines)) if tables else (1, "gate: NOT JUDGED (no workload was timed)")
