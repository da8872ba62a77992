"""IR ops a training step needs beyond the forward ones: ``maximum`` and ``minimum``.

Registered into :data:`mncore_compiler.ops.OPS` when that module is imported. Backward and
optimizer ops (``threshold_backward``, ``addcdiv``, ``lerp``, ...) are not IR ops: their
handlers (:mod:`mncore_compiler._aten_train`) decompose them into the elementwise ops.
"""

from __future__ import annotations

import torch

from .ops import _binary_reference, _broadcast, _per_output, _register

__all__: list[str] = []

_register("maximum", "elementwise", 2, (), _broadcast, _binary_reference(torch.maximum),
          _per_output(1))  # fmt: skip
_register("minimum", "elementwise", 2, (), _broadcast, _binary_reference(torch.minimum),
          _per_output(1))  # fmt: skip
