"""What the suite's tests hold instead of the adapter: a guard that keeps two promises.

1. The suite never calls what the adapter did not claim. Every call is checked against the
   adapter's Capabilities before it is forwarded: embed(past_length != 0) needs kv_cache,
   logits needs tied_head, init_tables needs init, gradients needs gradients (and tied_head
   when the logits' cotangent is not zero), assign_wte_row needs mutable_tables, and building
   an adapter needs its size, dtype and device claimed. A call outside the claims is the
   suite's own bug: it raises SuiteError (reported as ERROR, never against the adapter) and is
   never forwarded.
2. The suite never blames an implementation for its own failure. Every exception that leaves
   the adapter is marked as the adapter's (raised_by_adapter); the plugin reports an unmarked
   exception, one the suite's own code or data raised, as ERROR, not FAIL. The exception
   also carries the call in the suite's own form (runtime/calls.py), so its FAIL line says which
   input caused it.
   An answer that is not what the protocol says (not a numpy array, another shape or dtype)
   is recorded: if the suite's own code then trips over it (indexes a [B, d] h as [B, T, d]),
   the test is that answer's FAIL, in the clause that asked for it, never the suite's ERROR
   (runtime/verdicts.py). Which clause judges the form itself (SHAPE-H, DTYPE-OUTPUT) is each
   test's own question: the record changes no verdict but an ERROR's.
3. The caller's arrays stay as they were: every array passed and every answer given back is
   watched (runtime/side_effects.py) for STATE-NO-SIDE-EFFECTS, and what an adapter changed is
   put back, so that defect fails that clause and not every clause whose data it changed.
"""

from __future__ import annotations

import numbers

import numpy as np

from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.api.gpt2 import N_CTX, N_VOCAB
from gpt2_conformance.runtime.calls import describe_array, describe_call
from gpt2_conformance.runtime.side_effects import SideEffectWatch


class SuiteError(Exception):
    """The suite could not judge a clause: its own data, code or input failed (a missing
    fixture, an unreadable --checkpoint, a call it should not have made). Reported as ERROR."""


# id -> (exception, call), for exception types that take no attribute
_ADAPTER_EXCEPTIONS: dict[int, tuple[BaseException, str]] = {}
# the attributes an adapter's exception is marked with (set on any exception type, so by name)
_METHOD_ATTR, _CALL_ATTR = "__gpt2c_adapter_method__", "__gpt2c_call__"


def mark_raised_by_adapter(exc: BaseException, method: str, call: str = "") -> None:
    try:
        setattr(exc, _METHOD_ATTR, method)
        setattr(exc, _CALL_ATTR, call or f"{method}(...)")
    except (AttributeError, TypeError):
        _ADAPTER_EXCEPTIONS[id(exc)] = (exc, call or f"{method}(...)")  # kept alive: the id stays this exception's


def raised_by_adapter(exc: BaseException) -> str | None:
    """The adapter method an exception left from, or None if the suite raised it."""
    method = getattr(exc, _METHOD_ATTR, None)
    if method is None and _ADAPTER_EXCEPTIONS.get(id(exc), (None,))[0] is exc:
        method = "adapter"
    return method


def call_of(exc: BaseException) -> str:
    """The call an adapter's exception left from, in the suite's form ("" if the suite raised it)."""
    call = getattr(exc, _CALL_ATTR, None)
    if call is None and _ADAPTER_EXCEPTIONS.get(id(exc), (None,))[0] is exc:
        call = _ADAPTER_EXCEPTIONS[id(exc)][1]
    return call or ""


# the answers of the test now running that are not of the protocol's form: one line each, with the
# call (hooks.py forgets them as each test starts)
_MALFORMED: list[str] = []
_ANSWER_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "float32"}  # bfloat16: its float32 carrier


def forget_malformed_answers() -> None:
    _MALFORMED.clear()


def malformed_answers() -> list[str]:
    """This test's answers that are not of the protocol's form, each a one-line FAIL message."""
    return list(_MALFORMED)


def _form(value, what: str, shape: tuple, dtype: str | None, call: str) -> str | None:
    """What is wrong with an answer's form, in the suite's one-line shape, or None."""
    if not isinstance(value, np.ndarray):
        return f"{what} is {type(value).__name__}, but should be a numpy.ndarray of shape {shape} [{call}]"
    if value.shape != shape:
        return f"{what}.shape={value.shape}, but should be {shape} [{call}]"
    if dtype is not None and value.dtype != np.dtype(dtype):
        return f"{what}.dtype={value.dtype}, but should be {dtype} [{call}]"
    return None


def _pair(value, names: tuple[str, str], shapes: tuple[tuple, tuple], dtype: str | None, call: str) -> str | None:
    """The same for an answer that is two arrays (tables(), gradients())."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        return f"{call} returned {type(value).__name__}, but should return two numpy arrays ({', '.join(names)})"
    return _form(value[0], names[0], shapes[0], dtype, call) or _form(value[1], names[1], shapes[1], dtype, call)


def is_zero_offset(past_length) -> bool:
    """past_length is 0 in one of its valid forms (int, numpy integer, 0-d integer array)."""
    if isinstance(past_length, (bool, np.bool_)):
        return False
    if isinstance(past_length, np.ndarray):
        return past_length.ndim == 0 and np.issubdtype(past_length.dtype, np.integer) and int(past_length) == 0
    return isinstance(past_length, numbers.Integral) and int(past_length) == 0


class GuardedAdapter:
    """Forwards to `inner` after checking the claim each call needs, and watches the arrays it
    passes and gets back (module docstring)."""

    def __init__(self, inner, capabilities: Capabilities, config: AdapterConfig | None = None):
        self._inner, self._caps = inner, capabilities
        self._config = config if config is not None else getattr(inner, "config", None)
        self._watch = SideEffectWatch()

    def side_effects(self) -> list:
        """What this adapter changed that it should not have (side_effects.SideEffect: what, call),
        in the order it happened (STATE-NO-SIDE-EFFECTS)."""
        return list(self._watch.found)

    def _need(self, requirement: str, call: str) -> None:
        if not self._caps.claims(requirement):
            raise SuiteError(
                f"the suite called {call}, which needs {requirement}, but the adapter does not "
                "claim it (a bug in the suite: a clause must not call what is not claimed)"
            )

    def _forward(self, method: str, args: tuple, call: str, watched: dict | None = None, answer: str = ""):
        """The adapter's method on args; `watched` arrays are checked (and put back) after it, and an
        answer named `answer` is watched from now on (runtime/side_effects.py)."""
        kept = self._watch.keep_arguments(watched or {})
        try:
            out = getattr(self._inner, method)(*args)
        except Exception as exc:
            mark_raised_by_adapter(exc, method, call)
            raise
        finally:
            self._watch.check_arguments(kept, call)
        return self._watch.hand_back(out, answer, call) if answer else out

    def _expect(self, problem: str | None) -> None:
        if problem is not None:
            _MALFORMED.append(problem)

    def _dtype(self) -> str | None:
        return _ANSWER_DTYPES.get(getattr(self._config, "dtype", None) or "")

    def _tables_shapes(self) -> tuple[tuple, tuple] | None:
        d = getattr(self._config, "n_embd", None)
        return None if d is None else ((N_VOCAB, d), (N_CTX, d))

    # -- the protocol, each call with the claim it needs --------------------------------
    def load_tables(self, wte, wpe):
        call = describe_call("load_tables", wte=describe_array(wte), wpe=describe_array(wpe))
        out = self._forward("load_tables", (wte, wpe), call)
        self._watch.watch_tables(wte, wpe)
        return out

    def tables(self):
        out = self._forward("tables", (), "tables()")
        shapes = self._tables_shapes()
        if shapes is not None:
            self._expect(_pair(out, ("wte", "wpe"), shapes, None, "tables()"))
        return out

    def parameters(self):
        return self._forward("parameters", (), "parameters()")

    def embed(self, ids, past_length=None):
        # embed(ids) reaches the adapter as embed(ids): the protocol's default past_length (0) is
        # the adapter's own, and LOOKUP-EXACT asks that it be 0
        if past_length is None:
            call = describe_call("embed", ids)
            out = self._forward("embed", (ids,), call, {"ids": ids}, answer="h")
        else:
            call = describe_call("embed", ids, past_length)
            if not is_zero_offset(past_length):
                self._need("kv_cache", call)
            out = self._forward("embed", (ids, past_length), call, {"ids": ids}, answer="h")
        d = getattr(self._config, "n_embd", None)
        if isinstance(ids, np.ndarray) and ids.ndim == 2 and d is not None:
            self._expect(_form(out, "h", ids.shape + (d,), self._dtype(), call))
        return out

    def logits(self, h_final):
        call = describe_call("logits", h_final=describe_array(h_final))
        self._need("tied_head", call)
        out = self._forward("logits", (h_final,), call, {"h_final": h_final}, answer="logits")
        if isinstance(h_final, np.ndarray) and h_final.ndim >= 1:
            self._expect(_form(out, "logits", h_final.shape[:-1] + (N_VOCAB,), self._dtype(), call))
        return out

    def init_tables(self, seed):
        call = f"init_tables(seed={seed!r})"
        self._need("init", call)
        return self._forward("init_tables", (seed,), call)

    def assign_wte_row(self, index, values):
        call = f"assign_wte_row({index!r}, values={describe_array(values)})"
        self._need("mutable_tables", call)
        kept = self._watch.keep_row(index)
        out = self._forward("assign_wte_row", (index, values), call, {"values": values})
        self._watch.check_row(kept, index, call)
        return out

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        call = describe_call(
            "gradients",
            ids,
            past_length,
            cotangent_h=describe_array(cotangent_h),
            cotangent_logits=describe_array(cotangent_logits),
        )
        self._need("gradients", call)
        if np.any(cotangent_logits):
            self._need("tied_head", "gradients(cotangent_logits != 0)")
        if not is_zero_offset(past_length):
            self._need("kv_cache", call)
        out = self._forward(
            "gradients",
            (ids, past_length, cotangent_h, cotangent_logits),
            call,
            {"ids": ids, "cotangent_h": cotangent_h, "cotangent_logits": cotangent_logits},
            answer="gradients",
        )
        shapes = self._tables_shapes()
        if shapes is not None:
            self._expect(_pair(out, ("dwte", "dwpe"), shapes, None, call))
        return out

    def __getattr__(self, name):  # anything else (an adapter's own switches) is the adapter's
        return getattr(self._inner, name)


class GuardedFactory:
    """Builds guarded adapters; refuses (SuiteError) a config whose size, dtype or device is
    not claimed. Attributes other than the call (capabilities, WAIVERS, ...) are the factory's."""

    def __init__(self, factory, capabilities: Capabilities):
        self._factory, self._caps = factory, capabilities

    def __call__(self, config: AdapterConfig) -> GuardedAdapter:
        for requirement in (f"size:{config.n_embd}", f"dtype:{config.dtype}", f"device:{config.device}"):
            if not self._caps.claims(requirement):
                raise SuiteError(
                    f"the suite asked for an adapter with {requirement}, which the adapter does "
                    "not claim (a bug in the suite)"
                )
        try:
            instance = self._factory(config)
        except Exception as exc:
            mark_raised_by_adapter(exc, "__init__", f"building the adapter with {config}")
            raise
        return GuardedAdapter(instance, self._caps, config)

    def __getattr__(self, name):
        return getattr(self._factory, name)
