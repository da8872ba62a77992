// Replays per-port native command streams into LiteDRAM's crossbar (Verilated) and prints
// the cycles from the first command offered to the last data beat, and the beats moved. Built and run by
// bench/litedram_verilator.py; the stream file holds, per port, a count then "addr we" lines.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "Vlitedram_top.h"
#include "ports.h"  // generated: NPORTS and the per-port pin accessors
#include "verilated.h"

struct Port {
    std::vector<unsigned> addr;
    std::vector<int> we;
    size_t next = 0;
    long reads = 0, writes = 0;
};

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s STREAM_FILE MAX_CYCLES\n", argv[0]);
        return 2;
    }
    std::FILE *f = std::fopen(argv[1], "r");
    if (!f) { std::perror(argv[1]); return 2; }
    long max_cycles = std::atol(argv[2]);
    int nports = 0;
    if (std::fscanf(f, "%d", &nports) != 1 || nports < 1 || nports > NPORTS) {
        std::fprintf(stderr, "stream file: expected 1 to %d ports\n", NPORTS);
        return 2;
    }
    std::vector<Port> ports(NPORTS);
    for (int i = 0; i < nports; i++) {
        long n = 0;
        if (std::fscanf(f, "%ld", &n) != 1) { std::fprintf(stderr, "bad count\n"); return 2; }
        for (long k = 0; k < n; k++) {
            unsigned a; int w;
            if (std::fscanf(f, "%u %d", &a, &w) != 2) { std::fprintf(stderr, "bad line\n"); return 2; }
            ports[i].addr.push_back(a);
            ports[i].we.push_back(w);
            (w ? ports[i].writes : ports[i].reads)++;
        }
    }
    std::fclose(f);

    Vlitedram_top *top = new Vlitedram_top;
    top->sys_rst = 1;
    for (int c = 0; c < 4; c++) { top->sys_clk = 0; top->eval(); top->sys_clk = 1; top->eval(); }
    top->sys_rst = 0;

    long cycles = 0, beats = 0;
    for (;;) {
        bool busy = false;
        for (int i = 0; i < NPORTS; i++) {
            Port &p = ports[i];
            bool v = p.next < p.addr.size();
            SET_CMD(i, v, v ? p.addr[p.next] : 0, v ? p.we[p.next] : 0);
        }
        top->sys_clk = 0;
        top->eval();
        for (int i = 0; i < NPORTS; i++) {
            Port &p = ports[i];
            bool v = p.next < p.addr.size();
            if (v && GET_CMD_READY(i)) p.next++;
            if (GET_RDATA_VALID(i)) { p.reads--; beats++; }
            if (GET_WDATA_READY(i)) { p.writes--; beats++; }
            busy |= p.next < p.addr.size() || p.reads > 0 || p.writes > 0;
        }
        top->sys_clk = 1;
        top->eval();
        cycles++;
        if (!busy) break;
        if (cycles >= max_cycles) {
            std::fprintf(stderr, "no end after %ld cycles\n", cycles);
            return 1;
        }
    }
    for (int i = 0; i < nports; i++) {
        if (ports[i].reads || ports[i].writes) {
            std::fprintf(stderr, "port %d: %ld reads, %ld writes left over\n", i,
                         ports[i].reads, ports[i].writes);
            return 1;
        }
    }
    std::printf("cycles %ld beats %ld\n", cycles, beats);
    delete top;
    return 0;
}
