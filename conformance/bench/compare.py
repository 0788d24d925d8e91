"""The regression gate: `bench --compare BASELINE.json --fail-above PCT`.

BASELINE is any pytest-benchmark JSON (a previous `bench` run, or
`pytest tests/benchmarks --run-bench --benchmark-json=...`). Benchmarks are matched by
fullname (then by name). A change is judged against the spread of both runs, not by the
medians alone: two runs of the same code on an idle machine differ by more than a typical
threshold, and mostly between processes (a row whose samples agree to 1% in one process moved
by 11-51% in the next; see processes.py), so a `bench` row carries its median in each of its
fresh processes (`--processes N`) and the gate judges against that spread too:

- REGRESSED: the median grew by more than PCT percent, the middle halves of the two runs'
  samples do not overlap (this run's first quartile is above the baseline's third), and even
  this run's fastest process is more than PCT percent slower than the baseline's slowest: the
  change is beyond both runs' spread, within a process and across processes. (Every process
  slower than every other was not enough: two idle runs minutes apart moved a 1-thread torch
  head by +11.5% with each run's 3 processes within 6%; their closest processes were +6.6% apart.)
- UNJUDGEABLE (never fails, always said): a run took >= FAULTS_UNJUDGEABLE page faults per
  timed call, so its time is the kernel's handing out fresh memory (on virtual machines
  microseconds a page, and different in every process), not the code's; or, short of a change
  REGRESSED as above, a run's own spread is wider than PCT, so a PCT change cannot be told from
  noise: within its samples (IQR / median) or across its processes ((slowest - fastest process
  median) / median). A noisy row still fails on a change beyond its spread: the same three
  conditions with its own widest spread in place of PCT (a 2x slowdown of a row that spreads
  25% fails; a +47% drift whose closest processes are 10% apart does not): noise hides small
  changes, not large ones.
- ok: anything else, within the spread included.

A row timed round by round beside its stream (its paired %, verdict.py) in two or more
processes of both runs is judged on that instead, by the same rule: the paired % fell by more
than PCT (as a slowdown: 60% -> 50% is +20% slower against its stream) and even this run's best
process is below the baseline's worst by more than PCT, or by the rows' own paired spread where
that is wider: REGRESSED; short of that, a paired spread across processes wider than PCT:
UNJUDGEABLE. The machine's speed moves a row's median and the stream beside it together (its
medians alone left 93 of 99 rows of an idle `bench --quick` UNJUDGEABLE at 10%), the code's
speed moves only the row.

`bench` times the backends of REGRESSED rows again in fresh processes before it fails a run
(`--confirm`, command.py) and judges those rows once more on all their processes.

A baseline from one process (or from pytest-benchmark) has no cross-process spread: its rows are
judged by their samples alone, as before. Benchmarks present on only one side are listed, never
failed.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from gpt2_conformance.bench.processes import cross_process_spread_pct

# 64 fresh pages (256 KiB) per call: at the ~6 ms per MB these virtual machines charge for fresh
# memory that is ~1.5 ms, more than most rows' whole median
FAULTS_UNJUDGEABLE = 64


@dataclass(frozen=True)
class Timed:
    """One benchmark of one run: its median and quartiles (seconds), faults per timed call."""

    median: float
    q1: float
    q3: float
    faults: float | None = None
    process_medians: tuple[float, ...] = ()  # the median in each fresh process (`bench --processes`)
    paired_pcts: tuple[float, ...] = ()  # each process's % of its limit timed beside it (verdict.py)

    @property
    def spread_pct(self) -> float:
        return 100.0 * (self.q3 - self.q1) / self.median if self.median else 0.0

    @property
    def process_spread_pct(self) -> float:
        return cross_process_spread_pct(self.process_medians, self.median)

    @property
    def slowest_process(self) -> float:
        return max(self.process_medians, default=self.median)

    @property
    def fastest_process(self) -> float:
        return min(self.process_medians, default=self.median)


@dataclass(frozen=True)
class Change:
    name: str
    baseline: Timed
    current: Timed
    verdict: str  # "ok", "REGRESSED" or "UNJUDGEABLE"
    why: str = ""

    @property
    def pct(self) -> float:
        return 100.0 * (self.current.median - self.baseline.median) / self.baseline.median


def timed(data: dict) -> dict[str, Timed]:
    """{fullname: Timed} of a pytest-benchmark JSON document (quartiles default to the median
    where a writer left them out; faults from gpt2-conformance's extra_info where present)."""
    out = {}
    for b in data.get("benchmarks", []):
        stats = b["stats"]
        median = float(stats["median"])
        extra = b.get("extra_info") or {}
        faults = extra.get("minor_faults_per_call")
        out[b.get("fullname") or b["name"]] = Timed(median, float(stats.get("q1", median)),
                                                    float(stats.get("q3", median)),
                                                    None if faults is None else float(faults),
                                                    tuple(float(m) for m in extra.get("process_medians_s") or ()),
                                                    tuple(float(p) for p in extra.get("process_paired_pcts") or ()))
    return out


class BenchFileError(ValueError):
    """A file given as a bench.json that is not one (its path and what is wrong, in one line)."""


def read_bench_json(path: str) -> dict:
    """A bench.json (pytest-benchmark's format, as `bench --out-dir` writes it), checked: every
    benchmark has a name and a median. Anything else is a BenchFileError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise BenchFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise BenchFileError(f"{path}: not valid JSON ({exc})") from None
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benchmarks, list):
        hint = (" (bench-results.json is the raw output: use bench.json beside it)" if isinstance(data, dict)
                and "results" in data else " (a conformance report is not a bench run)" if isinstance(data, dict)
                and "clauses" in data else "")
        raise BenchFileError(f"{path}: not a bench.json: no 'benchmarks' list{hint}")
    for b in benchmarks:
        if not (isinstance(b, dict) and (b.get("fullname") or b.get("name"))
                and isinstance(b.get("stats"), dict) and isinstance(b["stats"].get("median"), (int, float))):
            raise BenchFileError(f"{path}: not a bench.json: a benchmark without a name or a numeric stats.median")
    return data


def load(path: str) -> dict[str, Timed]:
    return timed(read_bench_json(path))


def judge(name: str, baseline: Timed, current: Timed, fail_above: float) -> Change:
    """One benchmark's verdict (module docstring)."""
    for run, t in (("baseline", baseline), ("this run", current)):
        if t.faults is not None and t.faults >= FAULTS_UNJUDGEABLE:
            return Change(name, baseline, current, "UNJUDGEABLE",
                          f"{run} took {t.faults:,.0f} page faults per call (>= {FAULTS_UNJUDGEABLE}): it timed "
                          "fresh memory, not the code")
    if len(baseline.paired_pcts) >= 2 and len(current.paired_pcts) >= 2:
        return _judge_paired(name, baseline, current, fail_above)
    beyond = _beyond_spread(baseline, current, fail_above)
    if beyond is not None:  # a change beyond both runs' spread fails however noisy the rows are
        return Change(name, baseline, current, "REGRESSED", beyond)
    for run, t in (("baseline", baseline), ("this run", current)):
        if t.spread_pct > fail_above:
            return Change(name, baseline, current, "UNJUDGEABLE",
                          f"{run}'s own spread (IQR) is {t.spread_pct:.1f}% of its median, wider than "
                          f"+{fail_above:g}%: only a change beyond it would fail")
        if t.process_spread_pct > fail_above:
            return Change(name, baseline, current, "UNJUDGEABLE",
                          f"{run}'s {len(t.process_medians)} processes' medians span {t.process_spread_pct:.1f}% of "
                          f"its median, wider than +{fail_above:g}%: only a change beyond it would fail")
    change = Change(name, baseline, current, "ok")
    if change.pct > fail_above:
        if current.q1 <= baseline.q3:
            return Change(name, baseline, current, "ok", "within the two runs' spread (their middle halves overlap)")
        closest = _closest_pct(baseline, current)
        return Change(name, baseline, current, "ok", f"within the two runs' spread (this run's fastest process is "
                                                     f"{closest:+.1f}% from the baseline's slowest)")
    return change


def _slower_pct(baseline_pct: float, current_pct: float) -> float:
    """How much slower the row is against its stream: a paired % from 60 to 50 is +20%."""
    return 100.0 * (baseline_pct / current_pct - 1.0)


def _judge_paired(name: str, baseline: Timed, current: Timed, fail_above: float) -> Change:
    """A row timed round by round beside its stream in two or more processes of both runs: judged
    on its paired % (module docstring), where the machine's drift between and within runs cancels.
    The same rule as the medians': the change beyond PCT, and even this run's best process below
    the baseline's worst by more than PCT or by the rows' own paired spread where that is wider."""
    b, c = baseline.paired_pcts, current.paired_pcts
    slower = _slower_pct(statistics.median(b), statistics.median(c))
    spread = max(cross_process_spread_pct(b, statistics.median(b)), cross_process_spread_pct(c, statistics.median(c)))
    bar = max(fail_above, spread)
    closest = _slower_pct(min(b), max(c))
    paired = (f"paired % {statistics.median(b):.0f} -> {statistics.median(c):.0f} ({abs(slower):.1f}% "
              f"{'slower' if slower > 0 else 'faster'} against its stream)")
    if slower > fail_above and closest > bar:
        return Change(name, baseline, current, "REGRESSED",
                      f"{paired}: even this run's best process is {closest:+.1f}% slower than the baseline's worst"
                      + (f" (more than this row's own paired spread, {bar:.0f}%)" if bar > fail_above else ""))
    if spread > fail_above:
        return Change(name, baseline, current, "UNJUDGEABLE", f"{paired}: its processes' paired % span {spread:.1f}%, "
                      f"wider than +{fail_above:g}%: only a change beyond it would fail")
    if slower > fail_above:
        return Change(name, baseline, current, "ok", f"{paired}: within the two runs' spread (this run's best "
                                                     f"process is {closest:+.1f}% from the baseline's worst)")
    change = Change(name, baseline, current, "ok")
    return change if abs(change.pct) <= fail_above else Change(name, baseline, current, "ok", paired)


def _closest_pct(baseline: Timed, current: Timed) -> float:
    """How far this run's fastest process is from the baseline's slowest, in percent."""
    return 100.0 * (current.fastest_process - baseline.slowest_process) / baseline.slowest_process


def _beyond_spread(baseline: Timed, current: Timed, fail_above: float) -> str | None:
    """Why the change is a regression beyond both runs' spread (module docstring), or None. The
    bar is PCT, or a noisy row's own widest spread where that is wider: a machine whose speed
    drifts between runs moves a noisy row's processes together by about that much (measured: a
    TF decode step +47.6% with its closest processes +10.4% apart, each run spreading 13-26%)."""
    bar = max(fail_above, baseline.spread_pct, baseline.process_spread_pct, current.spread_pct,
              current.process_spread_pct)
    pct = 100.0 * (current.median - baseline.median) / baseline.median
    if pct <= bar or current.q1 <= baseline.q3:
        return None
    closest = _closest_pct(baseline, current)
    if closest <= bar:
        return None
    return (f"beyond both runs' spread: even this run's fastest process is {closest:+.1f}% from the baseline's "
            f"slowest" + (f" (more than this row's own spread, {bar:.0f}%)" if bar > fail_above else ""))


def compare(baseline: dict[str, Timed], current: dict[str, Timed], fail_above: float
            ) -> tuple[list[Change], list[Change], list[str], list[str]]:
    """(regressions, all matched changes, only in baseline, only in current)."""
    def short(key: str) -> str:
        return key.split("::")[-1]

    base_by_short = {short(k): v for k, v in baseline.items()}
    changes, matched = [], set()
    for key, now in current.items():
        base = baseline.get(key, base_by_short.get(short(key)))
        if base is None:
            continue
        matched.add(short(key))
        changes.append(judge(short(key), base, now, fail_above))
    regressions = [c for c in changes if c.verdict == "REGRESSED"]
    missing = sorted(k for k in base_by_short if k not in matched)
    new = sorted(short(k) for k in current if short(k) not in matched)
    return regressions, changes, missing, new


def report(regressions, changes, missing, new, fail_above: float) -> str:
    unjudgeable = [c for c in changes if c.verdict == "UNJUDGEABLE"]
    lines = [f"compare: {len(changes)} workloads matched the baseline; a median more than +{fail_above:g}% "
             "slower fails where it is beyond both runs' spread; a row timed beside its stream in several processes "
             "of both runs is judged on its paired % instead (the machine's own drift cancels in it)"]
    for c in sorted(changes, key=lambda c: -c.pct):
        spreads = f"IQR {c.baseline.spread_pct:.0f}% -> {c.current.spread_pct:.0f}%"
        if c.baseline.process_medians or c.current.process_medians:
            spreads += f", across processes {c.baseline.process_spread_pct:.0f}% -> {c.current.process_spread_pct:.0f}%"
        lines.append(f"  {c.verdict:11s} {c.name}: {c.baseline.median * 1e3:.3f} ms -> {c.current.median * 1e3:.3f} ms "
                     f"({c.pct:+.1f}%, {spreads}){': ' + c.why if c.why else ''}")
    if missing:
        lines.append(f"  not measured now (in the baseline only): {', '.join(missing)}")
    if new:
        lines.append(f"  new (not in the baseline): {', '.join(new)}")
    if unjudgeable:
        lines.append(f"compare: {len(unjudgeable)} of {len(changes)} rows could not be judged (see UNJUDGEABLE): "
                     "they pass, but they say nothing either way")
    if regressions:
        lines.append("compare: FAILED: " + "; ".join(f"{c.name} {c.pct:+.1f}%" for c in regressions))
    elif not changes:
        lines.append("compare: FAILED: no row of this run is in the baseline, so nothing was judged (compare runs "
                     "of the same workloads, modes and sizes)")
    return "\n".join(lines)
