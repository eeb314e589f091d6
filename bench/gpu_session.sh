#!/usr/bin/env bash
# One GPU-machine session in one command: GPU tests (scripts/gpu-test), the demo, the C++
# ahead-of-time example, SASS checks, and the quick benchmark table. Logs go to $OUT (or out/gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out/gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

echo "== scripts/gpu-test"
bash scripts/gpu-test > "$OUT/gpu-test.log" 2>&1
echo "gpu-test exit code $?"
grep -E "tests passed|tests failed|passed|failed|error" "$OUT/gpu-test.log" | tail -n 6

echo "== scripts/demo"
bash scripts/demo > "$OUT/demo.log" 2>&1
echo "demo exit code $?"
tail -n 8 "$OUT/demo.log"

echo "== C++ ahead-of-time example (no Python)"
aot="$OUT/aot"
mkdir -p "$aot"
wwc examples/vector_add.py --kernel add_kernel --target sm_90a --emit cubin -o "$aot/add.cubin" \
  --meta "$aot/add.json" --signature "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024"
build/py/aot_launch "$aot/add.cubin" "$aot/add.json" 1000003

echo "== SASS"
# The demo's cubin declares x, y, out and n divisible by 16: 128-bit loads and stores expected.
cuobjdump --dump-sass out/demo/add_kernel.sm_90a.cubin > "$OUT/add.sass" 2>&1
echo "vector add (n:i32:16): $(grep -c 'LDG.E.128' "$OUT/add.sass") LDG.E.128, $(grep -c 'STG.E.128' "$OUT/add.sass") STG.E.128, $(grep -c -E 'LDL|STL' "$OUT/add.sass") local-memory ops"
mm="$OUT/matmul"
mkdir -p "$mm"
wwc kernels/matmul.py --kernel matmul_kernel --target sm_90a --num-warps 8 --emit cubin -o "$mm/mm.cubin" \
  --meta "$mm/mm.json" --signature "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"\"" \
  && cuobjdump --dump-sass "$mm/mm.cubin" > "$OUT/matmul.sass" 2>&1 \
  && echo "matmul: $(grep -c HGMMA "$OUT/matmul.sass") HGMMA, $(grep -c -E 'LDL|STL' "$OUT/matmul.sass") local-memory ops, $(python3 -c "import json; m=json.load(open('$mm/mm.json')); print(m['registers'], 'registers,', m['spill_bytes'], 'B spilled')")"

echo "== benchmarks (quick)"
timeout 420 python3 bench/bench_kernels.py --quick --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench exit code $?"
cat "$OUT/bench.log" | tail -n 60
