"""Every hardware/software contract, declared once (pure Python, no Amaranth).

- :mod:`.memctrl`: requester port indices, request/beat payloads, DRAM command kinds, the
  controller's CSR map and counters;
- :mod:`.converter`: the layout converter's register table, CTRL/STATUS bits, error codes,
  ports and counters;
- :mod:`.cosim`: the memory-system and co-simulation tops' port lists and back-door paths;
- :mod:`.testbench`: the ports ``cosim_tb`` adds around the co-simulation top (host DMA
  engines, bulk back door);
- :mod:`.counters`: the width of every performance counter.

The RTL builds its registers, ports and decoders from these declarations; the RTL driver, the
cocotb benches, the waveform groups and the benches name registers and ports through them.
``tests/hdl/test_contracts.py`` elaborates the design and fails if the two disagree.
"""

from . import converter, cosim, counters, memctrl, testbench

__all__ = ["converter", "cosim", "counters", "memctrl", "testbench"]
