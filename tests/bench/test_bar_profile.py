"""The bar shape's profile (conformance/bench/bar_profile.py): its kernels do the bar's work (a
profile of other work would explain nothing), its table divides the limit's time by each
kernel's, and bad arguments are clear errors."""

from __future__ import annotations

import concurrent.futures
import json

import numpy as np
import pytest

from gpt2_conformance.bench import bar_profile

B, T, D = 8, 1024, 768


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernels_do_the_bars_gather_and_add(threads):
    """Every kernel on 1, 2 and 3 pieces (3 does not divide B: uneven pieces of whole sequences)."""
    rng = np.random.default_rng(0)
    wte = rng.standard_normal((B * T, D), dtype=np.float32)  # as many rows as ids: "in order" reads each once
    wpe = rng.standard_normal((T, D), dtype=np.float32)
    ids = rng.integers(0, B * T, B * T).astype(np.intp)
    h = np.empty((B * T, D), np.float32)
    expected = {"gather in order": wte, "gather": wte[ids],
                "gather + add": (wte[ids].reshape(B, T, D) + wpe).reshape(-1, D)}
    expected["tiled"] = expected["gather + add"]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        kernels = bar_profile._kernels(wte, wpe, ids, h, threads, pool)
        assert set(kernels) == {"gather in order", "gather", "add", "gather + add", "tiled"}
        for name, want in expected.items():
            h[:] = np.nan
            kernels[name]()
            assert np.array_equal(h, want), f"{name} on {threads} piece(s): h is not {name} of the bar's rows"
        kernels["gather"]()
        kernels["add"]()
        assert np.array_equal(h, expected["gather + add"]), f"add on {threads} piece(s): h is not wte[ids] + wpe[t]"


def _result(limit_ms: float, ms: dict[str, float]) -> dict:
    rows = [{"kernel": k, "cache": c, "threads": t, "ms": v * (1 if t == 2 else 1.5)}
            for c in ("warm", "cold") for t in (1, 2) for k, v in ms.items()]
    return {"shape": "B8-T1024-d768", "distinct_ids": 7576, "cores": 2, "llc_bytes": 32 << 20, "rows": rows,
            "limit": {c: {"ms": limit_ms, "gbps": 50.0, "threads": 2, "bytes": 1} for c in ("warm", "cold")}}


def test_render_gives_each_process_and_the_limits_share():
    text = bar_profile.render([_result(1.0, {"gather": 2.0}), _result(1.2, {"gather": 1.5})])
    warm = next(line for line in text.splitlines() if "warm gather" in line)
    # medians: 1.75 ms over [2.000 / 1.500]; % of the limit per process: 50% and 80%, median 65%
    assert "1.750 ms" in warm and "[2.000 / 1.500]" in warm and "65%" in warm and "(2/2 thread(s))" in warm, warm
    assert "2 process(es)" in text and "LLC 32 MiB" in text


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        bar_profile.main(["--rounds", "0"])
    assert exc.value.code == 2 and "--rounds 0: must be >= 1" in capsys.readouterr().err
    missing = tmp_path / "none.json"
    with pytest.raises(SystemExit) as exc:
        bar_profile.main(["--render", str(missing)])
    assert exc.value.code == 2 and f"--render {missing}" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(SystemExit) as exc:
        bar_profile.main(["--render", str(bad)])
    assert exc.value.code == 2 and f"--render {bad}" in capsys.readouterr().err


def test_render_reads_what_a_process_wrote(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_result(1.0, {"gather": 2.0, "add": 0.5})))
    assert bar_profile.main(["--render", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warm add" in out and "200%" in out and "cold gather" in out and "50%" in out, out


def test_render_of_another_json_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"rows": []}))  # e.g. a bench.json
    with pytest.raises(SystemExit) as exc:
        bar_profile.main(["--render", str(path)])
    assert exc.value.code == 2 and "not what this module writes with --json" in capsys.readouterr().err
