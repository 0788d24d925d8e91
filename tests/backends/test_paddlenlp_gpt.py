"""The paddlenlp-gpt backend (backends/thirdparty/paddlenlp_gpt). Its frameworks live in an environment of
its own (`gpt2-conformance env paddlenlp-gpt`), never in the suite's: the fast tests here read its
entry, pins and upstream draft without paddle; the ones that need paddle run a script on that
environment's python and skip, saying how to build it, where it is not built."""

from __future__ import annotations

import os
import subprocess

import pytest

from gpt2_conformance import registry
from gpt2_conformance.api import environment
from gpt2_conformance.upstream import causes as upstream_causes

NAME = "paddlenlp-gpt"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
FOLDER = os.path.join(ROOT, "backends", "thirdparty", "paddlenlp_gpt")
REPRO = os.path.join(FOLDER, "upstream", "embedding_minus_one_reads_before_table.py")


def _entry():
    return registry.builtin()[NAME]


def _env_python() -> str:
    python, why = environment.state(_entry())
    if why is not None:
        pytest.skip(why)
    return python


def test_entry_runs_in_an_environment_of_its_own_with_the_pins_that_import_together():
    entry = _entry()
    assert entry.environment is not None, "PaddleNLP's pins conflict with transformers 5: it needs its own env"
    pins = dict(r.split("==") for r in entry.environment.requirements)
    # the versions the adapter, waivers and upstream draft cite (file:line at these versions)
    assert pins["paddlepaddle"] == "3.3.1" and pins["paddlenlp"] == "2.8.1"
    # paddlenlp 2.8.1 imports huggingface_hub.repo_type_and_id_from_hf_id (gone after 0.25) and
    # aistudio_sdk.hub.download (gone in 0.3): without these pins `import paddlenlp` fails
    major, minor, _ = (int(n) for n in pins["huggingface_hub"].split("."))
    assert (major, minor) < (0, 26)
    assert pins["aistudio-sdk"].startswith("0.2.")
    assert entry.extra == "", "installed by `gpt2-conformance env`, not by an extra of the suite's"
    assert set(entry.requires) == {"paddle", "paddlenlp"}


def test_without_its_environment_run_names_the_command_that_builds_it(monkeypatch, tmp_path):
    monkeypatch.setenv(environment.ROOT_VARIABLE, str(tmp_path))
    python, why = environment.state(_entry())
    assert why is not None and why.endswith("gpt2-conformance env paddlenlp-gpt")
    assert python.startswith(str(tmp_path / NAME))


def test_upstream_draft_names_its_reproduction_and_the_clauses_it_explains():
    entry = _entry()
    waivers_path = entry.waivers_path()
    assert waivers_path is not None
    found = upstream_causes.load(NAME, os.path.join(FOLDER, "upstream", "causes.toml"), waivers_path)
    (cause,) = found.causes
    assert os.path.exists(os.path.join(FOLDER, "upstream", cause.script))
    assert "BOUNDS-TOKEN" in cause.clauses
    with open(REPRO, encoding="utf-8") as f:
        assert cause.expect in f.read()


def test_reproduction_exits_1_in_its_environment_while_id_minus_one_reads_before_the_table():
    done = subprocess.run([_env_python(), REPRO], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "id -2 raises ValueError" in done.stdout and "BUG: id -1 reads memory outside the table" in done.stdout


def test_h_is_the_embeddings_output_and_the_offset_comes_from_a_real_cache():
    """In the environment: h equals wte[ids] + wpe[past_length + i] bit for bit, with and without a
    cache, equals GPTModel's own hidden_states[0], and the head is the tied wte."""
    script = """
import numpy as np, paddle
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.backends.thirdparty.paddlenlp_gpt.adapter import PaddleNLPGPTAdapter
a = PaddleNLPGPTAdapter(AdapterConfig(n_embd=768))
rng = np.random.default_rng(0)
wte = rng.standard_normal((50257, 768), dtype=np.float32); wpe = rng.standard_normal((1024, 768), dtype=np.float32)
a.load_tables(wte, wpe)
ids = np.array([[3, 50256, 0], [7, 7, 1]])
assert np.array_equal(a.embed(ids), wte[ids] + wpe[0:3])
assert np.array_equal(a.embed(ids, 1021), wte[ids] + wpe[1021:1024])
out = a.model.gpt(paddle.to_tensor(ids), output_hidden_states=True, return_dict=True)
assert np.array_equal(out.hidden_states[0].numpy(), a.embed(ids))
assert a.model.lm_head.weight is a.model.gpt.embeddings.word_embeddings.weight
assert sorted(a.parameters().values()) == [(1024, 768), (50257, 768)]
print("ok")
"""
    done = subprocess.run([_env_python(), "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr
