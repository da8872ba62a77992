"""The ports of the memory-system and co-simulation tops, and where their backing stores live.

Pure Python: the RTL driver, the cocotb server, the Amaranth-simulator backend, the waveform
groups and the benches name the tops' ports and back doors through these declarations;
``tests/hdl/test_contracts.py`` compares them with the elaborated designs' signatures.
"""

from __future__ import annotations

from ..arch import ArchConfig
from ..descriptors import DESCRIPTOR_BITS, SLOT_BITS
from .converter import CONTROL_PORTS
from .counters import COUNTER_BITS
from .memctrl import CSR_ADDR_BITS, RequestFormat, rdata_fields, wdata_fields

__all__ = ["CYCLE_BITS", "SYSTEM_INSTANCE", "CONTROLLER_INSTANCE", "TB_DUT_INSTANCE",
           "BACKING_STORE",
           "backing_store", "TOP_PATHS", "REQ", "WDATA", "RDATA", "STREAMS", "VALID", "READY",
           "PAYLOAD", "stream_member", "requester_prefix", "stream_port", "csr_addr_port",
           "csr_rdata_port", "MC_IDLE", "MC_ERROR", "CYCLE", "DESC_INDEX", "DESC_WDATA",
           "DESC_WE", "DESC_RDATA", "DESC_PORTS", "system_ports",
           "cosim_ports", "top_inputs", "payload_fields", "field_port", "OBSERVATION"]

#: Width of the co-simulation top's free-running cycle counter.
CYCLE_BITS = 48

# -- hierarchy and back doors -------------------------------------------------------------------

#: The memory system's instance name in the co-simulation top.
SYSTEM_INSTANCE = "system"
#: The co-simulation top's instance name in the testbench top ``cosim_tb``.
TB_DUT_INSTANCE = "dut"
#: Group ``g``'s controller's instance name in the memory system.
CONTROLLER_INSTANCE = "mc{g}"
_STORE_IN_CONTROLLER = "backend.engine.mem"
#: Hierarchical path of Group ``{g}``'s backing store in each design that has one: a lone
#: controller, the memory system, the co-simulation top, and the converter's test harness
#: (behavioural memories). In simulation the store is readable and writable by back door.
BACKING_STORE = {
    "controller": _STORE_IN_CONTROLLER,
    "system": f"{CONTROLLER_INSTANCE}.{_STORE_IN_CONTROLLER}",
    "cosim": f"{SYSTEM_INSTANCE}.{CONTROLLER_INSTANCE}.{_STORE_IN_CONTROLLER}",
    "cosim_tb": f"{TB_DUT_INSTANCE}.{SYSTEM_INSTANCE}.{CONTROLLER_INSTANCE}.{_STORE_IN_CONTROLLER}",
    "harness": "mem{g}.mem",
}


def backing_store(top: str, group: int = 0) -> str:
    """Dotted path of Group ``group``'s backing store in design ``top`` (see BACKING_STORE)."""
    if top not in BACKING_STORE:
        raise ValueError(f"Unknown design {top!r}; expected one of {sorted(BACKING_STORE)}")
    return BACKING_STORE[top].format(g=group)


# -- top-level ports ----------------------------------------------------------------------------

#: The paths with a requester port per Group at the top (the converter's ports are internal).
TOP_PATHS = ("host", "compute")
#: A requester port's streams (see ``mncore_hdl.memctrl.port``).
REQ, WDATA, RDATA = "req", "wdata", "rdata"
#: Each stream, and whether the requester (the top's user) drives it.
STREAMS = {REQ: True, WDATA: True, RDATA: False}
#: A stream's signals (``lib.stream``): ``valid`` and ``payload`` go with the stream, ``ready``
#: back.
VALID, READY, PAYLOAD = "valid", "ready", "payload"
MC_IDLE = "mc_idle"
MC_ERROR = "mc_error"
CYCLE = "cycle"
#: Each controller's DRAM-command observation port (``memctrl/controller.py``; ``cmd_kind`` is
#: a ``memctrl.Cmd``, ``cmd_port`` a ``memctrl.PORTS`` index): what the waves show per Group.
OBSERVATION = ("cmd_valid", "cmd_kind", "cmd_bank", "cmd_row", "cmd_port", "cmd_len")
#: The input-descriptor table's port names.
DESC_INDEX, DESC_WDATA, DESC_WE, DESC_RDATA = "desc_index", "desc_wdata", "desc_we", "desc_rdata"
#: The input-descriptor table's ports: name -> (direction, width).
DESC_PORTS = {DESC_INDEX: ("in", SLOT_BITS), DESC_WDATA: ("in", DESCRIPTOR_BITS),
              DESC_WE: ("in", 1), DESC_RDATA: ("out", DESCRIPTOR_BITS)}


def requester_prefix(path: str, group: int) -> str:
    """Name prefix of path ``path``'s port into Group ``group`` (``host__0__``)."""
    if path not in TOP_PATHS:
        raise ValueError(f"Port path must be one of {TOP_PATHS}, not {path!r}")
    return f"{path}__{group}__"


def stream_member(stream: str, signal: str) -> str:
    """Name of a stream's signal below a port's prefix (``req__valid``)."""
    if stream not in STREAMS or signal not in (VALID, READY, PAYLOAD):
        raise ValueError(f"Stream signal must be one of {sorted(STREAMS)} x "
                         f"{[VALID, READY, PAYLOAD]}, not {(stream, signal)!r}")
    return f"{stream}__{signal}"


def stream_port(path: str, group: int, stream: str, signal: str) -> str:
    """Top-level name of one stream signal of a requester port (``host__0__req__valid``)."""
    return requester_prefix(path, group) + stream_member(stream, signal)


def payload_fields(config: ArchConfig) -> dict[str, dict[str, int]]:
    """Each stream's payload fields and widths, least significant first (``req``: addr, write,
    length; ``wdata``: data, strb; ``rdata``: data, error): what the waves decode."""
    return {REQ: RequestFormat.of(config).fields, WDATA: wdata_fields(config),
            RDATA: rdata_fields(config)}


def field_port(path: str, group: int, stream: str, field: str) -> str:
    """Name of one decoded payload field of a requester port (``host__0__req__addr``)."""
    if stream not in STREAMS:
        raise ValueError(f"Stream must be one of {sorted(STREAMS)}, not {stream!r}")
    return f"{requester_prefix(path, group)}{stream}__{field}"


def csr_addr_port(group: int) -> str:
    """Input selecting the CSR Group ``group``'s controller shows on :func:`csr_rdata_port`."""
    return f"mc_csr_addr__{group}"


def csr_rdata_port(group: int) -> str:
    """Output showing Group ``group``'s controller register selected by :func:`csr_addr_port`."""
    return f"mc_csr_rdata__{group}"


def system_ports(config: ArchConfig) -> dict[str, tuple[str, int]]:
    """Every port of the memory-system top: Verilog name -> (``"in"``/``"out"``, width)."""
    payload = {stream: sum(fields.values())
               for stream, fields in payload_fields(config).items()}
    ports: dict[str, tuple[str, int]] = {}
    for path in TOP_PATHS:
        for g in range(config.groups):
            for stream, driven in STREAMS.items():
                into, back = ("in", "out") if driven else ("out", "in")
                ports[stream_port(path, g, stream, VALID)] = (into, 1)
                ports[stream_port(path, g, stream, READY)] = (back, 1)
                ports[stream_port(path, g, stream, PAYLOAD)] = (into, payload[stream])
    ports.update(CONTROL_PORTS)
    for g in range(config.groups):
        ports[csr_addr_port(g)] = ("in", CSR_ADDR_BITS)
        ports[csr_rdata_port(g)] = ("out", COUNTER_BITS)
    ports[MC_ERROR] = ("out", config.groups)
    ports[MC_IDLE] = ("out", config.groups)
    return ports


def cosim_ports(config: ArchConfig) -> dict[str, tuple[str, int]]:
    """Every port of the co-simulation top: the memory system's, the descriptors', ``cycle``."""
    return {**system_ports(config), **DESC_PORTS, CYCLE: ("out", CYCLE_BITS)}


def top_inputs(config: ArchConfig) -> list[str]:
    """The co-simulation top's inputs (besides clock and reset): what a server resets to 0."""
    return [name for name, (direction, _) in cosim_ports(config).items() if direction == "in"]
