"""Do the bench's processes differ in transparent huge pages, and does that move their figures?

Runs the bar shape's gather + add (B=8, T=1024, d=768, NumPy, one thread) and a 77 MB copy in
fresh processes, alternating NumPy's huge pages on (its default: madvise(MADV_HUGEPAGE) for
arrays over 4 MiB) and off (NUMPY_MADVISE_HUGEPAGE=0), and prints, per process, the share of
each large array held in huge pages (AnonHugePages / Rss over the mappings the array spans,
from /proc/self/smaps) beside the two medians. Linux only.

    python reports/bench/huge-pages-per-process.py [PROCESSES_PER_SETTING]
"""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np


def huge_share(a: np.ndarray) -> float:
    """AnonHugePages / Rss summed over the mappings that overlap a's buffer."""
    lo_a = a.__array_interface__["data"][0]
    hi_a = lo_a + a.nbytes
    total = {"Rss": 0, "AnonHugePages": 0}
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
            if m:  # numpy madvises from the array's first page boundary on, which splits its mapping
                inside = int(m.group(1), 16) < hi_a and int(m.group(2), 16) > lo_a
            elif inside:
                key, value = line.split(":", 1)
                if key in total:
                    total[key] += int(value.split()[0])
    return total["AnonHugePages"] / max(total["Rss"], 1)


def median_ms(fn, warmup: int, rounds: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def one_process() -> dict:
    rng = np.random.default_rng(0)
    wte = rng.standard_normal((50257, 768), dtype=np.float32)
    wpe = rng.standard_normal((1024, 768), dtype=np.float32)
    ids = rng.integers(0, 50257, size=(8, 1024))
    h = np.empty((8, 1024, 768), np.float32)
    src = np.ones((25000, 768), np.float32)  # written, so the copy reads real pages, not the zero page
    dst = np.empty_like(src)

    def gather_add():
        np.take(wte, ids, axis=0, out=h)
        np.add(h, wpe, out=h)

    return {
        "gather_add_ms": median_ms(gather_add, 20, 200),
        "copy_ms": median_ms(lambda: np.copyto(dst, src), 5, 50),
        "huge": {name: huge_share(a) for name, a in (("wte", wte), ("h", h), ("src", src), ("dst", dst))},
    }


def main(per_setting: int) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs = {"on": [], "off": []}
    for _ in range(per_setting):
        for setting in runs:
            env["NUMPY_MADVISE_HUGEPAGE"] = "1" if setting == "on" else "0"
            out = subprocess.run(
                [sys.executable, __file__, "--one"], env=env, capture_output=True, text=True, check=True
            ).stdout
            run = json.loads(out)
            runs[setting].append(run)
            shares = " ".join(f"{name} {share:4.0%}" for name, share in run["huge"].items())
            print(
                f"madvise {setting:>3}: huge pages: {shares}; gather + add {run['gather_add_ms']:.2f} ms, "
                f"copy {run['copy_ms']:.2f} ms",
                flush=True,
            )
    for setting, done in runs.items():
        gathers = [run["gather_add_ms"] for run in done]
        copies = [run["copy_ms"] for run in done]
        print(
            f"huge pages {setting}: gather + add {min(gathers):.2f}-{max(gathers):.2f} ms "
            f"(median {np.median(gathers):.2f}), copy {min(copies):.2f}-{max(copies):.2f} ms "
            f"(median {np.median(copies):.2f}) over {len(done)} processes"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--one"]:
        print(json.dumps(one_process()))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
