"""Run the cocotb co-simulation server on a built Verilator model (a script, not imported).

Started like ``icarus_launch.py``, as the leader of its own process group, with its parameters
as JSON in ``$MNCORE_COSIM_LAUNCH``. The model's own loop generates the clock
(``+mncore_clock_half=1``: a period of 2 time units), so the server starts no cocotb Clock; waves
go to ``vcd`` with ``--trace --trace-file``.
"""

import json
import os
import sys

from cocotb_tools.runner import get_runner
from mncore_hdl.tooling.verilator import verilator_env


def main() -> int:
    args = json.loads(os.environ["MNCORE_COSIM_LAUNCH"])
    os.environ.update(verilator_env())
    runner = get_runner("verilator")
    vcd = args.get("vcd")
    runner.test(hdl_toplevel=args["toplevel"], hdl_toplevel_lang="verilog",
                test_module=args["module"], build_dir=args["build_dir"],
                test_dir=args["test_dir"], waves=bool(vcd),
                test_args=["--trace-file", vcd] if vcd else [],
                plusargs=["+mncore_clock_half=1", *args.get("plusargs", [])],
                extra_env={"MNCORE_COSIM_CLOCK": "simulator"},
                results_xml=os.path.join(args["test_dir"], "results.xml"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
