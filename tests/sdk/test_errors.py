"""The SDK's errors (``mlsdk.errors``): one family under ``MLSDKError``, each also the builtin a
caller would catch for its kind (a bad input is a ``ValueError``, no room a ``MemoryError``),
all exported by ``mlsdk``."""

from __future__ import annotations

import mlsdk
import mlsdk.errors
import pytest
from mncore_compiler import errors as compiler_errors

ALSO = {  # error -> the builtin it also is
    "DeviceMemoryError": MemoryError, "InputError": ValueError, "IOSpecMismatchError": ValueError,
    "ConversionRequiredError": ValueError, "OptimizerChangedError": RuntimeError,
}


@pytest.mark.parametrize("name", mlsdk.errors.__all__)
def test_each_error_is_an_mlsdk_error_and_its_builtin(name):
    error = getattr(mlsdk.errors, name)
    assert issubclass(error, mlsdk.MLSDKError)
    assert issubclass(error, ALSO.get(name, Exception))
    if name != "OptimizerChangedError":  # public in mlsdk.errors only
        assert getattr(mlsdk, name) is error and name in mlsdk.__all__


def test_what_the_compiler_raises_on_load_is_the_sdks_error():
    # DeviceProgram.load raises the compiler's CodegenError: the same class users catch.
    assert compiler_errors.CodegenError is mlsdk.CodegenError
    assert compiler_errors.MLSDKError is mlsdk.MLSDKError
