"""The converter's register file, generated from the register table, and its programming checks."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arch import ArchConfig
from ..contracts.converter import (
    COUNTERS,
    CTRL_CLEAR,
    CTRL_START,
    ERROR_CODE_BITS,
    MAX_LOOPS,
    REG_BITS,
    REGISTER_BUS,
    STATUS_BUSY,
    STATUS_CODE_SHIFT,
    STATUS_DONE,
    STATUS_ERROR,
    STATUS_PORTS,
    ErrorCode,
    Reg,
    register_fields,
)
from ..contracts.counters import COUNTER_BITS
from ..memctrl.port import max_burst
from .config import config_layout, field_view

__all__ = ["RegisterFile"]


class RegisterFile(wiring.Component):
    """Register decode of the layout converter and the checks of what was programmed.

    Every programmable register of :func:`~mncore_hdl.contracts.converter.register_fields`
    is a field of ``cfg``; a write at a clock edge with ``reg_we`` stores ``reg_wdata`` into
    the field at ``reg_addr`` unless ``busy``. ``reg_rdata`` shows the register at ``reg_addr``
    combinationally: a field, STATUS (from the status inputs) or a counter. A write to CTRL
    raises ``start`` / ``clear`` for that cycle.

    The checks: a ``check`` strobe starts them; ``MAX_LOOPS`` cycles later (the buffer check
    multiplies the read extents in, one per cycle, saturating) ``checked`` rises for one
    cycle with ``code``, the first violated rule (:class:`ErrorCode`, 0 for none).

    Parameters
    ----------
    config : ArchConfig
        Geometry the ranges are checked against.
    buffer_lw : int
        The converter's on-chip buffer; one block's reads must fit in half of it.
    """

    def __init__(self, config: ArchConfig, buffer_lw: int):
        self.config = config
        self.buffer_lw = buffer_lw
        members = {name: In(bits) if direction == "in" else Out(bits)
                   for name, (direction, bits) in REGISTER_BUS.items()}
        members.update({name: In(bits) for name, bits in STATUS_PORTS.items()})
        members.update({name: In(COUNTER_BITS) for name in COUNTERS})
        members.update({
            "cfg": Out(config_layout(config)),
            "start": Out(1),
            "clear": Out(1),
            "check": In(1),
            "checked": Out(1),
            "code": Out(ERROR_CODE_BITS),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        self._decode(m)
        self._checks(m)
        return m

    # -- register decode ---------------------------------------------------------------------

    def _decode(self, m: Module) -> None:
        status = Signal(REG_BITS)
        m.d.comb += status.eq((self.busy << STATUS_BUSY) | (self.done << STATUS_DONE)
                              | (self.error << STATUS_ERROR)
                              | (self.error_code << STATUS_CODE_SHIFT))
        with m.Switch(self.reg_addr):
            for reg in register_fields():
                field = field_view(self.cfg, reg)
                with m.Case(reg.address):
                    m.d.comb += self.reg_rdata.eq(Value.cast(field)[:REG_BITS])
                    with m.If(self.reg_we & ~self.busy):
                        m.d.sync += field.eq(self.reg_wdata)
            with m.Case(Reg.STATUS):
                m.d.comb += self.reg_rdata.eq(status)
            for name, reg_addr in COUNTERS.items():
                with m.Case(reg_addr):
                    m.d.comb += self.reg_rdata.eq(getattr(self, name))
            with m.Case(Reg.CTRL):
                m.d.comb += [self.start.eq(self.reg_we & (self.reg_wdata & CTRL_START).any()),
                             self.clear.eq(self.reg_we & (self.reg_wdata & CTRL_CLEAR).any())]

    # -- programming checks ------------------------------------------------------------------

    def _checks(self, m: Module) -> None:
        config, cfg = self.config, self.cfg
        groups = config.groups
        window = config.sim_window_lw
        half = self.buffer_lw // 2
        product = Signal(64)
        step = Signal(range(MAX_LOOPS + 1))
        active = Signal()

        # a split program runs one engine per destination Group, each writing its own
        split = cfg.split.extent
        too_many = ((cfg.n_outer > MAX_LOOPS) | (cfg.n_read > MAX_LOOPS)
                    | (cfg.n_gather > MAX_LOOPS) | (cfg.burst == 0)
                    | (cfg.burst > max_burst(config)) | (split == 0) | (split > groups)
                    | ((split > 1) & (split != cfg.dst_groups)))
        for n, table in ((cfg.n_outer, cfg.outer), (cfg.n_read, cfg.read),
                         (cfg.n_gather, cfg.gather)):
            for k in range(len(table)):
                too_many = too_many | ((k < n) & (table[k].extent == 0))

        def bad_range(group, addr, ngroups, lwpg):
            return ((ngroups == 0) | (lwpg == 0) | (group + ngroups > groups)
                    | (addr + lwpg > window))

        overlap = ((cfg.src_group < cfg.dst_group + cfg.dst_groups)
                   & (cfg.dst_group < cfg.src_group + cfg.src_groups)
                   & (cfg.src_addr < cfg.dst_addr + cfg.dst_lwpg)
                   & (cfg.dst_addr < cfg.src_addr + cfg.src_lwpg))
        with m.If((cfg.elem_bits != 16) & (cfg.elem_bits != 32)):
            m.d.comb += self.code.eq(ErrorCode.ELEM_BITS)
        with m.Elif(too_many):
            m.d.comb += self.code.eq(ErrorCode.LOOPS)
        with m.Elif(bad_range(cfg.src_group, cfg.src_addr, cfg.src_groups, cfg.src_lwpg)):
            m.d.comb += self.code.eq(ErrorCode.SRC_RANGE)
        with m.Elif(bad_range(cfg.dst_group, cfg.dst_addr, cfg.dst_groups, cfg.dst_lwpg)):
            m.d.comb += self.code.eq(ErrorCode.DST_RANGE)
        with m.Elif(product > half):
            m.d.comb += self.code.eq(ErrorCode.BUFFER)
        with m.Elif(overlap):
            m.d.comb += self.code.eq(ErrorCode.OVERLAP)

        # The buffer check multiplies the read extents in, one per cycle, saturating.
        with m.If(self.check):
            m.d.sync += [product.eq(cfg.burst), step.eq(0), active.eq(1)]
        with m.Elif(active):
            extent = cfg.read[0].extent
            for k in range(1, MAX_LOOPS):
                extent = Mux(step == k, cfg.read[k].extent, extent)
            with m.If(step < cfg.n_read):
                m.d.sync += product.eq(Mux(product > half, product, product * extent))
            m.d.sync += step.eq(step + 1)
            with m.If(step == MAX_LOOPS):
                m.d.sync += active.eq(0)
        m.d.comb += self.checked.eq(active & (step == MAX_LOOPS))
