"""The cocotb benches: coroutine modules (``tb_*``) and their agents, imported only inside a
simulator that cocotb runs (:func:`mncore_hdl.testing.runner.run_cocotb` names them), never by
pytest. They ship with the package, so an installed wheel runs the sweeps' RTL points.

- ``tb_memctrl``, ``tb_converter``, ``tb_coverage``: the HDL tier's benches (``sim/hdl``);
- ``tb_memctrl_bench``, ``tb_converter_bench``: the throughput benches of ``bench/`` and
  ``python -m mncore_hdl.sweep``;
- ``memctrl_agents``, ``converter_agents``: driver, monitor, reference and checker of each
  block; ``coverage_points``: the functional coverpoints they sample.

Each reads what its launcher passes through the environment variables of
:data:`mncore_hdl.settings.HDL`.
"""
