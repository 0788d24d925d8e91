"""What bounds the bar shape on this machine: its work split into NumPy kernels on the same bytes.

The bar shape (forward prefill, B=8, T=1024, d=768) reads 8,192 rows of wte in the order of the
ids, adds wpe's first 1,024 rows and writes h (25 MB). A framework's row in the bench is divided
by the streaming reference of the same bytes (bandwidth.matched: a copy), which reads its
source in address order. This module times, in one process, on the bench's own tables and ids
(bench/child.py) and with its timing (samples of >= 2 ms warm; one call after a cache flush
cold):

  limit            bandwidth.matched for the bar's bytes: the 100% of every bar line
  gather in order  np.take of 8,192 rows of wte in table order: the same bytes as the bar's
                   gather, read in address order
  gather           np.take of the bar's own rows (random ids, 7,576 distinct): what any
                   implementation that copies row by row must do before its add
  add              h += wpe[:T] over the gathered h: a second pass when not fused
  gather + add     the two, one after the other (NumPy's reference does this)
  tiled            the two per tile of 512 rows, so a tile of h is added while in cache

each on one thread and split over every core (the faster counts, as for the limit). The ratio
of "gather" to "gather in order" is what the ids' order costs; "gather" over the limit is the
ceiling of any row-by-row gather measured against a stream. Run it in fresh processes:
`python -m gpt2_conformance.bench.bar_profile` (the record: reports/bench/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpt2_conformance.api import machine
from gpt2_conformance.bench import bandwidth, cache, child, timing, workloads

TILE_ROWS = 512  # divides T: a tile never straddles two sequences
MIN_SAMPLE_S = 0.002  # as the bench times a warm call (bench/child.py)


def _bar(cache_state: str) -> workloads.Workload:
    return workloads.Workload("forward", "prefill", 8, 1024, 768, cache=cache_state)


def _kernels(wte, wpe, ids, out, threads: int, pool):
    """{name: call} on the bench's tables and ids, each split over `threads` pieces of whole
    sequences and writing h into `out` ([B*T, d])."""
    w = _bar("warm")
    in_order = np.arange(ids.size, dtype=np.intp)
    seq = w.seq
    # whole sequences per piece, so each piece adds wpe[:T] by broadcasting, as the reference does
    per = [(i * w.batch // threads, (i + 1) * w.batch // threads) for i in range(threads)]
    pieces = [slice(a * seq, b * seq) for a, b in per if b > a]

    def split(kernel):
        if threads == 1:
            return lambda: kernel(slice(0, ids.size))
        return lambda: list(pool.map(kernel, pieces))

    def add_rows(rows: slice):
        """h[rows] += wpe[row % T] for rows that start at a multiple of T or stay in one sequence."""
        start = rows.start % seq
        h = out[rows]
        if start == 0 and h.shape[0] % seq == 0:
            view = h.reshape(-1, seq, w.n_embd)
            np.add(view, wpe[:seq], out=view)
        else:
            np.add(h, wpe[start:start + h.shape[0]], out=h)

    def tiled(rows: slice):
        for start in range(rows.start, rows.stop, TILE_ROWS):
            tile = slice(start, min(start + TILE_ROWS, rows.stop))
            np.take(wte, ids[tile], axis=0, out=out[tile], mode="clip")
            add_rows(tile)

    gather = split(lambda r: np.take(wte, ids[r], axis=0, out=out[r], mode="clip"))
    add = split(add_rows)
    return {
        "gather in order": split(lambda r: np.take(wte, in_order[r], axis=0, out=out[r], mode="clip")),
        "gather": gather,
        "add": add,
        "gather + add": lambda: (gather(), add()),
        "tiled": split(tiled),
    }


def profile(rounds: int = 15, max_time: float = 0.5) -> dict:
    """{"rows": [{"kernel", "cache", "threads", "ms"}], "limit": {cache: {"gbps", "ms"}}, ...}."""
    w = _bar("warm")
    cores = machine.cores()
    flush = cache.HostFlusher()
    wte, wpe = child.tables(w.n_embd)
    ids = child.inputs(w)[0].reshape(-1).astype(np.intp)
    distinct = int(np.unique(ids).size)
    h = np.empty((ids.size, w.n_embd), np.float32)
    out = {"cores": cores, "llc_bytes": cache.llc_bytes(), "rows": [], "limit": {}}
    with ThreadPoolExecutor(cores) as pool:
        for state in ("warm", "cold"):
            before = flush if state == "cold" else None
            for threads in sorted({1, cores}):
                kernels = _kernels(wte, wpe, ids, h, threads, pool)
                for name, call in kernels.items():
                    t = timing.measure(call, min_rounds=rounds, max_rounds=max(rounds, 50), max_time=max_time,
                                       warmup=1, before=before, min_sample_s=0.0 if before else MIN_SAMPLE_S)
                    out["rows"].append({"kernel": name, "cache": state, "threads": threads, "ms": t.median * 1e3})
            read, write = workloads.traffic(_bar(state), distinct)
            limit = bandwidth.matched(read, write, flush=before)
            out["limit"][state] = {"gbps": limit["gbps"], "threads": limit["threads"],
                                   "ms": (read + write) / limit["gbps"] / 1e6, "bytes": read + write}
    out["distinct_ids"], out["shape"] = distinct, w.shape_id
    return out


def fastest(result: dict, kernel: str, state: str) -> dict:
    """The faster of one thread and every core for `kernel` in `state`."""
    return min((r for r in result["rows"] if r["kernel"] == kernel and r["cache"] == state), key=lambda r: r["ms"])


def render(results: list[dict]) -> str:
    """One line per kernel and cache state: the median over processes, each process's figure,
    and the limit's time over it (% of the limit, as a bar line counts)."""
    lines = [f"bar shape {results[0]['shape']}: {results[0]['distinct_ids']} distinct ids, "
             f"{results[0]['cores']} cores, LLC {(results[0]['llc_bytes'] or 0) / 2**20:.0f} MiB; "
             f"{len(results)} process(es); per kernel the faster of 1 thread and every core"]
    kernels = [r["kernel"] for r in results[0]["rows"] if r["cache"] == "warm" and r["threads"] == 1]
    for state in ("warm", "cold"):
        limits = [r["limit"][state]["ms"] for r in results]
        lines.append(f"  {state:4s} limit (the same bytes streamed)  {statistics.median(limits):6.3f} ms  "
                     f"[{' / '.join(f'{x:.3f}' for x in limits)}]  100%")
        for name in kernels:
            per = [fastest(r, name, state) for r in results]
            ms = [p["ms"] for p in per]
            pct = statistics.median(lim / m * 100 for lim, m in zip(limits, ms))
            lines.append(f"  {state:4s} {name:30s}  {statistics.median(ms):6.3f} ms  "
                         f"[{' / '.join(f'{x:.3f}' for x in ms)}]  {pct:4.0f}%  "
                         f"({'/'.join(str(p['threads']) for p in per)} thread(s))")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpt2_conformance.bench.bar_profile", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", help="write this process's figures here")
    parser.add_argument("--render", nargs="+", metavar="JSON", help="time nothing: print the table of these files")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: must be >= 1")
    if args.render:
        results = []
        for path in args.render:
            try:
                with open(path, encoding="utf-8") as f:
                    results.append(json.load(f))
            except (OSError, ValueError) as exc:
                parser.error(f"--render {path}: {exc}")
        try:
            print(render(results))
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            parser.error(f"--render {' '.join(args.render)}: not what this module writes with --json "
                         f"({type(exc).__name__}: {exc})")
        return 0
    result = profile(args.rounds)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    print(render([result]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
