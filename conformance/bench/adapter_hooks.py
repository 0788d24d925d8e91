"""Bench hooks for any adapter without a backends/<fw>/bench.py of its own: the third-party
implementations, plug-ins and `--adapter package.module:factory`. AdapterHooks(spec) has the
same names as a backends/<fw>/bench.py module (MODES, SUITE_MODE, FASTEST_MODE, CHECK,
available, threads_setting, Runner).

Modes:
  native  the implementation's own callables (conformance/api/bench.py): its tensors in
          and out, put on the device once, its own synchronisation, no numpy in the timed
          call. Only where the adapter brings native hooks (every built-in backend does).
  bridge  the Adapter API as the suite calls it: numpy in, numpy out, conversions included.
          Beside native, the difference is the bridge's cost.

Either way the bounds check is whatever the implementation does (third-party implementations
are judged as they are: see their scorecards), and the check column says so. Backward is
timed natively where the hooks give one; never through the bridge:
Adapter.gradients also takes a logits cotangent of B*T*50257 floats (1.6 GB at the prefill
shape), which would swamp the scatter-add being measured.
"""

from __future__ import annotations

from gpt2_conformance.api import bench as native
from gpt2_conformance.api.adapter import AdapterConfig, capabilities_of

BRIDGE = "the Adapter API (numpy in, numpy out, conversions included) as the suite calls it"
NATIVE = "native hooks: the framework's tensors put on the device once, its own sync, no numpy in the call"
OWN_CHECK = "the implementation's own (see its scorecard)"
NATIVE_MODE, BRIDGE_MODE = "native", "bridge"


class AdapterHooks:
    def __init__(self, spec: str):
        from gpt2_conformance import registry

        self.spec = spec
        self.factory = registry.resolve(spec)
        self.native = native.has_native(self.factory)
        self.MODES = ({NATIVE_MODE: NATIVE} if self.native else {}) | {BRIDGE_MODE: BRIDGE}
        self.SUITE_MODE = BRIDGE_MODE
        self.FASTEST_MODE = NATIVE_MODE if self.native else BRIDGE_MODE
        self.DEFAULT_MODE = self.FASTEST_MODE  # the implementation on its own tensors, where it can be
        self.CHECK = {m: OWN_CHECK for m in self.MODES}
        self._threads = ""
        hooks = self

        class Runner(_Runner):
            def __init__(self, wte, wpe, mode, device):
                super().__init__(hooks, wte, wpe, mode, device)

        self.Runner = Runner

    def available(self, device: str) -> tuple[bool, str]:
        """On a device the adapter does not claim, only the native mode can run (where its
        hooks see that device); the bridge mode is then dropped."""
        devices = capabilities_of(self.factory).devices
        if device in devices:
            return True, ""
        if self.native:
            ok, why = native.native_available(self.factory, device)
            if ok:
                self.MODES.pop(BRIDGE_MODE, None)
                self.CHECK.pop(BRIDGE_MODE, None)
                self.SUITE_MODE = NATIVE_MODE
                return True, ""
            return False, f"{self.spec}: {why}"
        return False, (
            f"{self.spec} does not claim device {device!r} ({devices}) and brings no native bench "
            "hooks (conformance/api/bench.py)"
        )

    def threads_setting(self) -> str:
        return self._threads or "the implementation's defaults"


class _Runner:
    def __init__(self, hooks: AdapterHooks, wte, wpe, mode: str, device: str):
        self.mode = mode
        devices = capabilities_of(hooks.factory).devices
        # an adapter that claims only the CPU is built there; its native hooks move it
        self.adapter = hooks.factory(AdapterConfig(n_embd=wte.shape[1], device=device if device in devices else "cpu"))
        self.adapter.load_tables(wte, wpe)
        self.caches = capabilities_of(hooks.factory).kv_cache
        self.nb = native.find(self.adapter, device) if mode == NATIVE_MODE else None
        if mode == NATIVE_MODE and self.nb is None:
            raise RuntimeError(f"{hooks.spec}: no native bench hooks")
        if self.nb is not None and self.nb.threads:
            hooks._threads = self.nb.threads

    def put(self, array):
        return array if self.nb is None else self.nb.put(array)

    def sync(self, out):
        return out if self.nb is None else self.nb.sync(out)

    def make_step(self, ids, past_length):
        """The engine's own decode step (NativeBench.step), or None where its hooks bring none."""
        if self.nb is None or self.nb.step is None or (past_length and not self.caches):
            return None
        nb = self.nb
        return lambda: nb.step(ids, past_length)

    def make(self, w, ids, past_length, dh=None, h=None):
        if past_length and w.kind != "logits" and not self.caches:
            return None  # a cached call the implementation does not claim (kv_cache): nothing to time
        if self.nb is not None:
            nb = self.nb
            if w.kind == "forward":
                return lambda: nb.forward(ids, past_length)
            if w.kind == "logits" and nb.logits is not None:
                return lambda: nb.logits(h)
            if w.kind == "backward" and nb.backward is not None:
                return lambda: nb.backward(ids, past_length, dh)
            return None
        if w.kind == "forward":
            return lambda: self.adapter.embed(ids, past_length)
        if w.kind == "logits":
            return lambda: self.adapter.logits(h)
        return None  # backward: see the module docstring
