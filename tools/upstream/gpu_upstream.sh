#!/usr/bin/env bash
# On a GPU machine: builds warpweave from this tree, then runs the upstream TLX suites through
# tools/upstream/run_upstream.py (their Hopper tutorial tests in both modes, TLX's unit tests)
# and times the Hopper tutorials beside cuBLAS / cuDNN. Usage:
#   UPSTREAM=DIR OUT=DIR bash tools/upstream/gpu_upstream.sh [steps...]
# Steps (default all but triton-perf): build hopper-replace hopper-run unit perf triton-perf. Each has a time limit so that
# one hang cannot eat the session; logs and JUnit XML go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${UPSTREAM:?set UPSTREAM to a checkout of the TLX repository}"
OUT="${OUT:-out/upstream}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
steps="${*:-build hopper-replace hopper-run unit perf}"
work="$(mktemp -d)"
SECONDS=0
say() { echo "[gpu_upstream ${SECONDS}s] $*"; }
# pytest-xdist workers when it is installed: a worker ended by a hung test is replaced.
xdist_args() { python3 -c "import xdist" 2>/dev/null && echo "-n $1"; }

# TLX's testing/test_correctness.py imports torchao at module level (for its Blackwell mxfp8
# case): without it the file does not load and six of the eight Hopper tutorials go untested.
# The lent GPU machine has no network: carry a torchao wheel and install it (--no-deps) first.
python3 -c "import torchao" 2>/dev/null ||
  say "warning: torchao is not importable; TLX's test_correctness.py will not load"

for step in $steps; do
  case "$step" in
    build)
      say "build"
      (source scripts/lib/setup.sh && cd "$WW_ROOT" && ww_apt_deps && ww_build_install) \
        > "$OUT/build.log" 2>&1 || { say "build failed"; tail -n 30 "$OUT/build.log"; exit 1; } ;;
    hopper-replace)
      say "TLX Hopper tutorials, word replacement"
      timeout -s KILL "${WW_HOPPER_LIMIT:-420}" python3 tools/upstream/run_upstream.py \
        --upstream "$UPSTREAM" --suite tlx-hopper --mode replace --work "$work/r" --out "$OUT" \
        --timeout "${WW_TEST_TIMEOUT:-150}" -- $(xdist_args 4) > "$OUT/hopper-replace.log" 2>&1
      say "exit $?"; grep -A80 "^\[upstream\] tlx-hopper" "$OUT/hopper-replace.log" | head -40 ;;
    hopper-run)
      say "TLX Hopper tutorials, python -m warpweave run"
      timeout -s KILL "${WW_HOPPER_LIMIT:-420}" python3 tools/upstream/run_upstream.py \
        --upstream "$UPSTREAM" --suite tlx-hopper --mode run --work "$work/m" --out "$OUT" \
        --timeout "${WW_TEST_TIMEOUT:-150}" -- $(xdist_args 4) > "$OUT/hopper-run.log" 2>&1
      say "exit $?"; grep -A80 "^\[upstream\] tlx-hopper" "$OUT/hopper-run.log" | head -40 ;;
    unit)
      say "TLX unit tests, word replacement"
      # shellcheck disable=SC2046
      CUDA_LAUNCH_BLOCKING=1 timeout -s KILL "${WW_UNIT_LIMIT:-480}" python3 tools/upstream/run_upstream.py \
        --upstream "$UPSTREAM" --suite tlx-unit --mode replace --work "$work/u" --out "$OUT" \
        --timeout 120 -- $(xdist_args 8) > "$OUT/unit.log" 2>&1
      say "exit $?"; grep -A70 "^\[upstream\] tlx-unit" "$OUT/unit.log" | head -70 ;;
    perf)
      say "Hopper tutorials beside cuBLAS / cuDNN"
      [ -d "$work/r" ] || python3 tools/upstream/run_upstream.py --upstream "$UPSTREAM" \
        --suite tlx-hopper --mode replace --work "$work/r" --out "$OUT" -k nothing_at_all \
        > /dev/null 2>&1
      timeout -s KILL "${WW_PERF_LIMIT:-420}" python3 tools/upstream/perf_hopper.py \
        --tutorials "$work/r/tlx-hopper/third_party/tlx/tutorials" ${WW_PERF_ARGS:-} > "$OUT/perf.log" 2>&1
      say "exit $?"; grep "^|" "$OUT/perf.log" ;;
    triton-perf)
      say "Triton's tutorials 03 / 09 / 06: warpweave beside the installed Triton"
      timeout -s KILL "${WW_TRITON_PERF_LIMIT:-540}" python3 tools/upstream/perf_triton.py \
        --tutorials "$UPSTREAM/python/tutorials" ${WW_TRITON_PERF_ARGS:-} > "$OUT/triton-perf.log" 2>&1
      say "exit $?"; grep "^|" "$OUT/triton-perf.log" ;;
    *) say "unknown step $step" ;;
  esac
done
say "done"
