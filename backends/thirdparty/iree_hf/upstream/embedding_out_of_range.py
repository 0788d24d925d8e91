"""Standalone reproduction (IREE only: iree-base-compiler and iree-base-runtime, no torch): the torch
frontend lowers `aten.embedding` to a gather guarded by two cf.assert bounds checks, IREE drops
them before codegen (present after dispatch creation, gone at flow), and the compiled llvm-cpu
gather returns values read from outside the table for an index past its end, with no error.

The module is torch-mlir's torch dialect, the form iree-turbine imports a torch.export program
to (Hugging Face GPT-2's token and position lookups are exactly this op). Its table is 8 rows of
4 values, row r holding r everywhere; the lookup of index 8 (one past the end) should raise, as
torch's eager nn.Embedding does (IndexError: index out of range in self).

Exits 1 while the bug is there (the call returns, its row is not in the table), 0 when the call
raises. Negative indices are not tried: they can read before the buffer and crash the process.
"""

import sys
from importlib.metadata import version

import iree.compiler
import iree.runtime
import numpy as np

ROWS, WIDTH = 8, 4
MODULE = f"""
func.func @main(%table: !torch.vtensor<[{ROWS},{WIDTH}],f32>, %ids: !torch.vtensor<[?],si64>)
    -> !torch.vtensor<[?,{WIDTH}],f32> {{
  %padding = torch.constant.int -1
  %false = torch.constant.bool false
  %rows = torch.aten.embedding %table, %ids, %padding, %false, %false
      : !torch.vtensor<[{ROWS},{WIDTH}],f32>, !torch.vtensor<[?],si64>, !torch.int, !torch.bool, !torch.bool
      -> !torch.vtensor<[?,{WIDTH}],f32>
  return %rows : !torch.vtensor<[?,{WIDTH}],f32>
}}
"""
FLAGS = [
    "--iree-input-type=torch",
    "--iree-llvmcpu-target-cpu=host",
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
]


def main() -> int:
    print(f"iree-base-compiler {version('iree-base-compiler')}, iree-base-runtime {version('iree-base-runtime')}")
    # the torch input pipeline's gather: tensor.extract guarded by two cf.assert bounds checks ...
    for phase in ("dispatch-creation", "flow"):
        lowered = iree.compiler.compile_str(MODULE, extra_args=[*FLAGS, f"--compile-to={phase}"]).decode()
        checks = [line.strip() for line in lowered.splitlines() if "cf.assert" in line]
        print(f"after --compile-to={phase}: {len(checks)} cf.assert", *checks, sep="\n  ")
    # ... gone at flow: the compiled module checks nothing
    vmfb = iree.compiler.compile_str(MODULE, extra_args=FLAGS)
    config = iree.runtime.Config("local-task")
    context = iree.runtime.SystemContext(config=config)
    context.add_vm_module(iree.runtime.VmModule.copy_buffer(config.vm_instance, vmfb))
    lookup = context.modules.module["main"]
    table = np.repeat(np.arange(ROWS, dtype=np.float32)[:, None], WIDTH, axis=1)  # row r holds r

    good = lookup(table, np.array([3], np.int64)).to_host()
    assert np.array_equal(good[0], table[3]), good  # an index in range reads its row
    try:
        bad = lookup(table, np.array([ROWS], np.int64)).to_host()
    except (RuntimeError, ValueError, IndexError) as exc:  # the fix: the call reports the bad index
        print(f"index {ROWS} of a {ROWS}-row table raised {type(exc).__name__}: {exc}")
        return 0
    print(f"index {ROWS} of a {ROWS}-row table returned {bad[0].tolist()} with no error (rows hold 0..{ROWS - 1})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
