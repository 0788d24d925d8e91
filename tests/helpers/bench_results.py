"""Synthetic bench inputs for the bench's tests: what a child returns (child_result), what the
parent asks a child for (child_request), the `bench` command line (bench_args), and the outputs
written from a result (write_outputs)."""

from __future__ import annotations

from gpt2_conformance.bench import files, verdict
from gpt2_conformance.bench import workloads as wl

# the least bytes of the bar shape, by hand: wte rows + wpe rows once + h
BAR_BYTES = 8 * 1024 * 768 * 4 + 1024 * 768 * 4 + 8 * 1024 * 768 * 4


def timed_record(mode, w, median):
    """One timed (mode, workload) of a child's result, its five samples around `median`."""
    from gpt2_conformance.bench.timing import Timing

    samples = [median * f for f in (0.98, 1.0, 1.0, 1.01, 1.02)]  # a tight run: a 10% change is judgeable
    t = Timing(first_call_s=0.5, samples=samples, cpu_ratio=1.0)
    return {"mode": mode, "workload": w.as_dict(), "first_call_s": 0.5, "samples": samples, "cpu_ratio": 1.0,
            "stats": t.stats(), "distinct_ids": w.batch * w.seq}


def child_result(backend="numpy", median=0.004, limit=18.0, modes=("suite",), workloads=None):
    """A child's result: every workload timed at `median` in every mode, each workload's own
    (matched) limit `limit` GB/s (a dict {cache state: GB/s} gives warm and cold apart)."""
    workloads = workloads or [wl.Workload("forward", "prefill", 8, 1024, 768)]
    recs = [timed_record(m, w, median) for m in modes for w in workloads]
    per_state = limit if isinstance(limit, dict) else {"warm": limit, "cold": limit}
    limits = {w.group: {"read": wl.traffic(w)[0], "write": wl.traffic(w)[1], "gbps": per_state[w.cache],
                        "gbps_min": per_state[w.cache], "gbps_max": per_state[w.cache], "cache": w.cache,
                        "threads": 1, "distinct_ids": w.batch * w.seq} for w in workloads}
    bw = {"bytes": 1 << 20, "copy_gbps": 40.0, "copy_gbps_min": 40.0, "copy_gbps_max": 40.0,
          "gather_gbps": 20.0, "gather_gbps_min": 1.0, "gather_gbps_max": 1.0}
    return {"backend": backend, "device": "cpu", "records": recs, "bandwidth": bw, "limits": limits,
            "cache": {"llc_bytes": 32 << 20, "flush": "read 256 MiB before each timed call"},
            "modes": {m: m for m in modes}, "suite_mode": modes[0], "fastest_mode": modes[-1],
            "check": {m: "on" for m in modes}, "cores": 2, "implementation": f"{backend} 1.0"}


def write_outputs(tmp_path, results, name="bench"):
    """(rows, {kind: path}) of every output written from `results` to tmp_path/name."""
    rows = verdict.workload_rows(results)
    paths = files.write_all(results, rows, {"device": "cpu", "root": "."}, str(tmp_path / name))
    return rows, paths


def child_request(backend, device="cpu"):
    """A child's request at one tiny decode shape and as few rounds as it takes: the plumbing."""
    w = wl.Workload("forward", "decode", 1, 1, 768, 3)
    return {"backend": backend, "device": device, "workloads": [w.as_dict()], "bandwidth_bytes": 1 << 20,
            "min_rounds": 1, "max_rounds": 2, "max_time": 0, "warmup": 0}


def bench_args(tmp_path, *extra):
    """`gpt2-conformance bench --backend numpy --out-dir tmp_path/out [extra]`, parsed."""
    import argparse

    from gpt2_conformance.bench import command

    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", "--backend", "numpy", "--out-dir", str(tmp_path / "out"), *extra])
