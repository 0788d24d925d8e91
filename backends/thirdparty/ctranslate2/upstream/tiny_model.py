"""{{WHAT}}

Standalone: needs only ctranslate2 and numpy. The model is a GPT-2-shaped decoder written with
CTranslate2's own model specification (TransformerDecoderModelSpec with learned position
encodings of 1024 rows, as its GPT-2 converter makes; 16 token rows of width 8, one block whose
weights are zero, no final norm, the identity as output projection, so forward_batch returns the
embedding h = token row + position row). Each call runs in a child process, since the failing
ones kill it. Exits 1 while the behaviour reproduces, 0 once every call listed below raises an
exception Python can catch or returns the right rows."""

import ast
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

VOCAB, WIDTH, POSITIONS = 16, 8, 1024


def generator(folder):
    import ctranslate2
    from ctranslate2.specs import common_spec, transformer_spec

    spec = transformer_spec.TransformerDecoderModelSpec.from_config(
        1, 1, pre_norm=True, activation=common_spec.Activation.GELUTanh, no_final_norm=True
    )
    decoder = spec.decoder
    decoder.scale_embeddings = False
    decoder.embeddings.weight = np.repeat(
        np.arange(1, VOCAB + 1, dtype=np.float32)[:, None], WIDTH, axis=1
    )  # row i: i + 1
    decoder.position_encodings.encodings = np.zeros((POSITIONS, WIDTH), np.float32)
    zeros = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    layer = decoder.layer[0]
    for norm in (layer.self_attention.layer_norm, layer.ffn.layer_norm):
        norm.gamma, norm.beta = np.ones(WIDTH, np.float32), zeros(WIDTH)
    layer.self_attention.linear[0].weight, layer.self_attention.linear[0].bias = (
        zeros(3 * WIDTH, WIDTH),
        zeros(3 * WIDTH),
    )
    layer.self_attention.linear[1].weight, layer.self_attention.linear[1].bias = zeros(WIDTH, WIDTH), zeros(WIDTH)
    layer.ffn.linear_0.weight, layer.ffn.linear_0.bias = zeros(1, WIDTH), zeros(1)
    layer.ffn.linear_1.weight, layer.ffn.linear_1.bias = zeros(WIDTH, 1), zeros(WIDTH)
    decoder.projection.weight, decoder.projection.bias = np.eye(WIDTH, dtype=np.float32), zeros(WIDTH)
    spec.register_vocabulary([f"t{i}" for i in range(VOCAB)])
    spec.config.bos_token = spec.config.eos_token = spec.config.unk_token = "t0"
    spec.validate()
    spec.optimize(quantization="float32")
    spec.save(folder)
    return ctranslate2.Generator(folder, device="cpu", compute_type="float32")


def call(ids) -> None:
    """Child: forward_batch(ids); prints what came back, exits 0 on an exception, 3 on a result."""
    with tempfile.TemporaryDirectory() as folder:
        model = generator(folder)
        try:
            out = np.asarray(model.forward_batch(ids))
        except Exception as exc:  # noqa: BLE001
            print(f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            sys.exit(0)
    # memory read past the table may hold any bits: a value that is no row number is shown as it is
    rows = [round(float(v)) - 1 if np.isfinite(v) else f"{float(v)} (no row)" for v in out[..., 0].ravel()]
    print(f"returned shape {list(out.shape)}, token rows read {rows}")
    sys.exit(3)


if len(sys.argv) == 3 and sys.argv[1] == "--call":
    call(eval(sys.argv[2]))  # noqa: S307 - this script's own literals (CALLS below)

CALLS = ast.literal_eval("""{{CALLS}}""")  # (ids literal, what it is, whether a result is wrong)
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L152-157): h = tf.gather(wte, X) + tf.gather(wpe, "
    "positions_for(X, past_length)); tf.gather on CPU raises for an index outside the table, and X of shape "
    "[B, 0] gives an h of shape [B, 0, d]"
)
wrong = 0
for ids, what, result_is_wrong in CALLS:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--call", ids], capture_output=True, text=True, timeout=120
    )
    if done.returncode < 0:
        print(f"forward_batch({ids}) ({what}): process killed by {signal.Signals(-done.returncode).name}")
        wrong += 1
    else:
        print(f"forward_batch({ids}) ({what}): {done.stdout.strip() or done.stderr.strip()[-300:]}")
        wrong += done.returncode == 3 and result_is_wrong
print(f"{{COUNTED}}: {wrong} of {len(CALLS)}")
sys.exit(1 if wrong else 0)
