"""The TensorFlow backend: GPT-2's embedding and tied head as a tf.Module (model.py) and its Adapter (adapter.py)."""

from gpt2_conformance.api.backend import REFERENCE, Backend, BenchMode

# `import tensorflow` imports all of Keras 3 where it is installed (tensorflow/__init__.py loads
# keras.src.optimizers eagerly; with it pandas and matplotlib): a quarter of the import, in
# every suite process (reports/performance.md). The reference never touches tf.keras, so its processes ask for
# the legacy tf_keras instead, which TensorFlow looks for, does not find, and skips.
# TensorFlow's CPU tensors come from glibc by default, and its inter-op threads' arenas hand
# every block over 64 MiB back to the kernel when it is freed, so each 154 MB table or gradient
# a test makes is faulted in again; its pooling allocator keeps them (TF_CPU_ALLOCATOR_USE_BFC,
# read by ProcessState::GetCPUAllocator, tensorflow/core/common_runtime/process_state.cc): a
# verdict spends less time in the kernel with it (reports/performance.md).
BACKEND = Backend(
    name="tensorflow",
    adapter="adapter:TensorFlowAdapter",
    requires=("tensorflow",),
    kind=REFERENCE,
    wraps=(
        "`tf.Variable`s read whole, `tf.gather` + the tied `tf.matmul` as in openai/gpt-2, under "
        "`tf.function` (no XLA: XLA drops the assert and clamps)"
    ),
    extra="tensorflow",
    bench="bench",
    bench_modes={
        "suite": BenchMode(
            about="tf.function (no XLA) with in-graph Assert (the adapter's mode)",
            check="on (in-graph Assert before the gather)",
        ),
        "xla": BenchMode(
            about="tf.function(jit_compile=True) gather + add returning an in-range flag; the host raises on it",
            check="on (min/max flag out of the XLA cluster, host raises)",
        ),
        "nocheck": BenchMode(
            about="forward only: tf.function(jit_compile=True) gather + add, no check (comparison only)",
            check="OFF (comparison only)",
            kinds=("forward",),
        ),
        "eager": BenchMode(
            about="eager: min/max check, tf.gather + add; head tf.matmul(transpose_b=True) eagerly",
            check="on (eager min/max, host sync)",
        ),
        "pretransposed": BenchMode(
            about="head only: eager tf.matmul(h, wte^T stored once)",
            check="n/a (head only)",
            kinds=("logits",),
        ),
    },
    child_env={"TF_USE_LEGACY_KERAS": "1", "TF_CPU_ALLOCATOR_USE_BFC": "true"},
)
