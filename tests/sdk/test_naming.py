"""Tensor names (``mlsdk.naming``): set, read, given to a module's tensors, held weakly, and
the errors of bad arguments."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from mlsdk import get_tensor_name, set_tensor_name, set_tensor_name_in_module


def test_names_are_set_read_and_given_to_a_module():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    assert get_tensor_name(model[0].weight) is None
    set_tensor_name(model[0].weight, "w")
    assert get_tensor_name(model[0].weight) == "w"
    set_tensor_name_in_module(model, "net")
    assert get_tensor_name(model[0].weight) == "net.0.weight"
    assert get_tensor_name(model[1].running_mean) == "net.1.running_mean"
    assert get_tensor_name(model[0].weight.detach()) is None, "a view is another tensor"


def test_a_name_does_not_keep_the_tensor_alive():
    tensor = torch.ones(3)
    set_tensor_name(tensor, "t")
    ref = weakref.ref(tensor)
    del tensor
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("call, error, match", [
    (lambda: set_tensor_name([1.0], "x"), TypeError, "must be a torch.Tensor, not list"),
    (lambda: set_tensor_name(torch.ones(1), 3), TypeError, "must be a str, not int"),
    (lambda: set_tensor_name(torch.ones(1), ""), ValueError, "non-empty"),
    (lambda: get_tensor_name("w"), TypeError, "must be a torch.Tensor, not str"),
    (lambda: set_tensor_name_in_module(torch.ones(2), "m"), TypeError,
     "Expected a torch.nn.Module, not Tensor"),
])
def test_bad_names_are_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
