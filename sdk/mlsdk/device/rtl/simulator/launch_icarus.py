"""Run the cocotb co-simulation server on a built Icarus design (a script, not imported).

Started by :class:`~mlsdk.device.rtl.icarus.IcarusSession` as the leader of its own process
group, so killing the group also ends ``vvp``. Its parameters arrive as JSON in
``$MNCORE_COSIM_LAUNCH``; it imports nothing of the SDK (only the small
``mncore_hdl.tooling.icarus``), so it starts fast.
"""

import json
import os
import sys

from mncore_hdl.tooling.icarus import icarus_vcd_runner

from mlsdk.settings import SDK


def main() -> int:
    args = json.loads(SDK["MNCORE_COSIM_LAUNCH"].raw() or "{}")
    runner = icarus_vcd_runner()
    vcd = args.get("vcd")
    runner.test(hdl_toplevel=args["toplevel"], hdl_toplevel_lang="verilog",
                test_module=args["module"], build_dir=args["build_dir"],
                test_dir=args["test_dir"], waves=bool(vcd),
                plusargs=[f"+dumpfile_path={vcd}"] if vcd else [],
                extra_env={}, results_xml=os.path.join(args["test_dir"], "results.xml"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
