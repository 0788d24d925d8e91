"""What a framework's threads do after its call returns, and which stream a row should be
paired with, process by process.

1. After one bar-shape call (B=8, T=1024, d=768, the bench's own torch runner, mode suite), the
   process's CPU time every 2 ms while its main thread sleeps: torch's OpenMP workers spinning.
2. In fresh processes: the bar shape's warm limit measured as the bench does at a child's start
   (bandwidth.matched: which thread count and reader win), then a row (default NumPy's suite
   mode, a gather + add split over both cores) timed in pairs with that reader's stream on one
   thread and on both (timing.paired, 25 pairs of 10 ms blocks). From the same pairs, the row's
   paired % against the one-thread stream, against the two-thread one, against the one that
   won at the start (the bench before this script), and against the faster of the two in each
   pair (the bench after it).

    python reports/bench/threads-after-a-call.py [PROCESSES] [BACKEND MODE]

Needs the project and torch installed (pip install -c constraints.txt -e '.[torch]').
"""

import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from gpt2_conformance.bench import bandwidth, child, timing, workloads
from gpt2_conformance.bench.processes import cross_process_spread_pct

BAR = workloads.Workload("forward", "prefill", 8, 1024, 768)


def bar_call(backend: str, mode: str):
    hooks = child._hooks(backend)
    wte, wpe = child.tables(BAR.n_embd)
    runner = hooks.Runner(wte, wpe, mode, "cpu")
    call, sync = child.make_call(runner, BAR, runner.put(child.inputs(BAR)[0]), 0, None, None)
    return lambda: sync(call())


def cpu_after_a_call(trials: int = 3) -> None:
    call = bar_call("torch", "suite")
    for _ in range(20):
        call()
    for trial in range(trials):
        call()
        cpu0, wall0, marks = time.process_time(), time.perf_counter(), []
        while time.perf_counter() - wall0 < 0.03:
            time.sleep(0.002)
            marks.append(f"{(time.perf_counter() - wall0) * 1e3:.0f} ms: {(time.process_time() - cpu0) * 1e3:.1f}")
        print(f"torch, CPU ms used since its call returned, trial {trial + 1}: " + ", ".join(marks), flush=True)


def one_process(backend: str, mode: str) -> dict:
    distinct = child.distinct_ids(BAR)
    read, write = workloads.traffic(BAR, distinct)
    limit = bandwidth.matched(read, write)
    call = bar_call(backend, mode)
    pool = ThreadPoolExecutor(2)
    streams = [bandwidth.stream_call(read, write, threads, limit["reader"], pool) for threads in (1, 2)]
    pairs = timing.paired(call, [stream for stream, _ in streams], rounds=25, min_sample_s=0.01)
    pool.shutdown()
    scale = workloads.bytes_moved(BAR, distinct) / streams[0][1]
    won_at_start = limit["threads"]
    return {"won_at_start": f"{won_at_start} thread(s), {limit['reader']}",
            "one": statistics.median(100 * scale * one / row for row, one, _ in pairs),
            "two": statistics.median(100 * scale * two / row for row, _, two in pairs),
            "at_start": statistics.median(100 * scale * (one, two)[won_at_start - 1] / row for row, one, two in pairs),
            "faster": statistics.median(100 * scale * min(one, two) / row for row, one, two in pairs),
            "two_over_one": statistics.median(one / two for _, one, two in pairs)}


def main(processes: int, backend: str, mode: str) -> None:
    cpu_after_a_call()
    runs = []
    for k in range(processes):
        out = subprocess.run([sys.executable, __file__, "--one", backend, mode], capture_output=True, text=True,
                             check=True).stdout
        runs.append(json.loads(out.splitlines()[-1]))
        r = runs[-1]
        print(f"process {k + 1}: {backend} {mode} paired with the stream on 1 thread {r['one']:.1f}%, on 2 "
              f"{r['two']:.1f}%, on what won at the start ({r['won_at_start']}) {r['at_start']:.1f}%, on the faster "
              f"in each pair {r['faster']:.1f}%; 2 threads streamed {r['two_over_one']:.2f}x 1", flush=True)
    for key, what in (("one", "paired % against 1 thread"), ("two", "against 2 threads"),
                      ("at_start", "against what won at the start"), ("faster", "against the faster in each pair"),
                      ("two_over_one", "2 threads / 1 thread")):
        values = [r[key] for r in runs]
        print(f"{what}: {min(values):.2f}..{max(values):.2f} (median {statistics.median(values):.2f}, "
              f"spread {cross_process_spread_pct(values, statistics.median(values)):.0f}%)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one_process(*sys.argv[2:4])))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 6, *(sys.argv[2:4] or ("numpy", "suite")))
