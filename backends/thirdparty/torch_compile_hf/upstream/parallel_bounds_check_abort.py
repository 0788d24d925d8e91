"""torch.compile (Inductor, CPU): an out-of-range token id in Hugging Face's GPT-2 kills the process
with SIGABRT ("terminate called after throwing an instance of ..."), where eager torch raises
IndexError. Inductor checks the gather's index with a TORCH_CHECK inside its generated kernel; once
that kernel's loop is an OpenMP parallel region (two threads or more and a long enough sequence),
the C++ exception cannot leave the region and std::terminate aborts the interpreter.

Standalone: needs only torch, transformers and numpy (and the C++ compiler Inductor uses). The
compiled call runs in a child interpreter, so the abort can be observed. Exits 1 while the child
dies of SIGABRT, 0 once the compiled model raises an exception the caller can catch."""

import re
import signal
import subprocess
import sys

CHILD = r"""
import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.set_num_threads(2)  # any multi-core default: Inductor writes an OpenMP region from 2 threads on
config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=1, n_head=12)
model = GPT2LMHeadModel(config).eval()


def h(input_ids):
    return model.transformer(input_ids=input_ids, use_cache=False, output_hidden_states=True).hidden_states[0]


compiled = torch.compile(h, backend="inductor", fullgraph=True, dynamic=True)
ids = torch.from_numpy(np.full((1, 1024), 13, dtype=np.int64))
with torch.no_grad():
    h(ids)  # eagerly first: transformers installs its output hooks under a lock Dynamo cannot trace
    compiled(ids)  # valid ids: compiles and runs
    ids[0, 500] = 50257  # one id past the 50257-row table
    try:
        model.transformer.wte(ids)
    except IndexError as exc:
        print(f"eager torch, wte(input_ids): IndexError: {exc}", flush=True)
    try:
        compiled(ids)
    except Exception as exc:  # noqa: BLE001 - any catchable exception is the fixed behaviour
        print(f"compiled: {type(exc).__name__}: {exc}", flush=True)
        raise SystemExit(0)
print("compiled: no error", flush=True)
raise SystemExit(2)
"""

print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows and "
    "tf.gather(wte, X) on CPU raises InvalidArgumentError for id 50257"
)
done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600)
sys.stdout.write(done.stdout)
last = (done.stderr.strip().splitlines() or [""])[-1]
last = re.sub(r"\S*/(\w+\.main\.cpp)", r"<inductor cache>/\1", last)  # the kernel's file, not this machine's folders
if done.returncode == -signal.SIGABRT:
    print(f"got: the process was killed by SIGABRT; its last words: {last}")
    sys.exit(1)
print(f"got: exit status {done.returncode}; last words on stderr: {last}")
sys.exit(0 if done.returncode == 0 else 2)
