"""The guard's side-effect watch (conformance/runtime/side_effects.py) and the call every FAIL
line ends with (runtime/calls.py, runtime/verdicts.py), on small arrays and the NumPy reference."""

import numpy as np
import pytest

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
from gpt2_conformance.runtime.calls import describe_call, layout_of
from gpt2_conformance.runtime.guard import GuardedAdapter, call_of
from gpt2_conformance.runtime.side_effects import SideEffectWatch
from gpt2_conformance.runtime.strategies import LAYOUTS, in_layout
from gpt2_conformance.runtime.verdicts import classify


def _guarded(adapter_class=NumpyAdapter):
    return GuardedAdapter(adapter_class(), adapter_class.capabilities)


def test_an_argument_written_into_is_reported_and_put_back():
    watch = SideEffectWatch()
    ids = np.array([[11, 12, 13, 14]])
    kept = watch.keep_arguments({"ids": ids})
    ids[0] = ids[0][::-1]
    watch.check_arguments(kept, "embed(ids=int64[1, 4] in [11, 14], past_length=0)")
    assert list(map(str, watch.found)) == [
        "ids[0, 0:4] was [11, 12, 13, 14], after embed() it is [14, 13, 12, 11] (4 of 4 "
        "elements changed): the adapter wrote into its input [embed(ids=int64[1, 4] in [11, 14], "
        "past_length=0)]"
    ]
    assert ids.tolist() == [[11, 12, 13, 14]]


def test_a_reused_output_buffer_is_reported_and_the_earlier_answer_kept():
    watch = SideEffectWatch()
    buffer = np.ones((1, 1, 4), np.float32)
    first = watch.hand_back(buffer, "h", "embed(a)")
    buffer[:] = 2  # the adapter writes its next answer into the same buffer
    second = watch.hand_back(buffer, "h", "embed(b)")
    assert first.tolist() == [[[1, 1, 1, 1]]] and second.tolist() == [[[2, 2, 2, 2]]]
    assert second is not first
    assert (
        watch.found[0].what.startswith(
            "h[0, 0, 0:4] returned by embed(a) was [1, 1, 1, 1], after embed() it is [2, 2, 2, 2]"
        )
        and watch.found[0].call == "embed(b)"
    )


def test_fresh_answers_are_handed_back_as_they_are():
    watch = SideEffectWatch()
    a, b = np.zeros(3), np.ones(3)
    assert watch.hand_back(a, "h", "embed(a)") is a and watch.hand_back(b, "h", "embed(b)") is b
    assert watch.found == []


def test_the_reference_has_no_side_effects_in_any_layout():
    guarded = _guarded()
    guarded.load_tables(
        np.random.default_rng(0).standard_normal((50257, 768), dtype=np.float32), np.zeros((1024, 768), np.float32)
    )
    kept = []
    for layout in LAYOUTS:
        kept.append(guarded.embed(in_layout(np.arange(12).reshape(2, 6) * 97, layout), 3))
    guarded.logits(kept[-1])
    guarded.assign_wte_row(5, np.ones(768, np.float32))
    assert guarded.side_effects() == []


@pytest.mark.parametrize(
    "layout,tag",
    [
        ("C", ""),
        ("F", "Fortran order"),
        ("column-view", "column view"),
        ("every-other", "every-other-column view"),
        ("reversed", "reversed view"),
        ("read-only", "read-only"),
    ],
)
def test_each_layout_is_named_in_the_call(layout, tag):
    ids = in_layout(np.arange(12).reshape(3, 4), layout)
    assert layout_of(ids).startswith(tag) if tag else layout_of(ids) == ""
    assert (tag in describe_call("embed", ids, 0)) if tag else "view" not in describe_call("embed", ids, 0)


class _ArangeOnZeroDim(NumpyAdapter):
    """Glue that hands past_length to an API that takes only a Python int."""

    def embed(self, ids, past_length=0):
        if isinstance(past_length, np.ndarray):
            raise TypeError("arange() received an invalid combination of arguments")
        return super().embed(ids, past_length)


def test_an_adapter_exception_names_the_call_that_raised_it():
    guarded = _guarded(_ArangeOnZeroDim)
    ids, past = np.array([[7]]), np.array(517)
    with pytest.raises(TypeError) as info:
        guarded.embed(ids, past)
    assert call_of(info.value) == "embed(ids=int64[1, 1] in [7, 7], past_length=array(517))"
    kind, message = classify(info)
    assert kind == "failed"
    assert message.startswith("adapter raised TypeError at test_side_effects.py:")
    assert message.endswith(
        ": arange() received an invalid combination of arguments "
        "[embed(ids=int64[1, 1] in [7, 7], past_length=array(517))]"
    )
