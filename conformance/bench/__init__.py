"""`gpt2-conformance bench`: the implementations ranked by speed on the same work, each by its
time relative to the fastest with a 95% confidence interval, from blocks timed in turns in one
run; and a gate that times a change against its baseline the same way.

    workloads.py  what is timed, at which shapes, and the least bytes each must move
    worker.py     one backend's process: builds its calls, times a block when asked
    timing.py     a block: lead-in, samples, their median; how busy other processes were
    bandwidth.py  each workload's limit: a numpy stream of the same bytes (the roofline column)
    cache.py      warm or cold: the last-level cache's size and the flush before a cold call
    session.py    the parent: starts the workers, gives them turns round by round
    ranking.py    paired ratios with bootstrap intervals; ranks and ties
    summary.py    the run's rows per workload, ranked
    gate.py       --adapter NEW --against BASE --fail-above PCT
    report.py     the console table and bench.md
    benchmark_json.py  bench.json in pytest-benchmark's layout, plus "ranking"
    plot.py       bench.png: ratios with their intervals as error bars
    compare.py    --compare BASELINE.json: advisory, two runs not timed together
    adapter_hooks.py  the bench hooks of any adapter without its own (third-party, plug-ins);
                  the NativeBench protocol they use is conformance/api/bench.py
    command.py    the `bench` subcommand
"""
