"""Verilog and simulator tooling: :mod:`~.verilog` (export, cached by the design's sources),
:mod:`~.icarus` (the cocotb Icarus runner) and :mod:`~.verilator` (model builds, with
``verilator_main.cpp``)."""
