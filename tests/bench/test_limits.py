"""Each row's limit: the last-level cache read from sysfs and the flush it sizes, a streaming
reference moving each workload's own least bytes in its own cache state (bandwidth.matched), and,
in a real numpy run (slow), a limit for every row and a model error exactly where a row is above it."""

from __future__ import annotations

import pytest

from gpt2_conformance.bench import child, verdict
from gpt2_conformance.bench import workloads as wl


def test_llc_is_read_from_sysfs_and_sizes_the_flush(tmp_path):
    from gpt2_conformance.bench import cache

    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "64K"),
                                                 (2, "Unified", "2048K"), (3, "Unified", "480M")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert cache.llc_bytes(str(tmp_path)) == 480 << 20
    assert cache.llc_bytes(str(tmp_path / "missing")) is None
    assert cache.flush_bytes(480 << 20) == 960 << 20
    assert cache.flush_bytes(8 << 20) == cache.FLUSH_MIN_BYTES and cache.flush_bytes(4 << 30) == cache.FLUSH_MAX_BYTES
    assert cache.flush_bytes(None) == 512 << 20


def test_limits_match_each_workloads_bytes_and_cache_state(monkeypatch):
    """On a fake machine with a 32 MiB LLC (issue 12's): the flush reads 256 MiB, and every
    workload gets a reference moving its own least bytes, cold ones with the flush before each
    round, warm ones without."""
    from gpt2_conformance.bench import bandwidth, cache

    monkeypatch.setattr(cache, "llc_bytes", lambda root=None: 32 << 20)
    assert cache.flush_bytes(cache.llc_bytes()) == 256 << 20
    calls = []
    monkeypatch.setattr(bandwidth, "matched", lambda read, write, flush=None: calls.append((read, write, flush))
                        or {"read": read, "write": write, "gbps": 10.0, "gbps_min": 9.0, "gbps_max": 11.0,
                            "cache": "warm" if flush is None else "cold", "threads": 1})
    warm, cold, step = (wl.Workload("forward", "prefill", 8, 1024, 768),
                        wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold"),
                        wl.Workload("step", "decode", 1, 1, 768, 512))
    flush = object()
    limits = child.workload_limits([warm, cold, step], flush)
    u = child.distinct_ids(warm)
    assert 7000 < u < 8192  # the drawn ids repeat: fewer rows to read than tokens
    assert calls == [(*wl.traffic(warm, u), None), (*wl.traffic(cold, u), flush), (*wl.traffic(step, 1), None)]
    assert limits[cold.group]["cache"] == "cold" and limits[warm.group]["distinct_ids"] == u


def test_a_limit_is_measured_again_after_each_row_and_the_faster_kept(monkeypatch):
    """The machine's speed drifts within a process, so a limit measured once can sit below a row
    timed later (a MODEL ERROR on an idle machine). After a row, its reference is measured again:
    a faster measurement becomes the limit of every workload with the same bytes and cache
    state (not of the others), a slower one does not, and every measurement stays listed."""
    from gpt2_conformance.bench import bandwidth

    speeds = iter([30.0, 20.0, 45.0, 25.0])
    fastest_round = {30.0: 31.0, 20.0: 21.0, 45.0: 46.0, 25.0: 60.0}  # the slower last one had the fastest round

    asked = []

    def matched(read, write, flush=None, only=None, **_):
        asked.append(only)
        speed = next(speeds)
        return {"read": read, "write": write, "gbps": speed, "gbps_min": 1.0, "gbps_max": fastest_round[speed],
                "cache": "warm" if flush is None else "cold", "threads": 2, "reader": "dot"}
    monkeypatch.setattr(bandwidth, "matched", matched)
    suite, step = wl.Workload("logits", "decode", 1, 1, 768, 512), wl.Workload("forward", "prefill", 8, 1024, 768)
    limits = child.workload_limits([suite, step], flush=None)  # 30 and 20 GB/s
    child.remeasure_limit(limits, suite, flush=None)  # 45: faster, kept
    assert limits[suite.group]["gbps"] == 45.0 and limits[suite.group]["measured_gbps"] == [30.0, 45.0]
    assert limits[step.group]["gbps"] == 20.0 and limits[step.group]["measured_gbps"] == [20.0]
    child.remeasure_limit(limits, suite, flush=None)  # 25: slower, listed only
    assert limits[suite.group]["gbps"] == 45.0 and limits[suite.group]["measured_gbps"] == [30.0, 45.0, 25.0]
    assert limits[suite.group]["distinct_ids"] == 1
    assert limits[suite.group]["gbps_max"] == 60.0, "the fastest round of any measurement is kept"
    assert limits[step.group]["gbps_max"] == 21.0
    assert asked == [None, None, (2, "dot"), (2, "dot")]  # again: only the configuration that won


def test_matched_reference_moves_the_bytes_it_says():
    from gpt2_conformance.bench import bandwidth

    import numpy as np

    width = bandwidth.GEMV_WIDTH
    rows, tail = bandwidth.READERS["gemv"](np.ones(3 * width + 232, np.float32))  # 3 rows, then 232
    assert rows.sum() == 3 * width and tail == 1.0  # every element read

    for read, write in ((3 << 20, 1 << 20), (1 << 20, 3 << 20), (2 << 20, 2 << 20)):
        for reader in bandwidth.READERS:
            runs, moved = bandwidth.streams(read, write, 2, reader)
            assert moved == read + write and len(runs) == 2
            for run in runs:
                run()
    out = bandwidth.matched(3 << 20, 1 << 20, rounds=3, max_time=0)
    assert out["cache"] == "warm" and out["gbps"] > 0 and out["read"] == 3 << 20
    assert out["gbps"] == max(out["one_thread_gbps"], out.get("all_cores_gbps", 0)) and out["reader"] in bandwidth.READERS
    with pytest.raises(ValueError, match="matched.read=-1"):
        bandwidth.matched(-1, 8)


@pytest.mark.slow  # a real numpy child run at the bar shape, warm and cold
def test_a_real_numpy_run_gets_a_limit_for_every_row():
    """A real (small) run of the numpy reference, warm and cold: every timed row gets its own
    measured limit and is either a percentage of it or, above 100%, a model error naming its
    bytes, time and limit. Whether a row is above its limit is a measurement of this machine,
    reported by `bench` (its model-error lines), not asserted here: a timed test on a shared
    machine decides nothing (CI once saw a warm 154 MB head read at 115% of a stream measured
    while another job ran, and once NumPy's head, the limit's own sgemv, at 110% of its median
    but under its fastest round: shown as measured, as the rule says)."""
    plan = [wl.Workload("forward", "prefill", 8, 1024, 768), wl.Workload("forward", "prefill", 8, 1024, 768, cache="cold"),
            wl.Workload("forward", "decode", 64, 1, 768, 512), wl.Workload("logits", "decode", 1, 1, 768, 512)]
    request = {"backend": "numpy", "device": "cpu", "workloads": [w.as_dict() for w in plan],
               "bandwidth_bytes": 64 << 20, "min_rounds": 5, "max_rounds": 9, "max_time": 0.2, "warmup": 1,
               "modes": ["suite", "take-out"]}
    result = child.run(request)
    rows = [r for r in verdict.workload_rows([result]) if "stats" in r]
    assert len(rows) >= 5
    for row in rows:
        assert row["limit_gbps"] > 0 and row["limit_kind"], row["group"]
        limit = result["limits"][row["group"]]
        gbps = row["bytes"] / row["stats"]["median"] / 1e9
        pct = 100 * gbps / row["limit_gbps"]
        # a model error is judged against the fastest round its limit ran, not its median (the
        # module docstring): a row between the two is shown as measured, a little over 100%
        pct_of_fastest = 100 * gbps / limit["gbps_max"]
        if "model_error" in row:
            assert verdict.over_limit(pct_of_fastest) and "pct_limit" not in row, row["group"]
            assert f"{row['bytes'] / 1e6:.1f} MB" in row["model_error"], row["model_error"]
        else:
            assert row["pct_limit"] == pytest.approx(pct) and not verdict.over_limit(pct_of_fastest), row["group"]
    assert len(verdict.model_errors(rows)) == len([r for r in rows if "model_error" in r])
