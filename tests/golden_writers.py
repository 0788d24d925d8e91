"""Checkpoints written by the real libraries, for the GOLDEN reader tests.

safetensors.numpy.save_file; torch.save of a state_dict (zip, or the legacy stream); a TF
checkpoint written by tf.compat.v1.train.Saver from variables named like OpenAI's (model/wte,
model/wpe); np.savez. Each writer takes {name: float32 array} and returns the path to read.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

FORMATS = ("safetensors", "torch", "tf", "npz")
HF_NAMES = {"wte": "wte.weight", "wpe": "wpe.weight"}  # HF openai-community/gpt2 model.safetensors
TF_NAMES = {"wte": "model/wte", "wpe": "model/wpe"}  # OpenAI model.ckpt


def write_safetensors(directory, tensors: dict) -> str:
    save_file = pytest.importorskip("safetensors.numpy").save_file

    path = os.path.join(directory, "model.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, path)
    return path


def write_torch(directory, tensors: dict, legacy: bool = False) -> str:
    torch = pytest.importorskip("torch")
    path = os.path.join(directory, "pytorch_model.bin")
    state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tensors.items()}  # writable copies
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    return path


def write_tf(directory, tensors: dict) -> str:
    tf = pytest.importorskip("tensorflow")
    prefix = os.path.join(directory, "model.ckpt")
    graph = tf.Graph()
    with graph.as_default():
        feeds, assigns = {}, []
        for name, value in tensors.items():
            var = tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.as_dtype(value.dtype))
            placeholder = tf.compat.v1.placeholder(var.dtype, value.shape)
            feeds[placeholder] = value
            assigns.append(var.assign(placeholder))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(assigns, feeds)
            saver.save(session, prefix)
    return prefix


def write_npz(directory, tensors: dict) -> str:
    path = os.path.join(directory, "gpt2.npz")
    np.savez(path, **tensors)
    return path


def write(fmt: str, directory, wte: np.ndarray, wpe: np.ndarray, extra: dict | None = None) -> str:
    """A GPT-2-shaped checkpoint in `fmt` with the names that format uses for real GPT-2."""
    names = TF_NAMES if fmt == "tf" else HF_NAMES
    tensors = {names["wte"]: wte, names["wpe"]: wpe, **(extra or {})}
    os.makedirs(directory, exist_ok=True)
    return {"safetensors": write_safetensors, "torch": write_torch, "tf": write_tf, "npz": write_npz}[fmt](
        directory, tensors)


def random_wte(n_embd: int = 768, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((50257, n_embd), dtype=np.float32) * np.float32(0.02)
