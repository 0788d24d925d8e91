"""One backend, one process: `python -m gpt2_conformance.bench.child REQUEST.json RESULT.json`.

Imports only that backend's framework, measures the memory bandwidth here (numpy on the CPU,
the backend's device kernels on a GPU) and each workload's own limit (a streaming reference
moving the same bytes in the same cache state: bandwidth.matched), then times every (mode,
workload) through backends/<name>/bench.py (or, for a backend without one,
conformance/bench/adapter_hooks.py: its native hooks and the Adapter API) and writes one JSON
result. A workload that raises is recorded with its error; the others still run.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.backend import REFERENCE
from gpt2_conformance.bench import bandwidth, cache, timing, workloads

BAR_MIN_ROUNDS = 60  # timed rounds at the bar shape, warm, in every run (quick too)
# a warm sample lasts at least this long (timing.measure's min_sample_s): a decode row's call is
# 20-200 us, and a sample of one such call spread 20-75% around its median
MIN_SAMPLE_S = 2e-3
# rounds of a row each followed by a round of its limit's streams (timing.paired): the row's paired
# %. A throwaway script's one-thread gather beside a one-thread stream, 300 pairs a process, moved
# 0.3-3.8% between processes where the medians moved 10-14% (reports/bench/cpu-2026-12-06-paired-x3.md);
# the bar shape on both cores still moved 28-46% (reports/bench/cpu-2026-12-06-threads.md)
PAIRED_ROUNDS = 9
PAIRED_ROUNDS_BAR = 15
# each side of a pair runs this long untimed, then this long timed: a warm stream run once after
# a row's call streamed 24-28 GB/s at the bar shape where run back to back it streamed 33-43 (the
# cache refills over several passes); 10 ms blocks brought it to 29-38
PAIRED_MIN_SAMPLE_S = 0.01


def _hooks(backend: str):
    """backends/<fw>/bench.py where the backend has its own hooks, else the hooks around its
    Adapter: its native ones and the Adapter API (third-party implementations, plug-ins,
    module:factory specs)."""
    from gpt2_conformance import registry

    entry = registry.entry(backend)
    if entry is not None and entry.bench_modes:
        return importlib.import_module(entry.bench_module)
    from gpt2_conformance.bench.adapter_hooks import AdapterHooks

    return AdapterHooks(backend)


def tables(d: int):
    rng = np.random.default_rng(d)
    wte = (rng.standard_normal((gpt2.N_VOCAB, d), np.float32) * np.float32(gpt2.WTE_INIT_STD))
    wpe = (rng.standard_normal((gpt2.N_CTX, d), np.float32) * np.float32(gpt2.WPE_INIT_STD))
    return wte, wpe


def inputs(w: workloads.Workload):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, gpt2.N_VOCAB, (w.batch, w.seq), dtype=np.int32)
    dh = rng.standard_normal((w.batch, w.seq, w.n_embd), np.float32) if w.kind == "backward" else None
    h = rng.standard_normal((w.batch, w.seq, w.n_embd), np.float32) if w.kind in ("logits", "step") else None
    return ids, dh, h


def distinct_ids(w: workloads.Workload) -> int:
    """Distinct token ids in the workload's input: the wte rows a forward must read."""
    return int(np.unique(inputs(w)[0]).size)


def make_call(runner, w: workloads.Workload, ids, past_length, dh, h):
    """(call, sync) for w. A decode step is the mode's forward then its head in one call (the
    head reads an h of the same shape: its cost does not depend on the values), or the engine's
    own step where its native hooks bring one (NativeBench.step); None where the mode does not
    time w."""
    if w.kind != "step":
        return runner.make(w, ids, past_length, dh=dh, h=h), runner.sync
    own_step = getattr(runner, "make_step", None)
    step = own_step(ids, past_length) if own_step is not None else None
    if step is not None:
        return step, runner.sync
    fwd_w, head_w = workloads.step_parts(w)
    fwd, head = runner.make(fwd_w, ids, past_length), runner.make(head_w, ids, past_length, h=h)
    if fwd is None or head is None:
        return None, None
    return (lambda: (fwd(), head())), (lambda out: tuple(runner.sync(o) for o in out))


def workload_limits(plan: list, flush, kernels=None) -> dict:
    """{workload group: its limit}: the streaming reference moving the workload's least bytes
    (read and written as workloads.traffic counts them, distinct ids included) in its cache
    state, measured here (bandwidth.matched); one measurement per distinct (R, W, state). On a
    GPU, the device copy of the bandwidth measurement (not matched: not yet run on a GPU)."""
    out, measured = {}, {}
    for w in plan:
        u = distinct_ids(w)
        read, write = workloads.traffic(w, u)
        if kernels is not None:
            out[w.group] = dict(kernels, read=read, write=write, distinct_ids=u, cache=w.cache)
            continue
        key = (read, write, w.cache)
        if key not in measured:
            measured[key] = bandwidth.matched(read, write, flush=flush if w.cache == "cold" else None)
        out[w.group] = dict(measured[key], distinct_ids=u, measured_gbps=[measured[key]["gbps"]])
    return out


def remeasure_limit(limits: dict, w: workloads.Workload, flush) -> None:
    """Measure w's reference again, right after a row of w was timed, and keep the faster of the
    two for every workload with the same bytes and cache state. A limit is an upper bound, and
    this machine's memory speed drifts by tens of percent within a minute: measured once at the
    start of the process, a JAX logits row at decode read wte at 50 GB/s against a limit of 37
    (136%, a MODEL ERROR) on an idle machine. Every measurement stays listed (measured_gbps)."""
    lim = limits[w.group]
    # the configuration (threads, reader) that won at the start, few rounds: a full matched()
    # after every row doubled a quick run (406 s against 210-230)
    again = bandwidth.matched(lim["read"], lim["write"], flush=flush if w.cache == "cold" else None, rounds=5,
                              max_time=0.05, only=(lim["threads"], lim["reader"]))
    for other in limits.values():
        if (other.get("read"), other.get("write"), other.get("cache")) != (lim["read"], lim["write"], lim["cache"]):
            continue
        other.setdefault("measured_gbps", [other["gbps"]]).append(again["gbps"])
        fastest_round = max(other.get("gbps_max", other["gbps"]), again["gbps_max"])
        if again["gbps"] > other["gbps"]:
            other.update({k: v for k, v in again.items() if k != "distinct_ids"})
        other["gbps_max"] = fastest_round  # the fastest round of any measurement: what a model error is judged against


def paired_pct(call, sync, w: workloads.Workload, limit: dict, flush, pool) -> dict:
    """The row's % of its limit, round by round: its call and its limit's stream (the limit's
    reader) on one thread and on every core timed in pairs (timing.paired); in each pair the
    faster stream is the limit at that moment, and the ratio is scaled from the stream's bytes
    to the row's least bytes; the median over the pairs. The row's own median (measure) and the
    limit's (matched) are each timed in a block of their own, minutes apart in a long run, and
    this machine's memory speed moves 10-50% between them. Both thread counts in every pair,
    not the one that won at the start of the process: which one is faster moves with the
    machine (both cores streamed the bar shape's bytes 0.66-1.66x as fast as one, from one fresh
    process to the next), and a row paired with the slower one reads high. Against the faster
    in each pair, torch's bar row spread 30% over six processes where against the stream that
    won at the start it spread 41%; NumPy's 28% and 46% against 35% and 46%: the rest is the
    machine (reports/bench/cpu-2026-12-06-threads.md)."""
    thread_counts = sorted({1, machine.cores()})
    streams = [bandwidth.stream_call(limit["read"], limit["write"], threads, limit["reader"], pool)
               for threads in thread_counts]
    moved = streams[0][1]  # every split of the stream moves the same bytes
    pairs = timing.paired(call, [stream for stream, _ in streams], sync,
                          rounds=PAIRED_ROUNDS_BAR if w.is_bar_shape else PAIRED_ROUNDS,
                          before=flush if w.cache == "cold" else None, min_sample_s=PAIRED_MIN_SAMPLE_S)
    scale = workloads.bytes_moved(w, limit["distinct_ids"]) / moved
    ratios = [100 * scale * min(refs) / row for row, *refs in pairs]
    return {"pct": statistics.median(ratios), "rounds": len(pairs)}


def implementation(backend: str) -> str:
    """What is timed, with versions: the adapter's implementation() where it has one (the
    third-party backends), else the project's reference and its framework's version."""
    from importlib.metadata import PackageNotFoundError, version

    from gpt2_conformance import registry

    try:
        factory = registry.resolve(backend)
        describe = getattr(factory, "implementation", None)
        if describe is not None:
            return describe()
    except Exception as exc:  # noqa: BLE001 - a description is never worth the run
        return f"unknown ({type(exc).__name__})"
    entry = registry.entry(backend)
    if entry is not None and entry.kind == REFERENCE:
        framework = entry.requires[0]
        try:
            return f"gpt2-conformance reference ({framework} {version(framework)})"
        except PackageNotFoundError:
            return "gpt2-conformance reference"
    return backend


def run(request: dict) -> dict:
    backend, device = request["backend"], request["device"]
    t_import = time.perf_counter()
    hooks = _hooks(backend)
    import_s = time.perf_counter() - t_import
    ok, why = hooks.available(device)
    result = {"backend": backend, "device": device, "import_s": import_s, "records": [], "skipped": None,
              "modes": hooks.MODES, "suite_mode": hooks.SUITE_MODE, "fastest_mode": hooks.FASTEST_MODE,
              "check": hooks.CHECK, "cores": machine.cores(), "implementation": implementation(backend)}
    if not ok:
        result["skipped"] = why
        return result
    nbytes = request.get("bandwidth_bytes", bandwidth.DEFAULT_BYTES)
    kernels = hooks.device_kernels(nbytes, device)
    plan = [workloads.Workload(**w) for w in request["workloads"]]
    cold = {w for w in plan if w.cache == "cold"}
    flush = None
    if kernels is not None:
        (nb, copy, gather), sync = kernels
        result["bandwidth"] = bandwidth.measure(nb, kernels=lambda _: (nb, copy, gather), sync=sync)
        flush = lambda: sync(copy())  # noqa: E731 - a device copy of nb bytes evicts the L2
        result["cache"] = {"llc_bytes": None, "flush": f"device copy of {nb / 2**20:.0f} MiB before each timed call"}
        device_copy = {k: result["bandwidth"][k] for k in ("copy_gbps", "copy_gbps_min", "copy_gbps_max")}
        result["limits"] = workload_limits(plan, flush, kernels={"gbps": device_copy["copy_gbps"],
                                                        "gbps_min": device_copy["copy_gbps_min"],
                                                        "gbps_max": device_copy["copy_gbps_max"],
                                                        "method": "device copy of the bandwidth measurement"})
    else:
        result["bandwidth"] = bandwidth.measure(nbytes)
        flush = cache.HostFlusher() if cold else None
        result["cache"] = {"llc_bytes": cache.llc_bytes(), "flush": flush.describe() if flush else None}
        result["limits"] = workload_limits(plan, flush)
    result["threads_setting"] = hooks.threads_setting()
    modes = request.get("modes") or list(hooks.MODES)
    rounds = dict(min_rounds=request.get("min_rounds", 5), max_rounds=request.get("max_rounds", 30),
                  max_time=request.get("max_time", 2.0), warmup=request.get("warmup", 2))
    pool = ThreadPoolExecutor(machine.cores())  # the paired streams' pieces (bandwidth.stream_call)
    try:
        _time_rows(result, hooks, plan, modes, rounds, device, kernels, flush, pool)
    finally:
        pool.shutdown()
    return result


def _time_rows(result, hooks, plan, modes, rounds, device, kernels, flush, pool) -> None:
    backend = result["backend"]
    for d in sorted({w.n_embd for w in plan}):
        wte, wpe = tables(d)  # one size in memory at a time: the last size's tables are freed here
        for mode in modes:
            if mode not in hooks.MODES:
                continue
            try:
                t0 = time.perf_counter()
                runner = hooks.Runner(wte, wpe, mode, device)
                setup_s = time.perf_counter() - t0
            except Exception as exc:  # noqa: BLE001 - recorded, the other modes still run
                result["records"].append({"mode": mode, "n_embd": d, "error": f"setup: {exc!r}"})
                continue
            for w in (w for w in plan if w.n_embd == d):
                ids, dh, h = inputs(w)
                rec = {"mode": mode, "workload": w.as_dict(), "setup_s": setup_s,
                       "distinct_ids": result["limits"][w.group]["distinct_ids"]}
                try:
                    call, sync = make_call(runner, w, runner.put(ids), w.past_length,
                                       None if dh is None else runner.put(dh), None if h is None else runner.put(h))
                    if call is None:
                        continue
                    lim = dict(rounds)
                    if w.kind in ("logits", "step") and w.phase == "prefill":
                        lim.update(min_rounds=3, warmup=1)
                    if w.is_bar_shape:  # the verdict's shape: ~2 ms calls, often bimodal on 2 cores;
                        # 15 rounds left torch's median 40% off its run-to-run value in a quick run
                        lim.update(min_rounds=max(lim["min_rounds"], BAR_MIN_ROUNDS),
                                   max_rounds=max(lim["max_rounds"], BAR_MIN_ROUNDS))
                    t = timing.measure(call, sync, **lim, before=flush if w.cache == "cold" else None,
                                       min_sample_s=MIN_SAMPLE_S)
                    rec.update(first_call_s=t.first_call_s, samples=t.samples, cpu_ratio=t.cpu_ratio,
                               faults_per_call=t.faults_per_call, calls_per_sample=t.calls_per_sample,
                               stats=t.stats())
                    if kernels is None:
                        rec["paired"] = paired_pct(call, sync, w, result["limits"][w.group], flush, pool)
                except Exception as exc:  # noqa: BLE001
                    rec["error"] = f"{type(exc).__name__}: {exc}"[:500]
                    rec["traceback"] = traceback.format_exc()[-2000:]
                result["records"].append(rec)
                if kernels is None and "stats" in rec:
                    remeasure_limit(result["limits"], w, flush)
                print(f"  {backend:10s} {mode:13s} {w.name:16s} {w.shape_id:22s} "
                      + (f"median {t.median * 1e3:9.3f} ms" if "stats" in rec else rec.get("error", ""))
                      + (f", {rec['paired']['pct']:5.1f}% of its limit paired" if "paired" in rec else ""), flush=True)
            del runner


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        request = json.load(f)
    result = run(request)
    with open(argv[1], "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
