"""`gpt2-conformance bench`: cross-framework timings of the embedding forward (gather + add),
its backward (scatter-add into wte's and wpe's gradients) and the tied logits (h @ wte^T),
each against this machine's memory bandwidth measured in the same process.

    bandwidth.py  STREAM-like copy and a row gather of the same bytes (numpy; on a GPU the
                  backend's own device copy)
    cache.py      warm or cold: the last-level cache's size and the flush before a cold call
    workloads.py  what is timed, at which shapes, and the bytes each one moves
    timing.py     first call (trace/compile) apart from steady state; median, IQR, min/max;
                  threads used (process CPU time / wall time); page faults per call; how
                  busy other processes kept the machine
    child.py      one backend in one process: runs its backends/<fw>/bench.py hooks
    adapter_hooks.py  the same hooks for any other adapter, through the Adapter API
    verdict.py    the rows each result gives, the bars (warm and cold), the decode-step table
    table.py      the console table and bench.md
    benchmark_json.py  bench.json in pytest-benchmark's layout (--compare reads it)
    plot.py       bench.png (matplotlib, imported only to draw)
    files.py      every output file of a run, written in one place
    compare.py    --compare BASELINE.json --fail-above PCT
    command.py    the `bench` subcommand
"""
