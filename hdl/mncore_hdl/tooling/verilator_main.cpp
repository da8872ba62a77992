// The Verilator simulation loop for cocotb, with the clock generated here in C++.
//
// cocotb's own loop for Verilator leaves the clock to a cocotb Clock, which costs a timer
// callback per edge. Here the loop toggles `clk` itself every +mncore_clock_half=N time units
// (0 or absent: no clock, cocotb drives it). The toggle happens where a timer-driven clock
// would toggle it, before the time step is evaluated, so a coroutine waiting for
// RisingEdge(clk) still sees the values the edge samples, exactly as with cocotb's Clock.
// Everything else is the VPI protocol cocotb expects: value-change callbacks until stable,
// ReadWrite and ReadOnly synchronisation, timed callbacks, end of simulation on $finish or
// when cocotb has nothing left to wait for.
//
// Options: --trace (dump waves), --trace-file FILE, +mncore_clock_half=N,
// +mncore_waves_gate=SIGNAL (a 1-bit signal visible to VPI, e.g. cosim_tb.waves_off: while it
// is 1 no time step is dumped, so a window of the run gives a small file),
// +verilator+coverage+file+PATH (a --coverage build: where its counts are written on exit).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "Vtop.h"
#include "verilated.h"
#include "verilated_vpi.h"
#if VM_COVERAGE
#include "verilated_cov.h"
#endif

#if VM_TRACE
#if VM_TRACE_FST
#include "verilated_fst_c.h"
using Trace = VerilatedFstC;
#else
#include "verilated_vcd_c.h"
using Trace = VerilatedVcdC;
#endif
static Trace* trace_file = nullptr;
#endif

extern "C" void vlog_startup_routines_bootstrap(void);

static uint64_t sim_time = 0;

#if VM_TRACE
// False while the gate signal (if any) is 1: the dump is paused.
static bool dumping(vpiHandle gate) {
    if (!gate) return true;
    s_vpi_value value;
    value.format = vpiIntVal;
    vpi_get_value(gate, &value);
    return value.value.integer == 0;
}
#endif

double sc_time_stamp() { return static_cast<double>(sim_time); }

// Run value-change callbacks until none fires (callbacks may change values).
static void settle() {
    while (VerilatedVpi::callValueCbs()) {
    }
}

// Evaluate the current time step to a fixed point, as IEEE 1800 scheduling regions.
static void evaluate(Vtop* top) {
    do {
        do {
            top->eval_step();
            VerilatedVpi::clearEvalNeeded();
            VerilatedVpi::doInertialPuts();
            settle();
        } while (VerilatedVpi::evalNeeded());
        VerilatedVpi::callCbs(cbReadWriteSynch);
        VerilatedVpi::doInertialPuts();
        settle();
    } while (VerilatedVpi::evalNeeded());
    top->eval_end_step();
    VerilatedVpi::callCbs(cbReadOnlySynch);
}

static void finish_up() {
    static bool done = false;
    if (done) return;
    done = true;
    VerilatedVpi::callCbs(cbEndOfSimulation);
#if VM_TRACE
    if (trace_file) trace_file->close();
#endif
#if VM_COVERAGE
    // A --coverage build: the counts go to +verilator+coverage+file+PATH (coverage.dat).
    Verilated::threadContextp()->coveragep()->write();
#endif
}

int main(int argc, char** argv) {
    bool trace_on = false;
    std::string trace_path = "dump.vcd";
    uint64_t half = 0;
    std::string gate_name;
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i];
        if (arg == "--trace") {
            trace_on = true;
        } else if (arg == "--trace-file" && i + 1 < argc) {
            trace_path = argv[++i];
        } else if (arg.rfind("+mncore_clock_half=", 0) == 0) {
            half = std::strtoull(arg.c_str() + std::strlen("+mncore_clock_half="), nullptr, 10);
        } else if (arg.rfind("+mncore_waves_gate=", 0) == 0) {
            gate_name = arg.substr(std::strlen("+mncore_waves_gate="));
        }
    }
    Verilated::commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(""));
    Verilated::fatalOnVpiError(false);
#if VM_TRACE
    if (trace_on) {
        Verilated::traceEverOn(true);
        trace_file = new Trace;
        top->trace(trace_file, 99);
        trace_file->open(trace_path.c_str());
    }
#else
    if (trace_on) {
        std::fprintf(stderr, "error: this model was built without --trace\n");
        return 2;
    }
#endif
    vlog_startup_routines_bootstrap();
    Verilated::addExitCb([](void*) { finish_up(); }, nullptr);
    VerilatedVpi::callCbs(cbStartOfSimulation);
    settle();
    vpiHandle gate = nullptr;
#if VM_TRACE
    if (trace_file && !gate_name.empty()) {
        gate = vpi_handle_by_name(const_cast<PLI_BYTE8*>(gate_name.c_str()), nullptr);
        if (!gate) std::fprintf(stderr, "warning: no signal %s to gate the dump\n",
                                gate_name.c_str());
    }
#endif
    (void)gate;

    const uint64_t never = ~0ULL;
    uint64_t next_edge = half ? half : never;
    top->clk = 0;
    while (!Verilated::gotFinish()) {
        evaluate(top.get());
#if VM_TRACE
        if (trace_file && dumping(gate)) trace_file->dump(sim_time);
#endif
        uint64_t next = VerilatedVpi::cbNextDeadline();
        if (top->eventsPending() && top->nextTimeSlot() < next) next = top->nextTimeSlot();
        if (next_edge < next) next = next_edge;
        if (next == never) break;  // nothing will ever happen again
        sim_time = next;
        VerilatedVpi::callCbs(cbNextSimTime);
        settle();
        if (sim_time == next_edge) {
            top->clk = !top->clk;
            next_edge += half;
        }
        VerilatedVpi::callTimedCbs();
        settle();
    }
    top->final();
    finish_up();
#if VM_TRACE
    delete trace_file;
    trace_file = nullptr;
#endif
    return Verilated::threadContextp()->errorCount() > 0 ? 1 : 0;
}
