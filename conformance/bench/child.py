"""One backend, one process: `python -m conformance.bench.child REQUEST.json RESULT.json`.

Imports only that backend's framework, measures the memory bandwidth here (numpy on the CPU,
the backend's device kernels on a GPU), then times every (mode, workload) through
backends/<name>/bench.py (or, for a backend without one, conformance/bench/adapter_hooks.py)
and writes one JSON result. A workload that raises is recorded with
its error; the others still run.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback

import numpy as np

from conformance import gpt2
from conformance.bench import bandwidth, cache, timing, workloads

OWN_HOOKS = ("numpy", "torch", "tensorflow", "jax")  # the backends with a backends/<fw>/bench.py
BAR_MIN_ROUNDS = 60  # timed rounds at the bar shape, warm, in every run (quick too)


def _hooks(backend: str):
    """backends/<fw>/bench.py where the backend has its own hooks, else the generic hooks
    around its Adapter (third-party implementations, plug-ins, module:factory specs)."""
    if backend in OWN_HOOKS:
        return importlib.import_module(f"backends.{backend}.bench")
    from conformance.bench import adapter_hooks

    adapter_hooks.configure(backend)
    return adapter_hooks


def _tables(d: int):
    rng = np.random.default_rng(d)
    wte = (rng.standard_normal((gpt2.N_VOCAB, d), np.float32) * np.float32(gpt2.WTE_INIT_STD))
    wpe = (rng.standard_normal((gpt2.N_CTX, d), np.float32) * np.float32(gpt2.WPE_INIT_STD))
    return wte, wpe


def _inputs(w: workloads.Workload):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, gpt2.N_VOCAB, (w.batch, w.seq), dtype=np.int32)
    dh = rng.standard_normal((w.batch, w.seq, w.n_embd), np.float32) if w.kind == "backward" else None
    h = rng.standard_normal((w.batch, w.seq, w.n_embd), np.float32) if w.kind == "logits" else None
    return ids, dh, h


def run(request: dict) -> dict:
    backend, device = request["backend"], request["device"]
    t_import = time.perf_counter()
    hooks = _hooks(backend)
    import_s = time.perf_counter() - t_import
    ok, why = hooks.available(device)
    result = {"backend": backend, "device": device, "import_s": import_s, "records": [], "skipped": None,
              "modes": hooks.MODES, "suite_mode": hooks.SUITE_MODE, "fastest_mode": hooks.FASTEST_MODE,
              "check": hooks.CHECK, "cores": timing.cores()}
    if not ok:
        result["skipped"] = why
        return result
    result["threads_setting"] = hooks.threads_setting()
    nbytes = request.get("bandwidth_bytes", bandwidth.DEFAULT_BYTES)
    kernels = hooks.device_kernels(nbytes, device)
    plan = [workloads.Workload(**w) for w in request["workloads"]]
    cold = {w for w in plan if w.cache == "cold"}
    flush = None
    if kernels is not None:
        (nb, copy, gather), sync = kernels
        result["bandwidth"] = bandwidth.measure(nb, kernels=lambda _: (nb, copy, gather), sync=sync)
        if cold:
            flush = lambda: sync(copy())  # noqa: E731 - a device copy of nb bytes evicts the L2
            result["cache"] = {"llc_bytes": None, "flush": f"device copy of {nb / 2**20:.0f} MiB before each timed call"}
    else:
        result["bandwidth"] = bandwidth.measure(nbytes)
        if cold:
            flush = cache.HostFlusher()
            result["cache"] = {"llc_bytes": cache.llc_bytes(), "flush": flush.describe(), "cold_copy": {}}
            for w in cold:  # a copy of h's bytes ([B, T, d]), cold
                h_bytes = w.batch * w.seq * w.n_embd * workloads.ITEMSIZE[w.dtype]
                result["cache"]["cold_copy"][w.shape_id] = bandwidth.cold_copy(h_bytes, flush)
    modes = request.get("modes") or list(hooks.MODES)
    limits = dict(min_rounds=request.get("min_rounds", 5), max_rounds=request.get("max_rounds", 30),
                  max_time=request.get("max_time", 2.0), warmup=request.get("warmup", 2))
    for d in sorted({w.n_embd for w in plan}):
        wte, wpe = _tables(d)  # one size in memory at a time: the last size's tables are freed here
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
                ids, dh, h = _inputs(w)
                rec = {"mode": mode, "workload": w.as_dict(), "setup_s": setup_s}
                try:
                    call = runner.make(w, runner.put(ids), w.past_length,
                                       dh=None if dh is None else runner.put(dh), h=None if h is None else runner.put(h))
                    if call is None:
                        continue
                    lim = dict(limits)
                    if w.kind == "logits" and w.phase == "prefill":
                        lim.update(min_rounds=3, warmup=1)
                    if w.is_bar_shape:  # the verdict's shape: ~2 ms calls, often bimodal on 2 cores;
                        # 15 rounds left torch's median 40% off its run-to-run value in a quick run
                        lim.update(min_rounds=max(lim["min_rounds"], BAR_MIN_ROUNDS),
                                   max_rounds=max(lim["max_rounds"], BAR_MIN_ROUNDS))
                    t = timing.measure(call, runner.sync, **lim, before=flush if w.cache == "cold" else None)
                    rec.update(first_call_s=t.first_call_s, samples=t.samples, cpu_ratio=t.cpu_ratio,
                               faults_per_call=t.faults_per_call, stats=t.stats())
                except Exception as exc:  # noqa: BLE001
                    rec["error"] = f"{type(exc).__name__}: {exc}"[:500]
                    rec["traceback"] = traceback.format_exc()[-2000:]
                result["records"].append(rec)
                print(f"  {backend:10s} {mode:13s} {w.name:16s} {w.shape_id:22s} "
                      + (f"median {t.median * 1e3:9.3f} ms" if "stats" in rec else rec.get("error", "")), flush=True)
            del runner
    return result


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
