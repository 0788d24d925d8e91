"""ncnn: the Embed layer (nn.Embedding after pnnx, the token and position tables of every converted
GPT-2, BERT, Whisper decoder ...) clamps an out-of-range index instead of failing: an id past the
end reads the table's last row, a negative id reads row 0. The caller gets a well-formed output of
wrong rows and a return code of 0; torch's nn.Embedding raises IndexError for the same input.

Standalone: needs only ncnn's Python bindings and numpy. The net is one Input and one Embed layer
(a 4-row, 3-wide table, rows 10, 20, 30, 40), written as ncnn's .param text and .bin bytes (a
4-byte zero flag then float32 data, as ModelBin::load(w, 0) reads a weight). Exits 1 while ncnn
answers the bad ids with table rows (clamping), 0 once it refuses them (a non-zero return code or
an exception)."""

import os
import sys
import tempfile

import ncnn
import numpy as np

ROWS, WIDTH = 4, 3
table = np.repeat(np.arange(1, ROWS + 1, dtype=np.float32)[:, None] * 10, WIDTH, axis=1)  # row r = 10 (r + 1)
param = f"7767517\n2 2\nInput in0 0 1 in0\nEmbed embed 1 1 in0 out0 0={WIDTH} 1={ROWS} 2=0 3={ROWS * WIDTH}\n"
model = np.zeros(1, np.uint32).tobytes() + table.tobytes()  # flag 0: raw float32


def run(ids):
    net = ncnn.Net()
    net.opt.use_fp16_storage = net.opt.use_fp16_packed = net.opt.use_fp16_arithmetic = False
    net.opt.use_bf16_storage = False
    with tempfile.TemporaryDirectory() as folder:  # from files: ncnn copies what it reads
        path = os.path.join(folder, "embed.ncnn.bin")
        with open(path, "wb") as f:
            f.write(model)
        assert net.load_param_mem(param) == 0 and net.load_model(path) == 0
    with net.create_extractor() as ex:
        ex.input("in0", ncnn.Mat(np.asarray(ids, np.int32)).clone())
        rc, out = ex.extract("out0")
        return rc, np.array(out)


print(f"ncnn {ncnn.__version__}; Embed table rows: {table[:, 0].tolist()}")
rc, good = run([0, 1, 2, 3])
assert rc == 0 and np.array_equal(good, table), (rc, good)
print("ids [0, 1, 2, 3] -> rows", good[:, 0].tolist(), "(valid ids: the table itself)")
clamped = 0
for bad in (4, 50257, 2**31 - 1, -1, -100):
    try:
        rc, out = run([bad])
    except Exception as exc:  # noqa: BLE001 - any refusal is the fixed behaviour
        print(f"id {bad}: {type(exc).__name__}: {exc}")
        continue
    if rc != 0:
        print(f"id {bad}: extract returned {rc}")
        continue
    row = int(np.flatnonzero((table == out[0]).all(axis=1))[0]) if (table == out[0]).all(axis=1).any() else None
    print(f"id {bad}: rc 0, output {out[0].tolist()} = table row {row}")
    clamped += row is not None
if clamped:
    print(f"ncnn Embed clamps out-of-range ids: {clamped} of 5 bad ids returned a table row with rc 0")
    sys.exit(1)
print("every out-of-range id was refused")
sys.exit(0)
