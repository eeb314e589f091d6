#!/usr/bin/env bash
# One GPU-machine session in one command: GPU tests (scripts/gpu-test: build, C++ tests, CPU and GPU
# pytest), the demo, the C++ ahead-of-time example, SASS checks, the quick benchmark table and the
# host-overhead benchmark (with WW_FULL_MEMORY=1 also the memory-bound kernels at full sizes, per
# launch and as CUDA graphs; WW_GPU_TEST_MODE=pytest runs only the GPU tests after a package build;
# WW_SKIP_LAUNCH=1 leaves out the host-overhead benchmark). Logs go to $OUT (or out/gpu):
# gpu-test.log, session.log, bench.log, bench.json, launch.log, launch.json, memory*.log/json.
# Each step has a time limit so one hang cannot eat the session.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out/gpu}"
mkdir -p "$OUT"
work="$(mktemp -d)"
export PYTHONUNBUFFERED=1
log="$OUT/session.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }

SECONDS=0
# WW_PYTEST_ARGS (e.g. "-n 8" where pytest-xdist is installed) go to pytest.
if [ "${WW_GPU_TEST_MODE:-}" = pytest ]; then
  # Only the GPU tests (and the TLX SASS checks) after a package build: CI runs the CPU ones.
  say "== package build, GPU pytest"
  # The build scripts/demo's set-up makes too, so that the demo finds it up to date.
  (source scripts/lib/setup.sh && cd "$WW_ROOT" && ww_setup) > "$OUT/pip.log" 2>&1 \
    || say "package build failed (see pip.log)"
  # shellcheck disable=SC2086
  timeout "${WW_GPU_TEST_LIMIT:-300}" python3 -m pytest -q ${WW_PYTEST_ARGS:-} tests/gpu \
    tests/python/test_tlx_hopper_codegen.py > "$OUT/gpu-test.log" 2>&1
else
  say "== scripts/gpu-test"
  # shellcheck disable=SC2086
  timeout "${WW_GPU_TEST_LIMIT:-300}" bash scripts/gpu-test ${WW_PYTEST_ARGS:-} > "$OUT/gpu-test.log" 2>&1
fi
say "gpu-test exit code $? after ${SECONDS} s"
grep -E "tests passed|tests failed|^[0-9]+ (passed|failed)|passed|failed|error" "$OUT/gpu-test.log" | tail -n 8 | tee -a "$log"

say "== scripts/demo"
timeout 180 bash scripts/demo > "$work/demo.log" 2>&1
say "demo exit code $?"
tail -n 30 "$work/demo.log" | tee -a "$log"

say "== C++ ahead-of-time example (no Python)"
timeout 60 wwc examples/vector_add.py --kernel add_kernel --target sm_90a --emit cubin -o "$work/add.cubin" \
  --meta "$work/add.json" --signature "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024" \
  && timeout 60 build/py/aot_launch "$work/add.cubin" "$work/add.json" 1000003 2>&1 | tee -a "$log"

say "== SASS"
# x, y, out and n declared divisible by 16: 128-bit loads and stores expected.
wwc examples/vector_add.py --kernel add_kernel --target sm_90a --emit cubin -o "$work/add16.cubin" \
  --signature "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024"
cuobjdump --dump-sass "$work/add16.cubin" > "$work/add.sass" 2>&1
say "vector add (n:i32:16): $(grep -c 'LDG.E.128' "$work/add.sass") LDG.E.128, $(grep -c 'STG.E.128' "$work/add.sass") STG.E.128, $(grep -c -E 'LDL|STL' "$work/add.sass") local-memory ops"
# The tl.dot matmul at ops.matmul's sm_90a configuration: software-pipelined (cp.async + wgmma).
timeout 120 wwc python/warpweave/ops/kernels/matmul.py --kernel matmul_kernel --target sm_90a --num-warps 8 --num-stages 5 --emit cubin -o "$work/mm.cubin" \
  --meta "$work/mm.json" --signature "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,GROUP_M=8,ACTIVATION=\"\"" \
  && cuobjdump --dump-sass "$work/mm.cubin" > "$work/matmul.sass" 2>&1 \
  && say "tl.dot matmul: $(grep -c HGMMA "$work/matmul.sass") HGMMA, $(grep -c LDGSTS "$work/matmul.sass") LDGSTS, $(grep -c -E 'LDL|STL' "$work/matmul.sass") local-memory ops, $(python3 -c "import json; m=json.load(open('$work/mm.json')); print(m['registers'], 'registers,', m['spill_bytes'], 'B spilled')")"

if [ -n "${WW_FULL_MEMORY:-}" ]; then
  # The memory-bound kernels at the full sizes, timed per launch (Triton's do_bench convention,
  # host cost included where it exceeds the flush) and as CUDA-graph replays (the GPU's time).
  say "== memory-bound kernels, full sizes: per launch, then CUDA graphs"
  kinds="copy,add,softmax,layernorm_fwd,layernorm_bwd,embedding_bag,row_sum,row_max"
  SECONDS=0
  timeout "${WW_FULL_LIMIT:-200}" python3 bench/bench_kernels.py --only "$kinds" \
    --json "$OUT/memory.json" > "$OUT/memory.log" 2>&1
  say "memory (per launch) exit code $? after ${SECONDS} s"
  SECONDS=0
  timeout "${WW_FULL_LIMIT:-200}" python3 bench/bench_kernels.py --graph --only "$kinds" \
    --json "$OUT/memory_graph.json" > "$OUT/memory_graph.log" 2>&1
  say "memory (CUDA graphs) exit code $? after ${SECONDS} s"
fi

say "== benchmarks (quick)"
SECONDS=0
timeout "${WW_BENCH_LIMIT:-240}" python3 bench/bench_kernels.py --quick --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
say "bench exit code $? after ${SECONDS} s"
tail -n 70 "$OUT/bench.log"


if [ -z "${WW_SKIP_LAUNCH:-}" ]; then
  say "== host overheads (launch, import, compile, new process)"
  SECONDS=0
  timeout "${WW_LAUNCH_LIMIT:-120}" python3 bench/launch_bench.py --quick --runs 2 --json "$OUT/launch.json" > "$OUT/launch.log" 2>&1
  say "launch_bench exit code $? after ${SECONDS} s"
  tail -n 40 "$OUT/launch.log"
fi
rm -rf "$work"
