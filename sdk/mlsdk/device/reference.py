"""``pfvm:cpu`` and ``pfvm:cuda``: the host reference. Compiled functions run as plain torch
eager, on the host's CPU or on its CUDA GPU.

There is no device model behind it: a call runs the function's graph with the IR interpreter on
torch tensors of the device's torch device (``"cpu"`` or ``"cuda"``), issues no device command,
and returns TensorProxies that hold their result tensor there (``buffer`` is None; ``cpu()``
copies it to the host). A function's constants are moved to the torch device once, when it is
loaded; its inputs at each call. Its report has one ``call`` record per call, without commands,
and its cycles are of kind ``none``. It is what the modeled backends' results are compared with.
``pfvm:cuda`` opens only where ``torch.cuda.is_available()``; elsewhere it raises
DeviceNotAvailableError naming ``pfvm:cpu``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from mncore_hdl.arch import ArchConfig

from ..errors import DeviceNotAvailableError
from .base import Device

__all__ = ["ReferenceDevice", "TORCH_DEVICES"]

#: Device string -> the torch device its functions run on.
TORCH_DEVICES: dict[str, str] = {"pfvm:cpu": "cpu", "pfvm:cuda": "cuda"}


class ReferenceDevice(Device):
    """The host itself: functions run as torch eager; no DRAM, no commands, no cycles.

    It declares no device memory (``has_memory`` is False), so the Context runs its
    functions as :class:`mlsdk.host.HostFunction`, and it has none of a
    :class:`~mlsdk.device.base.DramDevice`'s memory hooks.

    Parameters
    ----------
    config : ArchConfig
        The chip programs are compiled for (layouts are computed, never used).
    name : str
        The device string.
    torch_device : torch.device or str
        Where the functions compute: ``"cpu"`` (``pfvm:cpu``) or ``"cuda"`` (``pfvm:cuda``).
    """

    cycles_kind = "none"

    def __init__(self, config: ArchConfig, name: str,
                 torch_device: torch.device | str = "cpu"):
        super().__init__(config, name)
        self.torch_device = torch.device(torch_device)

    @classmethod
    def create(cls, config: ArchConfig, name: str, options: Mapping[str, str]) -> Device:
        """The reference for ``name``, on the torch device :data:`TORCH_DEVICES` gives it.

        Raises
        ------
        DeviceNotAvailableError
            For ``pfvm:cuda`` when torch sees no CUDA GPU.
        """
        base = name.partition("?")[0]
        torch_device = TORCH_DEVICES.get(base, "cpu")
        if torch_device == "cuda" and not torch.cuda.is_available():
            built = (f"built with CUDA {torch.version.cuda}" if torch.version.cuda
                     else "a CPU-only build")
            raise DeviceNotAvailableError(
                f"Device {name!r} needs a CUDA GPU that torch can use, but torch sees none "
                f"(torch.cuda.is_available() is False; torch {torch.__version__}, {built}); "
                "use 'pfvm:cpu', the same host reference on the CPU")
        return cls(config, name, torch_device)
