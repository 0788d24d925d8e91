"""fixtures/: derive.py reproduces the shipped files bit for bit, every file is in the manifest
with its provenance, the golden values follow from the real values, and a damaged fixture is
refused on load."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from gpt2_conformance.golden import data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
SHARED = os.path.join(ROOT, "..", "shared", "gpt2-reference")


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _manifest():
    with open(os.path.join(FIXTURES, "MANIFEST.json")) as f:
        return json.load(f)


def test_derive_reproduces_the_shipped_fixtures(tmp_path):
    if not os.path.isdir(SHARED):
        pytest.skip("../shared/gpt2-reference is not checked out next to the repository")
    out = subprocess.run(
        [sys.executable, os.path.join(FIXTURES, "derive.py"), "--shared", SHARED, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    manifest = _manifest()
    for entry in manifest["files"]:
        if "sha256" in entry:
            assert _sha256(tmp_path / entry["file"]) == entry["sha256"], f"{entry['file']} is not reproduced"
    assert (tmp_path / "MANIFEST.json").read_text() == open(os.path.join(FIXTURES, "MANIFEST.json")).read()
    for rel, digest in manifest["inputs"].items():
        assert _sha256(os.path.join(ROOT, rel)) == digest, f"input {rel} changed"


def test_manifest_lists_every_fixture_with_provenance():
    manifest = _manifest()
    listed = {e["file"] for e in manifest["files"]}
    assert listed == set(os.listdir(FIXTURES)) - {"MANIFEST.json", "__pycache__"}
    for entry in manifest["files"]:
        for key in ("source", "lineage", "dtype", "layout", "derived_by"):
            assert entry.get(key), f"{entry['file']}: no {key}"
        if "sha256" in entry:
            assert _sha256(os.path.join(FIXTURES, entry["file"])) == entry["sha256"]


def test_golden_values_follow_from_the_known_values():
    """Every golden h is wte[id][col] + wpe[position][col] of the known value and the real wpe:
    bits for exact values, and within abs_tol (which covers the printed precision) otherwise."""
    golden = data.load()
    known = {(k.row, k.col): k for k in golden.wte_known}
    assert all(set(k.sources) <= set(golden.sources) for k in golden.wte_known)
    assert len(golden.h) > 300
    for g in golden.h:
        k = known[g.token_id, g.col]
        p = golden.wpe[g.position, g.col]
        if g.exact:
            assert k.exact and np.float32(g.value) == k.value + p
        else:
            half_unit = k.abs_tol
            assert half_unit > 0 and g.abs_tol >= half_unit
            assert abs(g.value - (float(k.text) + float(p))) <= 1e-15
            assert abs(float(k.value + p) - g.value) <= g.abs_tol  # the shipped stand-in meets it


def test_damaged_fixture_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    raw = bytearray((copy / data.WPE_FILE).read_bytes())
    raw[4 * (300 * 768 + 7)] ^= 1  # one ulp in wpe[300, 7]
    (copy / data.WPE_FILE).write_bytes(bytes(raw))
    monkeypatch.setenv("GPT2C_FIXTURES", str(copy))
    data.load.cache_clear()
    try:
        with pytest.raises(ValueError, match="sha256 differs from MANIFEST.json"):
            data.load()
    finally:
        monkeypatch.delenv("GPT2C_FIXTURES")
        data.load.cache_clear()


def test_describe_says_which_golden_data():
    assert data.describe(None).startswith("shipped fixtures (sha256 ") and "real GPT-2 124M wpe" in data.describe(None)
    assert data.describe("/x/model.safetensors").startswith("checkpoint model.safetensors (")
