"""The tops: :mod:`~.system` (controllers + converter), :mod:`~.cosim_top` (what the runtime
drives) and :mod:`~.cosim_tb` (the Verilog testbench the cocotb simulators run around it)."""
