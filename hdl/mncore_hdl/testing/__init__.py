"""Helpers shared by this repository's tests, cocotb launchers and benches (not public API).

:mod:`~mncore_hdl.testing.runner` builds and runs cocotb benches on Icarus or Verilator;
:mod:`~mncore_hdl.testing.memctrl_model` is the memory controller's pure-Python reference
(sparse memory, chunking, timing checker); :mod:`~mncore_hdl.testing.hdl_checks` holds the
Amaranth unit tests' helpers. None of them imports cocotb at import time; the cocotb coroutine
modules (``tb_*.py`` and their agents) stay in ``sim/``, which :func:`~.runner.run_cocotb` puts on
the bench's ``PYTHONPATH``.
"""
