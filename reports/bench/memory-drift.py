"""Where this machine's memory speed moves: between buffers, over time in one process, or
between processes?

1. Placement: in one process, six pairs of 48 MiB buffers (each more than the LLC), each copied
   on both cores, round robin, 15 rounds: if the pages a buffer got decided its speed, the
   buffers' medians would differ by more than each one's rounds do.
2. Time: one process, blocks of BLOCK_SECONDS one after the other; in each, rounds of the bar shape's
   stream (its limit's bytes, bandwidth.stream_call, on one thread and on both cores, the faster
   counting as in the bench), NumPy's random-order gather of the bar's rows on both cores, and a
   bar-shape row (default torch's suite mode), each a 10 ms block after 10 ms untimed
   (timing.paired). Per block: the stream's GB/s, the gather's and the row's time over the
   stream's (the paired ratio), medians over the block's rounds.
3. Processes: the same, one block in each of several fresh processes.

Every process runs with the bench's default allocator settings (`--malloc retain`).

    python reports/bench/memory-drift.py [BLOCKS] [PROCESSES] [BLOCK_SECONDS] [BACKEND MODE]

(defaults 12, 8, 1.5, torch suite; a block of 1.5 s holds about as many rounds as the bench
pairs a bar-shape row with, child.PAIRED_ROUNDS_BAR).

Needs the project and torch installed (pip install -c constraints.txt -e '.[torch]').
"""

import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpt2_conformance.bench import bandwidth, child, timing, workloads
from gpt2_conformance.bench.command import MALLOC_ENV
from gpt2_conformance.bench.processes import cross_process_spread_pct

BAR = workloads.Workload("forward", "prefill", 8, 1024, 768)
BUFFER_FLOATS = (48 << 20) // 4


def spread(values) -> float:
    """(max - min) / median, in %: the bench's spread between processes, applied to blocks and buffers too."""
    return cross_process_spread_pct(values, statistics.median(values))


def placement(pool, buffers: int = 6, rounds: int = 15) -> dict:
    pairs = [(np.ones(BUFFER_FLOATS, np.float32), np.ones(BUFFER_FLOATS, np.float32)) for _ in range(buffers)]
    half = BUFFER_FLOATS // 2
    cuts = [slice(0, half), slice(half, BUFFER_FLOATS)]
    gbps = [[] for _ in pairs]
    for _ in range(rounds):
        for k, (src, dst) in enumerate(pairs):
            def copy():
                list(pool.map(lambda c: np.copyto(dst[c], src[c]), cuts))
            copy()
            t0 = time.perf_counter()
            for _ in range(3):
                copy()
            gbps[k].append(3 * 2 * src.nbytes / (time.perf_counter() - t0) / 1e9)
    medians = [statistics.median(g) for g in gbps]
    return {"buffer_medians_gbps": medians,
            "between_buffers_pct": spread(medians),
            "within_a_buffer_pct": statistics.median(spread(g) for g in gbps)}


def blocks(pool, count: int, seconds: float, backend: str, mode: str) -> list[dict]:
    hooks = child._hooks(backend)
    wte, wpe = child.tables(BAR.n_embd)
    ids = child.inputs(BAR)[0]
    runner = hooks.Runner(wte, wpe, mode, "cpu")
    call, sync = child.make_call(runner, BAR, runner.put(ids), 0, None, None)
    flat = ids.reshape(-1).astype(np.intp)
    read, write = workloads.traffic(BAR, int(np.unique(flat).size))
    streams = [bandwidth.stream_call(read, write, threads, "max", pool)[0] for threads in (1, 2)]
    h = np.empty((flat.size, BAR.n_embd), np.float32)
    halves = [slice(0, flat.size // 2), slice(flat.size // 2, flat.size)]

    def gather():
        list(pool.map(lambda r: np.take(wte, flat[r], axis=0, out=h[r], mode="clip"), halves))

    out = []
    for _ in range(count):
        rounds = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            rounds += timing.paired(call, [*streams, gather], sync, rounds=1, min_sample_s=0.01)
        stream = [min(s1, s2) for _, s1, s2, _ in rounds]
        out.append({"stream_gbps": statistics.median((read + write) / s / 1e9 for s in stream),
                    "gather_pct": statistics.median(100 * s / g for s, (_, _, _, g) in zip(stream, rounds)),
                    "row_pct": statistics.median(100 * s / r for s, (r, _, _, _) in zip(stream, rounds)),
                    "rounds": len(rounds)})
    return out


def run_child(count: int, seconds: float, backend: str, mode: str) -> None:
    with ThreadPoolExecutor(2) as pool:
        print(json.dumps({"placement": placement(pool), "blocks": blocks(pool, count, seconds, backend, mode)}))


def fresh(count: int, seconds: float, backend: str, mode: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", str(count), str(seconds), backend, mode],
                          check=True, capture_output=True, text=True,
                          env={**os.environ, **MALLOC_ENV["retain"]})  # the bench's allocator (bench/command.py)
    return json.loads(done.stdout.strip().splitlines()[-1])


def line(name: str, values, unit: str) -> str:
    return (f"  {name:34s} {min(values):6.1f} .. {max(values):6.1f} {unit:5s} median {statistics.median(values):6.1f}"
            f"  spread {spread(values):5.1f}%")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        return run_child(int(argv[1]), float(argv[2]), argv[3], argv[4])
    count = int(argv[0]) if argv else 12
    processes = int(argv[1]) if len(argv) > 1 else 8
    seconds = float(argv[2]) if len(argv) > 2 else 1.5
    backend, mode = (argv[3], argv[4]) if len(argv) > 4 else ("torch", "suite")
    long = fresh(count, seconds, backend, mode)
    singles = [fresh(1, seconds, backend, mode) for _ in range(processes)]
    place = [long["placement"], *(s["placement"] for s in singles)]
    print(f"1. placement, {len(place)} processes: between six buffers of one process "
          f"{min(p['between_buffers_pct'] for p in place):.1f}..{max(p['between_buffers_pct'] for p in place):.1f}%, "
          f"one buffer's rounds {min(p['within_a_buffer_pct'] for p in place):.1f}.."
          f"{max(p['within_a_buffer_pct'] for p in place):.1f}% (medians over the buffers)")
    sections = [(f"2. one process, {count} blocks of {seconds} s", long["blocks"])]
    if singles:
        sections.append((f"3. {processes} fresh processes, one block each", [s["blocks"][0] for s in singles]))
    for title, rows in sections:
        print(f"{title} ({min(r['rounds'] for r in rows)}-{max(r['rounds'] for r in rows)} rounds a block):")
        print(line("stream (its limit's bytes)", [r["stream_gbps"] for r in rows], "GB/s"))
        print(line("NumPy gather / stream", [r["gather_pct"] for r in rows], "%"))
        print(line(f"{backend} {mode} row / stream (paired %)", [r["row_pct"] for r in rows], "%"))


if __name__ == "__main__":
    main(sys.argv[1:])
