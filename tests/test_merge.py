"""`gpt2-conformance merge`: reports fabricated from SuiteResult objects (the real JSON
writer, fingerprints of the real NumPy outputs) merged into one matrix, parity table and bench
table; every malformed or conflicting input gives a one-line error naming the file (exit 2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from gpt2_conformance import cli, registry, spec
from gpt2_conformance import results as res
from gpt2_conformance.merge import model
from gpt2_conformance.run import parity
from helpers.reports import bench_json, suite_result, write


# -- fabricated inputs ------------------------------------------------------------------
@pytest.fixture(scope="module")
def numpy_outputs():
    return parity.outputs(registry.resolve("numpy"))


@pytest.fixture(scope="module")
def fingerprint(numpy_outputs):
    return parity.fingerprint(numpy_outputs, numpy_outputs)


def merge_files(paths, tmp_path, capsys):
    """(exit code, stderr, merged.json or None) of the real command line."""
    out = tmp_path / "merged"
    code = cli.main(["merge", *paths, "--out-dir", str(out)])
    doc = json.loads((out / "merged.json").read_text()) if (out / "merged.json").exists() else None
    return code, capsys.readouterr().err, doc


def cell(doc, clause, column):
    return next(r for r in doc["clauses"] if r["id"] == clause)["cells"][column]["status"]


# -- one verdict from two runs ----------------------------------------------------------
def test_two_devices_give_one_matrix_and_parity_table(tmp_path, capsys, fingerprint):
    cpu = suite_result(environment={"host": "box", "device_name": "AMD EPYC"}, fp=fingerprint)
    gpu = suite_result(
        device="gpu",
        statuses={"DTYPE-BFLOAT16": res.NOT_CLAIMED, "INIT-WPE": res.WAIVED},
        environment={"host": "box", "device_name": "NVIDIA H200"},
        fp=fingerprint,
    )
    code, err, doc = merge_files([write(tmp_path, "a.json", cpu), write(tmp_path, "b.json", gpu)], tmp_path, capsys)
    assert code == 0, err
    assert [c["label"] for c in doc["columns"]] == ["numpy cpu", "numpy gpu"]
    assert [r["id"] for r in doc["clauses"]] == [c.id for c in spec.CLAUSES]
    assert cell(doc, "INIT-WPE", "numpy gpu") == res.WAIVED and cell(doc, "INIT-WPE", "numpy cpu") == res.PASS
    assert cell(doc, "DTYPE-BFLOAT16", "numpy gpu") == res.NOT_CLAIMED
    p = doc["parity"]
    assert p["problems"] == [] and p["same_backend"][0]["h_bit_identical"] is True
    assert p["same_backend"][0]["logits_sample_max_abs_diff"] == 0
    assert all(r["cases"]["h_prefill"]["bit_identical_to_reference"] for r in p["rows"])
    md = (tmp_path / "merged" / "merged.md").read_text()
    assert "| Clause | numpy cpu | numpy gpu |" in md and "| INIT-WPE | PASS | waived |" in md
    assert "| numpy gpu | 0 [A] = | 0 [A] = | 0 [A] = | 0 |" in md


def test_h_that_differs_between_devices_is_a_parity_problem(tmp_path, capsys, numpy_outputs, fingerprint):
    wrong = dict(numpy_outputs, h_prefill=numpy_outputs["h_prefill"].copy())
    wrong["h_prefill"][1, 1023, 767] = np.nextafter(wrong["h_prefill"][1, 1023, 767], np.float32(np.inf))
    logits = numpy_outputs["logits"].copy()
    index = parity.sample_indices("logits", logits.size)[3]
    logits.reshape(-1)[index] += np.float32(1e-3)  # a sampled logit off by 1e-3
    wrong["logits"] = logits
    gpu_fp = parity.fingerprint(wrong, numpy_outputs)
    assert gpu_fp["cases"]["h_prefill"]["sha256"] != fingerprint["cases"]["h_prefill"]["sha256"]
    assert 0 < gpu_fp["cases"]["h_prefill"]["max_abs_diff"] < 1e-6
    code, err, doc = merge_files(
        [
            write(tmp_path, "a.json", suite_result(fp=fingerprint)),
            write(tmp_path, "b.json", suite_result(device="gpu", fp=gpu_fp)),
        ],
        tmp_path,
        capsys,
    )
    assert code == 1, "a backend whose h differs between CPU and GPU must fail the merge"
    assert "numpy: float32 h_prefill is not bit-identical between numpy cpu [A], numpy gpu [B]" in err
    gpu_row = doc["parity"]["rows"][1]["cases"]
    assert gpu_row["h_prefill"]["digest"] == "B" and not gpu_row["h_prefill"]["bit_identical_to_reference"]
    assert gpu_row["h_decode"]["digest"] == "A"
    assert gpu_row["logits"]["sample_max_abs_diff_vs_reference_column"] == pytest.approx(1e-3, rel=1e-2)
    assert doc["parity"]["same_backend"][0]["h_bit_identical"] is False


def test_two_backends_and_a_bench_file(tmp_path, capsys, fingerprint):
    failing = suite_result("torch", statuses={"BOUNDS-TOKEN": res.FAIL}, fp=fingerprint)
    paths = [
        write(tmp_path, "numpy.json", suite_result(fp=fingerprint)),
        write(tmp_path, "torch.json", failing),
        write(tmp_path, "bench.json", bench_json()),
    ]
    code, err, doc = merge_files(paths, tmp_path, capsys)
    assert code == 1, "a run that failed a clause fails the merged verdict"
    assert cell(doc, "BOUNDS-TOKEN", "torch cpu") == res.FAIL
    assert {(b["group"], b["backend"]) for b in doc["bench"]} == {
        ("forward_prefill B8-T1024-d768", "numpy"),
        ("forward_decode B1-T1-d768-past512", "numpy"),
    }
    assert (
        "| forward_prefill B8-T1024-d768 | numpy | cpu | host-a | suite |"
        in (tmp_path / "merged" / "merged.md").read_text()
    )


def test_merge_says_which_run_failed_and_that_it_is_why_the_exit_code_is_1(tmp_path):
    """As a user runs it, from a folder of its own: the failed runs are named on stderr with what
    failed in them (it printed three `wrote` lines and exited 1, saying nothing)."""
    failing = suite_result("torch", statuses={"BOUNDS-TOKEN": res.FAIL, "INIT-WPE": res.FAIL})
    broken = suite_result("jax")
    broken.error = "pytest exited with 3: ImportError: no jaxlib"
    write(tmp_path, "numpy.json", suite_result())
    write(tmp_path, "torch.json", failing)
    write(tmp_path, "jax.json", broken)
    done = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "merge", ".", "--out-dir", "merged"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "gpt2-conformance merge: the run of torch (torch cpu, torch.json) failed: 2 clauses failed: "
        "BOUNDS-TOKEN, INIT-WPE; so merge exits 1",
        "gpt2-conformance merge: the run of jax (jax cpu, jax.json) failed: it could not run: pytest exited "
        "with 3: ImportError: no jaxlib; so merge exits 1",
    ], done.stderr
    assert done.stdout.count("wrote ") == 3, done.stdout


def test_merge_names_the_run_that_could_not_judge_some_clauses_for_its_exit_4(tmp_path):
    write(tmp_path, "numpy.json", suite_result(statuses={"GOLDEN-WPE-ROWS": res.ERROR}))
    done = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "merge", "numpy.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 4, done.stderr
    assert done.stderr == (
        "gpt2-conformance merge: the run of numpy (numpy cpu, numpy.json) was not judged whole: the suite "
        "could not judge 1 clause (ERROR): GOLDEN-WPE-ROWS; so merge exits 4\n"
    ), done.stderr


def test_same_column_on_two_hosts_is_two_explicit_columns(tmp_path, capsys):
    a = suite_result(environment={"host": "runner-1"})
    b = suite_result(environment={"host": "runner-2"}, statuses={"INIT-WTE": res.FAIL})
    code, err, doc = merge_files([write(tmp_path, "a.json", a), write(tmp_path, "b.json", b)], tmp_path, capsys)
    assert [c["label"] for c in doc["columns"]] == ["numpy cpu (host runner-1)", "numpy cpu (host runner-2)"]
    assert cell(doc, "INIT-WTE", "numpy cpu (host runner-2)") == res.FAIL
    assert cell(doc, "INIT-WTE", "numpy cpu (host runner-1)") == res.PASS


def test_versions_that_differ_label_the_columns(tmp_path, capsys):
    a = suite_result("torch", environment={"versions": {"torch": "2.12.0", "numpy": "2.4"}})
    b = suite_result("torch", environment={"versions": {"torch": "2.13.0", "numpy": "2.4"}})
    code, err, doc = merge_files([write(tmp_path, "a.json", a), write(tmp_path, "b.json", b)], tmp_path, capsys)
    assert code == 0, err
    assert [c["label"] for c in doc["columns"]] == ["torch cpu (torch 2.12.0)", "torch cpu (torch 2.13.0)"]


def test_older_report_without_environment_fields_still_merges(tmp_path, capsys):
    old = suite_result().to_dict()
    old["environment"] = {"python": "3.11"}
    del old["parity"], old["created"]
    code, err, doc = merge_files([write(tmp_path, "old.json", old)], tmp_path, capsys)
    assert code == 0, err
    column = doc["columns"][0]
    assert (column["host"], column["device_name"], column["created"]) == ("?", "?", "?")
    assert doc["parity"]["rows"] == [{"column": "numpy cpu", "error": "no fingerprint in this report"}]


def test_a_clause_missing_from_a_report_is_absent_never_pass(tmp_path, capsys):
    paths = [
        write(tmp_path, "a.json", suite_result()),
        write(tmp_path, "b.json", suite_result("jax", drop=("TIED-GRAD",))),
    ]
    code, err, doc = merge_files(paths, tmp_path, capsys)
    assert cell(doc, "TIED-GRAD", "jax cpu") == model.ABSENT and cell(doc, "TIED-GRAD", "numpy cpu") == res.PASS
    assert "| TIED-GRAD | PASS | absent |" in (tmp_path / "merged" / "merged.md").read_text()


def test_a_folder_stands_for_its_json_files_and_stdout_without_out_dir(tmp_path, capsys):
    folder = tmp_path / "artifacts" / "numpy-cpu"
    folder.mkdir(parents=True)
    write(folder, "gpt2-conformance-numpy-cpu.json", suite_result())
    (folder / "gpt2-conformance-numpy-cpu.md").write_text("not read")
    assert cli.main(["merge", str(tmp_path / "artifacts")]) == 0
    assert "| SHAPE-TABLES | PASS |" in capsys.readouterr().out


# -- bad input: one clear line each, exit 2, nothing written ------------------------------
def _bad_report(**change) -> dict:
    doc = suite_result().to_dict()
    doc.update(change)
    return doc


BAD = {
    "not-json": ("{not json", "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    "array": ([1, 2], "top level is a JSON list, but should be an object"),
    "neither": ({"hello": 1}, "neither a gpt2-conformance report (no 'format' key) nor a pytest-benchmark JSON"),
    "foreign-format": (
        {"format": "onnx-scoreboard/1"},
        "'format' is 'onnx-scoreboard/1', not a gpt2-conformance report",
    ),
    "old-format": (
        _bad_report(format="gpt2-conformance-report/1"),
        "report format 'gpt2-conformance-report/1', but merge reads 'gpt2-conformance-report/2'",
    ),
    "no-backend": ({k: v for k, v in _bad_report().items() if k != "backend"}, "backend is missing"),
    "clauses-not-list": (_bad_report(clauses={"a": 1}), "clauses is dict {'a': 1}, but should be list"),
    "bad-status": (
        _bad_report(clauses=[{"id": "SHAPE-H", "status": "MAYBE"}]),
        "clauses[0].status is 'MAYBE', but should be one of PASS, FAIL, DEVIATION (WAIVED)",
    ),
    "clause-twice": (_bad_report(clauses=[{"id": "SHAPE-H", "status": "PASS"}] * 2), "clause SHAPE-H appears twice"),
    "bench-no-median": (
        {"machine_info": {}, "benchmarks": [{"name": "t", "stats": {"mean": 1}}]},
        "benchmarks[0].stats.median is missing",
    ),
    "bench-median-not-a-number": (
        {"machine_info": {}, "benchmarks": [{"name": "t", "stats": {"median": "slow"}}]},
        "benchmarks[0].stats.median is str 'slow', but should be int or float",
    ),
    "bad-parity": (_bad_report(parity={"cases": 3}), "parity has no 'cases' with a sha256 each or no 'inputs_sha256'"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_malformed_input_is_one_clear_line(tmp_path, capsys, name):
    content, expected = BAD[name]
    path = tmp_path / f"{name}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    code, err, doc = merge_files([str(path)], tmp_path, capsys)
    assert code == 2 and doc is None, f"exit code {code}, but should be 2 and nothing written [{name}]"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpt2-conformance merge: error: {path}: "), err
    assert expected in lines[0], f"{lines[0]!r} does not say {expected!r}"


def test_missing_file_and_empty_folder(tmp_path, capsys):
    code, err, _ = merge_files([str(tmp_path / "nope.json")], tmp_path, capsys)
    assert code == 2 and f"{tmp_path / 'nope.json'}: no such file" in err
    (tmp_path / "empty").mkdir()
    code, err, _ = merge_files([str(tmp_path / "empty")], tmp_path, capsys)
    assert code == 2 and "empty: folder holds no .json file" in err


def test_different_spec_versions_are_refused(tmp_path, capsys):
    a = write(tmp_path, "a.json", suite_result())
    b = write(tmp_path, "b.json", suite_result("torch", spec_version="0.9"))
    code, err, doc = merge_files([a, b], tmp_path, capsys)
    assert code == 2 and doc is None
    assert f"reports of different spec versions cannot be merged (spec {spec.SPEC_VERSION}: {a}; spec 0.9: {b})" in err


def test_duplicate_cell_is_refused_even_with_equal_verdicts(tmp_path, capsys):
    a = write(tmp_path, "a.json", suite_result(environment={"host": "h1"}))
    b = write(tmp_path, "b.json", suite_result(environment={"host": "h1"}))
    code, err, doc = merge_files([a, b], tmp_path, capsys)
    assert code == 2 and doc is None
    assert f"duplicate cell: {a} and {b} both report numpy on cpu" in err and "host h1" in err


def test_one_clause_described_two_ways_is_refused(tmp_path, capsys):
    other = suite_result("torch").to_dict()
    other["clauses"][0]["title"] = "something else"
    code, err, _ = merge_files(
        [write(tmp_path, "a.json", suite_result()), write(tmp_path, "b.json", other)], tmp_path, capsys
    )
    assert code == 2 and "clause SHAPE-TABLES is" in err and "(same spec version)" in err


def test_duplicate_bench_result_is_refused_but_two_hosts_merge(tmp_path, capsys):
    a = write(tmp_path, "a.json", bench_json(node="host-a"))
    b = write(tmp_path, "b.json", bench_json(node="host-a", median=0.005))
    code, err, _ = merge_files([a, b], tmp_path, capsys)
    assert code == 2 and f"duplicate bench result: {a} and {b} both time" in err
    c = write(tmp_path, "c.json", bench_json(node="host-b", median=0.005))
    code, err, doc = merge_files([a, c], tmp_path, capsys)
    assert code == 0, err
    assert {b["host"] for b in doc["bench"]} == {"host-a", "host-b"}


# -- the fingerprint itself ---------------------------------------------------------------
def test_fingerprint_is_small_and_exact(fingerprint, numpy_outputs):
    assert len(json.dumps(fingerprint)) < 20_000
    for case in parity.CASES:
        c = fingerprint["cases"][case]
        assert c["sha256"] == c["reference_sha256"] and c["max_abs_diff"] == 0.0
        flat = numpy_outputs[case].reshape(-1)
        assert c["sample"] == [float(flat[i]) for i in c["sample_index"]]
    assert fingerprint["inputs_sha256"] == parity.inputs_digest()
    assert parity.sample_indices("logits", 402_056) == parity.sample_indices("logits", 402_056)


def test_foreign_json_in_a_folder_is_ignored_and_listed(tmp_path, capsys):
    folder = tmp_path / "artifacts"
    folder.mkdir()
    write(folder, "report.json", suite_result())
    (folder / "other.json").write_text(json.dumps({"hello": 1}))
    code, err, doc = merge_files([str(folder)], tmp_path, capsys)
    assert code == 0 and doc["ignored"] == ["other.json"]
    assert f"ignored {folder / 'other.json'}: neither a gpt2-conformance report" in err
    assert "Ignored (in a folder, but neither" in (tmp_path / "merged" / "merged.md").read_text()


# -- the bench's raw output -------------------------------------------------------------
RAW_BENCH = {"meta": {"device": "cpu", "root": "."}, "results": [{"backend": "numpy", "records": []}]}


def test_bench_raw_output_beside_bench_json_is_skipped_without_a_warning(tmp_path, capsys):
    """`bench --out-dir` writes bench-results.json beside bench.json: a folder of its outputs
    merges without a warning, and the raw file is neither an input nor "ignored"."""
    folder = tmp_path / "artifacts"
    (folder / "bench").mkdir(parents=True)
    write(folder, "report.json", suite_result())
    write(folder / "bench", "bench.json", bench_json())
    write(folder / "bench", "bench-results.json", RAW_BENCH)
    code, err, doc = merge_files([str(folder)], tmp_path, capsys)
    assert code == 0 and err == "", err
    assert doc["ignored"] == [] and doc["inputs"] == ["report.json", "bench.json"]
    assert "Ignored" not in (tmp_path / "merged" / "merged.md").read_text()


def test_bench_raw_output_named_on_the_command_line_is_skipped_with_a_note(tmp_path, capsys):
    raw = write(tmp_path, "bench-results.json", RAW_BENCH)
    code, err, doc = merge_files([write(tmp_path, "report.json", suite_result()), raw], tmp_path, capsys)
    assert code == 0 and doc["inputs"] == ["report.json"]
    assert err.splitlines() == [
        f"gpt2-conformance merge: skipped {raw}: the bench's raw output; merge reads the bench.json written beside it"
    ]


def test_folder_of_only_bench_raw_output_says_what_it_found(tmp_path, capsys):
    folder = tmp_path / "bench-results"
    folder.mkdir()
    raw = write(folder, "bench-results.json", RAW_BENCH)
    code, err, doc = merge_files([str(folder)], tmp_path, capsys)
    assert code == 2 and doc is None
    assert err.splitlines() == [
        "gpt2-conformance merge: error: no conformance report or bench JSON among the inputs; "
        f"found only: {raw} (the bench's raw output; merge reads the bench.json written "
        "beside it)"
    ]


# -- no machine-local path in what merge publishes ----------------------------------------
ABSOLUTE_PATH = re.compile(r"(?<![\w<.:/~-])/[\w.-]+/")  # "/dir/...", not "GB/s", "</td>" or "https://host/"


def test_published_outputs_carry_no_machine_local_path(tmp_path, capsys):
    """Reports whose golden-data line and file paths are absolute (the real describe() of the
    shipped fixtures names the checkout) merge into documents that name neither: the files by
    name, the golden data without its folder, a checkpoint by its file name."""
    from gpt2_conformance.golden import data

    # the line reports made before describe() stopped naming the folder carry (merge still reads them)
    golden = data.load()
    fixtures = (
        f"shipped fixtures ({data.fixtures_dir()}): the real GPT-2 124M wpe (sha256 "
        f"{golden.reference_digests['124M']['wpe']['sha256']['value'][:12]}...) and {len(golden.wte_known)} "
        "known real wte values; other wte elements are a seeded stand-in, never compared"
    )
    assert data.fixtures_dir() in fixtures, "the premise: a report's golden_data names the checkout's fixtures"
    checkpoint = (
        f"checkpoint {tmp_path}/models/gpt2/model.safetensors (its own tables; golden vectors from the "
        "shipped fixtures)"
    )
    folder = tmp_path / "artifacts"
    for sub in ("numpy-cpu", "torch-gpu", "bench", "jax-cpu"):
        (folder / sub).mkdir(parents=True)
    paths = [
        write(folder / "numpy-cpu", "report.json", suite_result(environment={"golden_data": fixtures})),
        write(
            folder / "torch-gpu",
            "report.json",
            suite_result("torch", "gpu", environment={"golden_data": f"shipped fixtures ({tmp_path}/fix): x"}),
        ),
        write(
            folder / "jax-cpu",
            "gpt2-conformance-jax-cpu.json",
            suite_result("jax", environment={"golden_data": checkpoint}),
        ),
        write(folder / "bench", "bench.json", bench_json()),
    ]
    (folder / "bench" / "stray.json").write_text("{}")
    code, err, doc = merge_files([*paths[:-1], str(folder / "bench")], tmp_path, capsys)
    assert code == 0, err
    assert cli.main(["merge", *paths]) == 0
    stdout = capsys.readouterr().out
    out = tmp_path / "merged"
    published = {name: (out / name).read_text() for name in ("merged.md", "merged.json", "scoreboard.html")}
    published["stdout"] = stdout
    for name, text in published.items():
        for local in {str(tmp_path), os.getcwd(), data.fixtures_dir(), os.path.expanduser("~")} - {"/"}:
            assert local not in text, f"{name} names the machine-local path {local}"
        assert not ABSOLUTE_PATH.findall(text), f"{name} has absolute paths {ABSOLUTE_PATH.findall(text)}"
    assert [c["file"] for c in doc["columns"]] == [
        "numpy-cpu/report.json",
        "torch-gpu/report.json",
        "gpt2-conformance-jax-cpu.json",
    ]
    assert doc["inputs"][-1] == "bench.json" and doc["ignored"] == ["stray.json"]
    assert doc["golden_data"] == sorted(
        [
            fixtures.replace(f" ({data.fixtures_dir()})", ""),
            "shipped fixtures: x",
            "checkpoint model.safetensors (its own tables; golden vectors from the shipped fixtures)",
        ]
    )
    assert (
        "golden data: checkpoint model.safetensors (its own tables; golden vectors from the shipped fixtures); "
        "shipped fixtures: the real GPT-2 124M wpe (sha256 " in published["merged.md"]
    )
    assert "<td>numpy-cpu/report.json</td>" in published["scoreboard.html"]


def test_inputs_under_the_output_folder_are_named_relative_to_it(tmp_path, capsys):
    out = tmp_path / "merged"
    (out / "reports").mkdir(parents=True)
    path = write(out / "reports", "numpy.json", suite_result())
    code, err, doc = merge_files([path], tmp_path, capsys)
    assert code == 0 and doc["columns"][0]["file"] == "reports/numpy.json" and doc["inputs"] == ["reports/numpy.json"]


def test_different_parity_inputs_are_noted_not_compared(tmp_path, capsys, fingerprint):
    other = json.loads(json.dumps(fingerprint))
    other["inputs_sha256"] = "0" * 64
    other["cases"]["h_prefill"]["sha256"] = "f" * 64  # would be a problem if the inputs were the same
    paths = [
        write(tmp_path, "a.json", suite_result(fp=fingerprint)),
        write(tmp_path, "b.json", suite_result(device="gpu", fp=other)),
    ]
    code, err, doc = merge_files(paths, tmp_path, capsys)
    assert code == 0 and doc["parity"]["problems"] == [], err
    assert doc["parity"]["notes"] == [
        "runs used different parity inputs (different suite versions?), compared "
        "within each set only: numpy cpu; numpy gpu"
    ]
    assert doc["parity"]["rows"][1]["comparable_with_reference_column"] is False


def test_reference_that_differs_between_machines_is_a_problem(tmp_path, capsys, fingerprint):
    other = json.loads(json.dumps(fingerprint))
    other["cases"]["h_decode"]["reference_sha256"] = "e" * 64
    paths = [
        write(tmp_path, "a.json", suite_result(fp=fingerprint)),
        write(tmp_path, "b.json", suite_result("torch", environment={"host": "h2"}, fp=other)),
    ]
    code, err, doc = merge_files(paths, tmp_path, capsys)
    assert code == 1
    assert doc["parity"]["problems"] == [
        "the NumPy reference's h_decode differs between the machines of numpy cpu, torch cpu"
    ]


def test_run_all_parity_table_comes_from_the_fingerprints(fingerprint):
    table = parity.table_from_fingerprints({"numpy": fingerprint, "torch": {"error": "exit code 1: ImportError"}})
    assert table.splitlines()[2:] == [
        "| numpy | 0 | 0 | 0 |",
        "| torch | failed: exit code 1: ImportError | failed: exit code 1: ImportError "
        "| failed: exit code 1: ImportError |",
    ]


def test_a_fingerprint_not_computed_is_not_called_failed(fingerprint):
    """Every writer of a missing fingerprint (runner, run command, the child) goes through
    parity.not_computed, so the table reads each one as said."""
    missing = parity.not_computed("nothing was checked in this run")
    assert missing == {"error": "not computed: nothing was checked in this run"}, missing
    table = parity.table_from_fingerprints({"numpy": fingerprint, "torch": missing})
    assert table.splitlines()[3] == (
        "| torch | not computed: nothing was checked in this run | not computed: nothing "
        "was checked in this run | not computed: nothing was checked in this run |"
    )


def test_columns_follow_the_registry_order_whatever_the_file_order(tmp_path, capsys):
    paths = [write(tmp_path, f"{name}.json", suite_result(name)) for name in ("my-plugin", "jax", "torch", "numpy")]
    code, err, doc = merge_files(paths, tmp_path, capsys)
    assert [c["label"] for c in doc["columns"]] == ["numpy cpu", "torch cpu", "jax cpu", "my-plugin cpu"]


def test_a_no_cache_run_has_a_fingerprint_without_the_decode_case(tmp_path):
    """The fingerprint never calls what the adapter did not claim: a no-cache adapter's has
    h_prefill and logits, h_decode is "not claimed", and merge shows it so."""
    from gpt2_conformance.run import parity
    from helpers import strict_adapters

    out = parity.outputs(strict_adapters.NoCache)
    assert set(out) == {"h_prefill", "logits"} and strict_adapters.VIOLATIONS == []
    fp = parity.fingerprint(out, parity.outputs(strict_adapters.NoCache))
    assert set(fp["cases"]) == {"h_prefill", "logits"} and fp["not_claimed"] == {"h_decode": "kv_cache"}
    assert "not claimed (kv_cache)" in parity.table_from_fingerprints({"nocache": fp})


def test_a_folder_merged_into_itself_skips_merges_own_output(tmp_path, capsys):
    """`merge reports/` on the committed folder: its merged.json (merge's own output) is no input."""
    folder = tmp_path / "reports"
    folder.mkdir()
    write(folder, "numpy.json", suite_result())
    assert cli.main(["merge", str(folder), "--out-dir", str(folder)]) == 0
    assert (folder / "merged.json").exists()
    capsys.readouterr()
    assert cli.main(["merge", str(folder), "--out-dir", str(folder)]) == 0  # again, with merged.json beside it
    assert "merged.json" not in capsys.readouterr().err
    assert cli.main(["merge", str(folder / "merged.json")]) == 2
    assert "a merged document" in capsys.readouterr().err


def test_an_upstream_dir_that_links_nothing_is_refused(tmp_path, capsys):
    """--upstream-dir once linked nothing, silently: a folder that is not there or holds no drafts,
    or no --out-dir to write the scoreboard it links."""
    report = write(tmp_path, "a.json", suite_result())
    (tmp_path / "empty").mkdir()
    for extra, says in [
        ([str(tmp_path / "nope"), "--out-dir", str(tmp_path / "o")], "no such folder"),
        ([str(tmp_path / "empty"), "--out-dir", str(tmp_path / "o")], "no <backend>/status.json"),
        ([str(tmp_path / "empty")], "only --out-dir writes the scoreboard"),
    ]:
        assert cli.main(["merge", report, "--upstream-dir", *extra]) == 2
        assert says in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
