"""Full-size GPT-2 124M checkpoints (the real wpe, a random wte) in each real format, read by
load_checkpoint and checked by `gpt2-conformance golden --checkpoint`: wpe is recognized as the
real GPT-2's, wte is not, and a wpe one ulp off in one element is rejected, naming the element.
One full-size checkpoint per format (about 158 MB each), removed at the end of the module."""

import argparse
import os
import shutil

import numpy as np
import pytest

from gpt2_conformance.golden import command, data, readers
from helpers.golden_writers import FORMATS, random_wte, write


@pytest.fixture(scope="module")
def real_wpe():
    return data.load().wpe


@pytest.fixture(scope="module")
def wte():
    return random_wte()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, wte, real_wpe):
    root = tmp_path_factory.mktemp("full_size")
    paths = {fmt: write(fmt, root / fmt, wte, real_wpe) for fmt in FORMATS}
    yield paths
    shutil.rmtree(root, ignore_errors=True)


def _run(argv, capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    code = command.run(parser.parse_args(["golden", *argv]))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("fmt", FORMATS)
def test_load_full_size(checkpoints, wte, real_wpe, fmt):
    ckpt = readers.load_checkpoint(checkpoints[fmt])
    assert (ckpt.format, ckpt.size, ckpt.n_embd) == (fmt, "124M", 768)
    assert ckpt.wpe.tobytes() == real_wpe.tobytes() and ckpt.wte.tobytes() == wte.tobytes()
    assert ckpt.wte_name in ("wte.weight", "model/wte") and ckpt.wpe_name in ("wpe.weight", "model/wpe")


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden_command_recognizes_the_real_wpe(checkpoints, capsys, fmt):
    """wpe MATCHES (digests and every element), wte DOES NOT; the GOLDEN clauses run with the
    checkpoint's tables: round trip and wpe rows pass, golden h fails (the wte is random)."""
    code, out = _run(["--checkpoint", checkpoints[fmt]], capsys)
    assert "wpe  MATCHES the real GPT-2 124M wpe" in out, out
    assert "all 786432 elements of wpe are bit-identical to the real table" in out
    assert "wte  DOES NOT MATCH the real GPT-2 124M wte" in out
    assert "0 of 77 known real wte values agree" in out
    for clause, verdict in (
        ("GOLDEN-TABLES-ROUNDTRIP", "PASS"),
        ("GOLDEN-WPE-ROWS", "PASS"),
        ("GOLDEN-H", "FAIL"),
        ("GOLDEN-DECODE", "PASS"),
        ("GOLDEN-LOGITS", "PASS"),
    ):
        assert any(line.split()[:2] == [clause, verdict] for line in out.splitlines()), f"{clause} {verdict}\n{out}"
    assert code == 1
    golden_lines = [line for line in out.splitlines() if "golden data:" in line]
    assert golden_lines and all("golden data: checkpoint " in line for line in golden_lines), golden_lines  # one story


def test_one_ulp_in_one_wpe_element_is_rejected_naming_it(tmp_path, wte, real_wpe, capsys):
    wpe = real_wpe.copy()
    wpe[300, 7] = np.nextafter(wpe[300, 7], np.float32(np.inf))
    path = write("safetensors", tmp_path, wte, wpe)
    try:
        code, out = _run(["--checkpoint", path, "--digests-only"], capsys)
    finally:
        os.remove(path)  # 158 MB; pytest keeps recent tmp_path folders
    assert code == 1
    assert "wpe  DOES NOT MATCH the real GPT-2 124M wpe" in out
    assert "1 of 786432 elements of wpe differ" in out and "first at wpe[300, 7]" in out and "1 ulp apart" in out


def test_unreadable_checkpoint_exits_2_naming_the_file(tmp_path, capsys):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    code, out = _run(["--checkpoint", str(path)], capsys)
    assert code == 2 and str(path) in out and "error" in out
