"""The cocotb runner for Icarus Verilog, set to dump VCD (what pyvcd and GTKWave read)."""

from __future__ import annotations

from typing import Any

__all__ = ["icarus_vcd_runner"]


def icarus_vcd_runner() -> Any:
    """``cocotb_tools.runner.get_runner("icarus")``, dumping VCD instead of its default FST."""
    from cocotb_tools.runner import get_runner

    base = type(get_runner("icarus"))

    class IcarusVcd(base):  # type: ignore[misc, valid-type]
        def _test_command(self):
            cmds = super()._test_command()
            return [[("-vcd" if arg == "-fst" else arg) for arg in cmd] for cmd in cmds]

    return IcarusVcd()
