"""keras-hub-torch (backends/thirdparty/keras_hub, entry on_torch/): keras-hub's GPT2Backbone with
Keras on torch. Its whole verdict is tests/test_thirdparty.py's; here, that the entry really runs
on torch and hands the tables to it and back unchanged."""

import pytest

from helpers.keras_hub_probe import probe

pytestmark = pytest.mark.slow  # a process that imports Keras on torch


def test_the_entry_runs_on_its_own_framework():
    pytest.importorskip("keras_hub")
    pytest.importorskip("torch")
    assert probe("KerasHubTorchAdapter") == ["torch", "True", "True"]
