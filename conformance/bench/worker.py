"""One implementation's process: `python -m gpt2_conformance.bench.worker`, driven by
session.py over its stdin and stdout, one JSON line each way per command.

Why a process per backend that lives through the whole run: every framework gets a process of
its own (as the suite's runner gives it), and a turn on the machine costs one message, so the
parent can alternate implementations block by block and compare each with its neighbours in
time, where drift of the machine cancels. Starting a process per block would cost seconds of
imports each.

Commands ({"op": ...}):
  hello    {backend, device}: import the backend's hooks; what it offers (modes, checks, the
           implementation's name and version), or why it cannot run here (skipped).
  prepare  {workload, modes}: build each mode's runner and its call of the workload, run it once
           (trace, compile); rows with their keys. The pseudo-backend `limit` prepares the
           workload's streaming references instead.
  time     {key, seconds, lead_in}: one block of that call (timing.block).
  quit
Anything the backend prints goes to stderr (the parent's log file), never into the protocol.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import numpy as np

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.backend import REFERENCE
from gpt2_conformance.bench import bandwidth, cache, timing
from gpt2_conformance.bench import workloads as wl

LIMIT, LIMIT_MODE = "limit", "stream"  # the pseudo-backend whose rows are the streaming references


def tables(d: int):
    """GPT-2-shaped tables at the official init scales, the same in every worker."""
    rng = np.random.default_rng(d)
    wte = rng.standard_normal((gpt2.N_VOCAB, d), np.float32) * np.float32(gpt2.WTE_INIT_STD)
    wpe = rng.standard_normal((gpt2.N_CTX, d), np.float32) * np.float32(gpt2.WPE_INIT_STD)
    return wte, wpe


def inputs(w: wl.Workload):
    """(ids, dh, h) of a workload, the same in every worker."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, gpt2.N_VOCAB, (w.batch, w.seq), dtype=np.int32)
    dh = rng.standard_normal((w.batch, w.seq, w.n_embd), np.float32) if w.kind == "backward" else None
    h = rng.standard_normal((w.batch, w.seq, w.n_embd), np.float32) if w.kind in ("logits", "step") else None
    return ids, dh, h


def distinct_ids(w: wl.Workload) -> int:
    """Distinct token ids in the workload's input: the wte rows a forward must read."""
    return int(np.unique(inputs(w)[0]).size)


def make_call(runner, w: wl.Workload, ids, past_length, dh, h):
    """A zero-argument callable that runs w and waits for it (the runner's sync), or None where
    the mode does not time w. A decode step is the mode's forward then its head in one call, or
    the engine's own step where its native hooks bring one (NativeBench.step)."""
    sync = runner.sync
    if w.kind != "step":
        call = runner.make(w, ids, past_length, dh=dh, h=h)
        return None if call is None else (lambda: sync(call()))
    own_step = getattr(runner, "make_step", None)
    step = own_step(ids, past_length) if own_step is not None else None
    if step is not None:
        return lambda: sync(step())
    fwd_w, head_w = wl.step_parts(w)
    fwd, head = runner.make(fwd_w, ids, past_length), runner.make(head_w, ids, past_length, h=h)
    if fwd is None or head is None:
        return None
    return lambda: (sync(fwd()), sync(head()))


def hooks_of(backend: str):
    """backends/<fw>/bench.py where the backend has modes of its own, else the hooks around its
    Adapter (native hooks and the Adapter API: third-party implementations, plug-ins,
    module:factory specs)."""
    from gpt2_conformance import registry

    entry = registry.entry(backend)
    if entry is not None and entry.bench_modes:
        return importlib.import_module(entry.bench_module)
    from gpt2_conformance.bench.adapter_hooks import AdapterHooks

    return AdapterHooks(backend)


def implementation(backend: str) -> str:
    """What is timed: the adapter's own description (the third-party backends name their engine
    and its version), or for a reference backend its framework's version."""
    from importlib.metadata import version

    from gpt2_conformance import registry
    from gpt2_conformance.run.events import implementation as describe

    entry = registry.entry(backend)
    if entry is not None and entry.kind == REFERENCE:
        return f"gpt2-conformance reference ({entry.requires[0]} {version(entry.requires[0])})"
    return describe(registry.resolve(backend))


def error_of(exc: Exception) -> dict:
    return {"error": f"{type(exc).__name__}: {exc}"[:500], "traceback": traceback.format_exc()[-2000:]}


def key_of(mode: str, w: wl.Workload) -> str:
    return f"{mode}|{w.group}"


class Worker:
    def __init__(self):
        self.backend = self.device = None
        self.hooks = None
        self.calls: dict[str, tuple] = {}  # key -> (call, before)
        self.flush = None
        self._tables: tuple = (None, None, None)  # (n_embd, wte, wpe) of the last size prepared
        self.pool = ThreadPoolExecutor(machine.cores()) if machine.cores() > 1 else None

    def hello(self, backend: str, device: str) -> dict:
        self.backend, self.device = backend, device
        if backend == LIMIT:
            return {"modes": {LIMIT_MODE: "the workload's bytes streamed by numpy"}, "implementation": "numpy stream"}
        self.hooks = hooks_of(backend)
        ok, why = self.hooks.available(device)
        if not ok:
            return {"skipped": why}
        return {
            "modes": dict(self.hooks.MODES),
            "suite_mode": self.hooks.SUITE_MODE,
            "fastest_mode": self.hooks.FASTEST_MODE,
            "check": dict(self.hooks.CHECK),
            "default_mode": getattr(self.hooks, "DEFAULT_MODE", self.hooks.SUITE_MODE),
            "implementation": implementation(backend),
            "threads_setting": self.hooks.threads_setting(),
        }

    def prepare(self, workload: dict, modes: list[str]) -> dict:
        self.calls.clear()  # the last workload's runners and outputs go before the next are built
        gc.collect()
        w = wl.Workload(**workload)
        if w.cache == "cold" and self.flush is None:
            self.flush = cache.HostFlusher()
        if self.backend == LIMIT:
            return {"rows": self._prepare_limit(w)}
        if self._tables[0] != w.n_embd:
            self._tables = (w.n_embd, *tables(w.n_embd))
        _, wte, wpe = self._tables
        rows = []
        for mode in (m for m in modes if m in self.hooks.MODES):
            try:
                t0 = time.perf_counter()
                runner = self.hooks.Runner(wte, wpe, mode, self.device)
            except Exception as exc:  # noqa: BLE001 - recorded; the other modes still run
                rows.append({"key": key_of(mode, w), "mode": mode, "error": f"setup: {exc!r}"[:500]})
                continue
            rows.append(self._prepare_call(runner, mode, w, time.perf_counter() - t0))
        return {"rows": rows}

    def _prepare_call(self, runner, mode: str, w: wl.Workload, setup_s: float) -> dict:
        key = key_of(mode, w)
        row = {"key": key, "mode": mode, "setup_s": setup_s}
        if not wl.applies(self.backend, mode, w):
            return {**row, "skipped": f"mode {mode} does not time {w.kind}"}
        try:
            ids, dh, h = inputs(w)
            put = runner.put
            call = make_call(
                runner, w, put(ids), w.past_length, None if dh is None else put(dh), None if h is None else put(h)
            )
            if call is None:
                return {**row, "skipped": f"mode {mode} does not time {w.name} here"}
            t0 = time.perf_counter()
            call()
            row["first_call_s"] = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - this row is an error; the others still run
            return {**row, **error_of(exc)}
        self.calls[key] = (call, self.flush if w.cache == "cold" else None)
        return row

    def _prepare_limit(self, w: wl.Workload) -> list[dict]:
        distinct = distinct_ids(w)
        read, write = wl.traffic(w, distinct)
        before = self.flush if w.cache == "cold" else None
        rows = []
        for threads, (call, description) in bandwidth.fastest_streams(
            read, write, machine.cores(), self.pool, before
        ).items():
            key = key_of(f"{LIMIT_MODE}-{threads}", w)
            self.calls[key] = (call, before)
            rows.append(
                {
                    "key": key,
                    "mode": f"{LIMIT_MODE}-{threads}",
                    "description": description,
                    "bytes": read + write,
                    "distinct_ids": distinct,
                }
            )
        return rows

    def time(self, key: str, seconds: float, lead_in: float) -> dict:
        call, before = self.calls[key]
        return asdict(timing.block(call, seconds=seconds, lead_in=lead_in, before=before))

    def handle(self, request: dict) -> dict:
        op = request.pop("op")
        handlers: dict[str, Callable[..., dict]] = {"hello": self.hello, "prepare": self.prepare, "time": self.time}
        if op not in handlers:
            raise ValueError(f"unknown op {op!r}")
        return handlers[op](**request)


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever a framework prints lands in the log, not in the protocol
    worker = Worker()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "quit":
            break
        try:
            reply = worker.handle(request)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which names the row
            reply = error_of(exc)
        reply["cpu_s"] = time.process_time()  # every thread of this process
        protocol.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
