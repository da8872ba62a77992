"""Helpers shared by this repository's tests, cocotb launchers and benches (not public API).

:mod:`~mncore_hdl.testing.runner` builds and runs cocotb benches on Icarus or Verilator;
:mod:`~mncore_hdl.testing.memctrl_model` is the memory controller's pure-Python reference
(sparse memory, chunking, timing checker); :mod:`~mncore_hdl.testing.hdl_checks` holds the
Amaranth unit tests' helpers; :mod:`~mncore_hdl.testing.memctrl_bench`,
:mod:`~mncore_hdl.testing.litedram_model` and :mod:`~mncore_hdl.testing.starvation` are the
logic of the memory-controller bench scripts in ``bench/``. None of them imports cocotb at import
time; the cocotb coroutine modules (``tb_*`` and their agents) are
:mod:`~mncore_hdl.testing.cocotb_benches`, which only a simulator imports.
"""
