"""What the bench times and the least bytes each workload must move: the byte model against hand
counts (issue 12), the plan's shapes, and each backend's modes read from its registry entry
without importing its framework."""

from __future__ import annotations

import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.bench import workloads as wl
from helpers.bench_results import BAR_BYTES


def test_forward_bytes_are_the_issue_12_hand_count():
    w = wl.Workload("forward", "prefill", 8, 1024, 768)
    assert w == wl.standard("forward_prefill")
    # issue 12: "wte rows B*T*d*s + wpe rows T*d*s + h written B*T*d*s = 53.5 MB at that shape"
    assert wl.bytes_moved(w) == BAR_BYTES == 53_477_376
    assert wl.traffic(w) == (8 * 1024 * 768 * 4 + 1024 * 768 * 4, 8 * 1024 * 768 * 4)
    # a repeated id is one row read: 7,000 distinct ids of 8,192 read 7,000 rows
    assert wl.traffic(w, 7000) == ((7000 + 1024) * 768 * 4, 8 * 1024 * 768 * 4)
    assert wl.bytes_moved(wl.Workload("forward", "prefill", 8, 1024, 768, dtype="float16")) == BAR_BYTES // 2
    # decode at B=64 after 512 cached positions: 64 rows of wte, one of wpe, 64 of h
    assert wl.traffic(wl.Workload("forward", "decode", 64, 1, 768, 512)) == (65 * 768 * 4, 64 * 768 * 4)
    with pytest.raises(ValueError, match="distinct_ids=9000, but should be in"):
        wl.traffic(w, 9000)


def test_backward_logits_and_step_bytes_by_hand():
    V, C, d = 50257, 1024, 768
    assert (V, C) == (gpt2.N_VOCAB, gpt2.N_CTX)
    # backward: dh read once (one pass can feed both sums); both dense gradients written
    assert wl.traffic(wl.Workload("backward", "prefill", 8, 1024, d)) == (8 * 1024 * d * 4, (V + C) * d * 4)
    assert wl.traffic(wl.Workload("backward", "decode", 64, 1, d, 512)) == (64 * d * 4, (V + C) * d * 4)
    # head: wte read whole and h read, logits written
    head = wl.Workload("logits", "decode", 1, 1, d, 512)
    assert wl.traffic(head) == (V * d * 4 + d * 4, V * 4)
    assert wl.flops(head) == 2 * d * V
    assert wl.traffic(wl.Workload("logits", "prefill", 1, 1024, d)) == ((V + 1024) * d * 4, 1024 * V * 4)
    # decode step: wte read once (it holds the gathered row), one wpe row, logits written
    step = wl.Workload("step", "decode", 1, 1, d, 512)
    assert wl.traffic(step) == (V * d * 4 + d * 4, V * 4)
    assert wl.bytes_moved(step) < wl.bytes_moved(wl.step_parts(step)[0]) + wl.bytes_moved(head)
    assert [p.kind for p in wl.step_parts(step)] == ["forward", "logits"]


def test_plan_covers_the_issue_shapes():
    full = wl.plan()
    assert {w.n_embd for w in full if w.kind == "forward" and w.phase == "prefill"} == set(gpt2.SIZES.values())
    decode = [w for w in full if w.kind == "forward" and w.phase == "decode"]
    assert {w.batch for w in decode} == {1, 4, 16, 64} and all(w.seq == 1 and w.past_length > 0 for w in decode)
    assert {w.kind for w in full} == set(wl.KINDS)
    assert {w.name for w in full} == set(wl.NAMES)
    assert [w.shape_id for w in full if w.cache == "cold"] == ["B8-T1024-d768-cold"]
    steps = [w for w in full if w.kind == "step"]
    assert [(w.batch, w.seq) for w in steps] == [(1, 1)], "the decode step is timed at B=1, T=1"


def test_quick_and_the_gate_time_each_workload_at_its_standard_shape():
    assert [w.group for w in wl.plan(quick=True)] == ["step_decode B1-T1-d768-past512", "forward_prefill B8-T1024-d768"]
    for name in wl.NAMES:
        w = wl.standard(name)
        assert w.name == name and w.n_embd == 768 and w.cache == "warm"
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        wl.standard("nope")


def test_modes_are_read_without_importing_the_framework():
    from gpt2_conformance.backends.numpy import bench

    assert wl.modes_of("numpy") == list(bench.MODES)
    for backend in ("torch", "tensorflow", "jax"):
        modes = wl.modes_of(backend)
        assert "suite" in modes and len(modes) >= 2
