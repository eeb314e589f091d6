"""Compile-time benchmark (runs on any machine, no GPU needed): `import warpweave` in a fresh process,
then for each kernel of the library the time of front end + specializer + clean-up passes (Tile
IR), of the PTX codegen on top, and of ptxas on top (cubin), medians over repeated compiles.

    python bench/compile_bench.py [--repeat N] [--json PATH]
"""
import argparse
import importlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (file, kernel, signature, num_warps, codegen target or None where codegen is not there yet)
CASES = [
    ("examples/vector_add.py", "add_kernel",
     "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024", 4, "sm_90a"),
    ("python/warpweave/ops/kernels/softmax.py", "softmax_kernel",
     "out_ptr:*fp16:16,in_ptr:*fp16:16,in_row_stride:i32:16,out_row_stride:i32:16,n_rows:i32,"
     "n_cols:i32,BLOCK=4096", 8, "sm_90a"),
    ("python/warpweave/ops/kernels/matmul.py", "matmul_kernel",
     "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,stride_am:i32:16,"
     "stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1,"
     "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"\"", 8, "sm_90a"),
    ("python/warpweave/ops/kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
     "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
     "K:i32,BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=3,NUM_SMS=132", 4, None),
    # ops.attention_tlx's launch (64 rows per consumer warp group; BLOCK_M=128 does not fit in
    # registers: ptxas serializes its wgmmas and takes 7 s of CPU on it).
    ("python/warpweave/ops/kernels/hopper/attention_ws.py", "attention_ws_kernel",
     "q_desc:desc<fp16,64x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
     "o_desc:desc<fp16,64x128>,lse_ptr:*fp32:16,sm_scale:fp32,N_CTX:i32:16,HEAD_DIM=128,"
     "BLOCK_M=64,BLOCK_N=128,NUM_STAGES=2,CAUSAL=False", 4, None),
]


def synthetic_kernel(lines=200):
    """A 200-line kernel for the front-end budget (DESIGN: front end + specializer under 5 ms):
    loads, a runtime loop with carried values, helper calls and a long chain of tile arithmetic."""
    body = [
        "import warpweave as ww",
        "import warpweave.language as tl",
        "",
        "",
        "@ww.jit",
        "def mix(a, b, W: tl.constexpr):",
        "    return tl.where(a > b, a * W, b - a)",
        "",
        "",
        "@ww.jit",
        "def long_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < n",
        "    x = tl.load(x_ptr + offs, mask=mask, other=0.0)",
        "    y = tl.load(y_ptr + offs, mask=mask, other=0.0)",
        "    acc = tl.zeros([BLOCK], dtype=tl.float32)",
        "    for i in range(0, 4):",
        "        acc += x * y",
        "        x = tl.exp2(x * 0.5)",
    ]
    i = 0
    while len(body) < lines - 2:
        body.append(f"    t{i} = mix(acc, x + {i}.0, {i % 7 + 1}) + tl.sqrt(tl.abs(y) + {i + 1}.0)")
        body.append(f"    acc = tl.maximum(acc, t{i}) - tl.minimum(x, t{i}) * 0.25")
        i += 1
    body.append("    tl.store(out_ptr + offs, acc, mask=mask)")
    return "\n".join(body) + "\n"


def library_kernel(path, kernel):
    """The @ww.jit function `kernel` of the repository file `path` (imported as a module so that
    its relative imports resolve)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    module = importlib.import_module(".".join(Path(path).with_suffix("").parts))
    return getattr(module, kernel)


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()

    imports = []
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c",
                              "import time; t=time.perf_counter(); import warpweave; "
                              "print((time.perf_counter()-t)*1e3)"],
                             capture_output=True, text=True, check=True, cwd="/")
        imports.append(float(out.stdout))
    print(f"# import warpweave (fresh process, median of 5): {statistics.median(imports):.1f} ms")

    from warpweave._native_loader import native

    nat = native()
    rows = []
    synth = synthetic_kernel()
    req = dict(files=[("<synthetic 200-line kernel>", synth)], kernel="long_kernel",
               signature="x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024",
               globals={}, target="sm_90a", num_warps=4, num_stages=3, num_ctas=1)
    ms = median_ms(lambda: nat.compile(**req, stage="tile-ir"), args.repeat)
    print(f"# front end + specializer + clean-up passes, {synth.count(chr(10))}-line kernel: "
          f"{ms:.2f} ms (median of {args.repeat})")
    print(f"{'kernel':24} {'lines':>5} {'tile-ir ms':>10} {'+ptx ms':>8} {'+cubin ms':>9}")
    for path, kernel, sig, warps, target in CASES:
        env = library_kernel(path, kernel).environment()  # the files @ww.jit compiles with
        req = dict(files=env.files, kernel=kernel, signature=sig, globals=env.globals,
                   target=target or "sm_90a", num_warps=warps, num_stages=3, num_ctas=1,
                   names=env.names)
        row = {"kernel": kernel, "lines": env.files[0][1].count("\n")}
        row["tile_ir_ms"] = median_ms(lambda: nat.compile(**req, stage="tile-ir"), args.repeat)
        for stage, key in (("ptx", "ptx_ms"), ("cubin", "cubin_ms")):
            try:
                n = args.repeat if stage == "ptx" else max(3, args.repeat // 5)
                row[key] = median_ms(lambda: nat.compile(**req, stage=stage), n)
            except Exception as e:  # codegen may not lower every kernel yet: say so in the table
                row[key] = None
                row[key + "_error"] = str(e).splitlines()[0][:120]
        fmt = lambda v: f"{v:.2f}" if v is not None else "-"
        print(f"{kernel:24} {row['lines']:5d} {row['tile_ir_ms']:10.2f} {fmt(row['ptx_ms']):>8} "
              f"{fmt(row['cubin_ms']):>9}")
        rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps({"import_ms": imports, "kernels": rows}, indent=1))


if __name__ == "__main__":
    main()
