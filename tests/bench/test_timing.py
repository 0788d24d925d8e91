"""timing.py: a block's lead-in, samples and flush; faults per call; other processes' load."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from gpt2_conformance.bench import timing


def test_a_block_runs_its_lead_in_then_samples_for_at_least_its_seconds():
    calls = []
    # a call of microseconds, far below MIN_SAMPLE_S however busy the machine (a 1 ms sleep was
    # stretched past it on a loaded CI runner, and then rightly timed one call per sample)
    block = timing.block(lambda: calls.append(time.perf_counter()), seconds=0.03, lead_in=0.02)
    assert len(block.samples) >= timing.MIN_SAMPLES
    assert sum(block.samples) * block.calls_per_sample >= 0.03
    assert block.calls_per_sample >= 2, "a call far below MIN_SAMPLE_S is timed in samples of several calls"
    lead_in_calls = len(calls) - len(block.samples) * block.calls_per_sample
    assert lead_in_calls >= 10, f"{lead_in_calls} untimed calls, but 20 ms of lead-in holds many more"


def test_a_cold_block_flushes_before_every_sample_and_never_times_the_flush():
    flushes = []
    block = timing.block(lambda: None, seconds=0, lead_in=1.0, before=lambda: (flushes.append(1), time.sleep(0.02)))
    assert len(flushes) == len(block.samples) == timing.MIN_SAMPLES and block.calls_per_sample == 1
    assert block.median < 0.005, f"median={block.median * 1e3:.1f} ms, but the 20 ms flush must not be timed"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page-fault counts are Linux's")
def test_faults_per_call_tells_a_fresh_output_from_a_reused_one():
    import mmap

    buffer = np.empty(64 << 18, np.float32)  # 64 MiB
    reused = timing.block(lambda: buffer.fill(1.0), seconds=0, lead_in=0)
    fresh = timing.block(lambda: np.frombuffer(mmap.mmap(-1, 64 << 20), np.float32).fill(1.0), seconds=0, lead_in=0)
    # 64 MiB is 32 huge pages or 16384 small ones: either way far above a reused buffer's 0
    assert reused.faults_per_call < 2 <= 16 <= fresh.faults_per_call, (reused.faults_per_call, fresh.faults_per_call)


def test_other_load_counts_only_other_processes_inside_its_windows(monkeypatch):
    clock = {"busy": 100.0, "own": 10.0}
    monkeypatch.setattr(timing, "_system_busy_seconds", lambda: clock["busy"])
    load = timing.OtherLoad(lambda: clock["own"])
    with load.window():
        time.sleep(0.05)
        clock["busy"] += 0.05  # the bench's own: nothing else ran
        clock["own"] += 0.05
    assert load.cores() == pytest.approx(0.0)
    clock["busy"] += 5.0  # outside any window (a worker compiling): not counted
    with load.window():
        time.sleep(0.05)
        clock["busy"] += 0.06  # 0.05 s of another process beside 0.01 of our own
        clock["own"] += 0.01
    assert load.cores() == pytest.approx(0.5, rel=0.3)
    monkeypatch.setattr(timing, "_system_busy_seconds", lambda: None)
    unknown = timing.OtherLoad(lambda: 0.0)
    with unknown.window():
        pass
    assert unknown.cores() is None


def test_llc_is_read_from_sysfs_and_sizes_the_flush(tmp_path):
    from gpt2_conformance.api import machine
    from gpt2_conformance.bench import cache

    for index, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "64K"), (2, "Unified", "2048K"), (3, "Unified", "480M")]
    ):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert machine.llc_bytes(str(tmp_path)) == 480 << 20
    assert machine.llc_bytes(str(tmp_path / "missing")) is None
    assert cache.flush_bytes(480 << 20) == 960 << 20
    assert cache.flush_bytes(8 << 20) == cache.FLUSH_MIN_BYTES and cache.flush_bytes(4 << 30) == cache.FLUSH_MAX_BYTES
    assert cache.flush_bytes(None) == 512 << 20
