"""Adapters that misbehave as adapters (not as GPT-2s): they hang, crash the interpreter or
return the wrong type. tests/test_runner.py checks that each costs a FAIL with the reason and
that the run goes on. Imported by the runner's child process through PYTHONPATH."""

from __future__ import annotations

import os
import signal
import time

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

TRIGGER = (2, 1)  # ids shape of test_token_by_token_decode's steps: only that test misbehaves


class HangsInPython(NumpyAdapter):
    def embed(self, ids, past_length=0):
        if ids.shape == TRIGGER:
            time.sleep(3600)
        return super().embed(ids, past_length)


class HangsInNativeCode(NumpyAdapter):
    """Blocks SIGALRM like a C extension that never returns to the interpreter, so only the
    runner's watchdog can stop it."""

    def embed(self, ids, past_length=0):
        if ids.shape == TRIGGER:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        return super().embed(ids, past_length)


class CrashesInterpreter(NumpyAdapter):
    def embed(self, ids, past_length=0):
        if ids.shape == TRIGGER:
            os.abort()  # what a device-side assert or a segfault looks like from outside
        return super().embed(ids, past_length)


class ReturnsList(NumpyAdapter):
    def embed(self, ids, past_length=0):
        return super().embed(ids, past_length).tolist()


class CpuOnly(NumpyAdapter):
    """Claims only the CPU; run with --device gpu every clause is not claimed."""


class HangsInLogits(NumpyAdapter):
    """Its head never returns (a deadlocked device queue, a busy-wait on a stream): every clause
    that reads logits, and the parity fingerprint, would wait forever."""

    def logits(self, h_final):
        time.sleep(3600)


class FailsHoldingAnArray(NumpyAdapter):
    """Every embed raises while its frame holds a fresh array (in a reference cycle through the
    guard's `except ... as exc` frame), and records how many earlier such arrays are still alive:
    tests/test_memory.py checks that what a failed test's frames hold is freed before the next test."""

    held: list = []  # weakrefs to each failing call's array
    alive_at_call: list = []  # how many of them were still alive when the next embed came

    def embed(self, ids, past_length=0):
        import weakref

        import numpy as np

        FailsHoldingAnArray.alive_at_call.append(sum(ref() is not None for ref in self.held))
        array = np.ones(1 << 20, np.float32)
        FailsHoldingAnArray.held.append(weakref.ref(array))
        raise RuntimeError("fails while its frame holds a 4 MB array")


class ImportsAFrameworkWhenBuilt(NumpyAdapter):
    """The first one built imports a "framework" (as keras-hub's adapters import Keras then):
    FRAMEWORK_MODULES modules, each holding objects the cyclic collector tracks. Each embed records
    how many objects the collector has frozen (gc.get_freeze_count): tests/test_memory.py checks that
    the suite freezes the framework after the test that imported it, as it froze what collection
    imported."""

    FRAMEWORK_MODULES = 300
    frozen_at_call: list = []

    def __init__(self, config=None):
        import sys
        import types

        super().__init__(*(() if config is None else (config,)))
        for i in range(self.FRAMEWORK_MODULES):
            name = f"gpt2c_test_framework_{i}"
            if name not in sys.modules:
                module = sys.modules[name] = types.ModuleType(name)
                module.objects = [[] for _ in range(100)]

    def embed(self, ids, past_length=0):
        import gc

        ImportsAFrameworkWhenBuilt.frozen_at_call.append(gc.get_freeze_count())
        return super().embed(ids, past_length)


# Not adapters at all: what a typo in --adapter package.module:factory can name
NOT_A_FACTORY = 5


def factory_without_claims(config=None):
    return NumpyAdapter(config)
