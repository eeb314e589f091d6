#!/usr/bin/env python3
"""Cold-compile times of Triton's tutorial kernels (03 matmul, 06 fused attention, 09 persistent
matmul) through warpweave and through the installed Triton, on this machine's CPU (no GPU needed).

    python3 tools/upstream/compile_times.py --tutorials UPSTREAM/python/tutorials [--repeat 3]

Each tutorial's @jit functions are taken out of its file (the rest of it launches kernels at
import) into a scratch module, once as written and once with `triton` read as `warpweave`. Each
kernel is compiled for sm_90a at the configuration perf_triton.py times: warpweave's stages in
process (front end to Tile IR, PTX codegen, ptxas to a cubin, medians of --repeat fresh
compiles), Triton's `triton.compile` once per repeat with its caches pointed at an empty folder.
ptxas is also timed alone on each compiler's PTX, the part of a cold compile that neither
compiler's own code decides.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (tutorial file stem, kernel, warpweave signature, Triton signature, constexprs, warps, stages)
F16 = "*fp16"


def _attn_fwd(d, stage):
    bn = 128 if d == 128 else 64
    ww_sig = (f"sm_scale:fp32,M:*fp32:16,Z:i32,H:i32,desc_q:desc<fp16,128x{d}>,"
              f"desc_k:desc<fp16,{bn}x{d}>,desc_v:desc<fp16,{bn}x{d}>,desc_o:desc<fp16,128x{d}>,"
              f"N_CTX:i32:16")
    q, kv = f"tensordesc<fp16[128,{d}]>", f"tensordesc<fp16[{bn},{d}]>"
    tri_sig = {"sm_scale": "fp32", "M": "*fp32", "Z": "i32", "H": "i32", "desc_q": q,
               "desc_k": kv, "desc_v": kv, "desc_o": q, "N_CTX": "i32"}
    consts = {"HEAD_DIM": d, "BLOCK_M": 128, "BLOCK_N": bn, "FP8_OUTPUT": False, "STAGE": stage,
              "warp_specialize": False, "IS_HOPPER": True}
    return ("06-fused-attention", "_attn_fwd", f"fwd D{d}{' causal' if stage == 3 else ''}",
            ww_sig, tri_sig, consts, 8, 3)


def _attn_bwd(d):
    ptrs = ["Q", "K", "V", "DO", "DQ", "DK", "DV"]
    ww_sig = ("Q:*fp16:16,K:*fp16:16,V:*fp16:16,sm_scale:fp32,DO:*fp16:16,DQ:*fp16:16,"
              "DK:*fp16:16,DV:*fp16:16,M:*fp32:16,D:*fp32:16,stride_z:i32:16,stride_h:i32:16,"
              "stride_tok:i32:16,H:i32,N_CTX:i32:16")
    tri_sig = {n: F16 for n in ptrs}
    tri_sig.update({"sm_scale": "fp32", "M": "*fp32", "D": "*fp32", "stride_z": "i32",
                    "stride_h": "i32", "stride_tok": "i32", "H": "i32", "N_CTX": "i32"})
    consts = {"stride_d": 1, "BLOCK_M1": 32, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 32,
              "BLK_SLICE_FACTOR": 2, "HEAD_DIM": d, "CAUSAL": True}
    return ("06-fused-attention", "_attn_bwd", f"bwd D{d} causal", ww_sig, tri_sig, consts, 4, 5)


def _pointer_gemm(stem, kernel, label, persistent):
    names = ["a_ptr", "b_ptr", "c_ptr"]
    ww_sig = ("a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,"
              "stride_am:i32:16,stride_bk:i32:16,stride_cm:i32:16")
    tri_sig = {n: F16 for n in names}
    tri_sig.update({n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")})
    ones = ("stride_ak", "stride_bn", "stride_cn")
    consts = {n: 1 for n in ones}
    consts.update({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8})
    if persistent:
        consts["NUM_SMS"] = 132
    if stem.startswith("03"):
        consts["ACTIVATION"] = ""
    return (stem, kernel, label, ww_sig, tri_sig, consts, 8, 3)


def _tma_gemm(kernel, label, persistent):
    ww_sig = ("a_desc:desc<fp16,128x64>,b_desc:desc<fp16,256x64>,c_desc:desc<fp16,128x256>,"
              "M:i32,N:i32,K:i32")
    tri_sig = {"a_desc": "tensordesc<fp16[128,64]>", "b_desc": "tensordesc<fp16[256,64]>",
               "c_desc": "tensordesc<fp16[128,256]>", "M": "i32", "N": "i32", "K": "i32"}
    consts = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8,
              "FP8_OUTPUT": False, "WARP_SPECIALIZE": False}
    if persistent:
        consts.update({"EPILOGUE_SUBTILE": False, "NUM_SMS": 132})
    return ("09-persistent-matmul", kernel, label, ww_sig, tri_sig, consts, 8, 3)


CASES = [
    _pointer_gemm("03-matrix-multiplication", "matmul_kernel", "03 matmul", False),
    _attn_fwd(64, 1), _attn_fwd(64, 3), _attn_fwd(128, 1), _attn_fwd(128, 3),
    _attn_bwd(64), _attn_bwd(128),
    _pointer_gemm("09-persistent-matmul", "matmul_kernel", "09 matmul", False),
    _pointer_gemm("09-persistent-matmul", "matmul_kernel_persistent", "09 persistent", True),
    _tma_gemm("matmul_kernel_tma", "09 tma", False),
    _tma_gemm("matmul_kernel_tma_persistent", "09 tma persistent", True),
]


def jit_functions_only(source: str) -> str:
    """The tutorial's imports of triton and its @triton.jit functions, with every decorator
    reduced to a plain @triton.jit (autotune and launch_metadata need the host code left out)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out = ["import triton", "import triton.language as tl", ""]
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        jitted = any("jit" in ast.unparse(d) for d in node.decorator_list)
        if not jitted:
            continue
        start = node.lineno  # the def line (decorators dropped)
        out.append("@triton.jit")
        out.extend(lines[start - 1:node.end_lineno])
        out.append("")
    return "\n".join(out) + "\n"


def prepare(tutorials: Path, work: Path):
    stems = sorted({c[0] for c in CASES})
    for stem in stems:
        body = jit_functions_only((tutorials / f"{stem}.py").read_text())
        name = "k" + stem[:2]
        (work / "tri").mkdir(exist_ok=True)
        (work / "ww").mkdir(exist_ok=True)
        (work / "tri" / f"tri_{name}.py").write_text(body)
        (work / "ww" / f"ww_{name}.py").write_text(body.replace("triton", "warpweave"))


def ptxas_ms(ptx: str, work: Path, repeat: int) -> float:
    src = work / "k.ptx"
    src.write_text(ptx)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(["ptxas", "-arch=sm_90a", "-O3", str(src), "-o", str(work / "k.cubin")],
                       check=True, capture_output=True)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def warpweave_times(work: Path, repeat: int):
    """{label: (tile-ir ms, +ptx ms, +cubin ms, ptx text)} for every case."""
    sys.path.insert(0, str(work / "ww"))
    from warpweave._native_loader import native

    nat = native()
    rows = {}
    for stem, kernel, label, ww_sig, _, consts, warps, stages in CASES:
        fn = getattr(importlib.import_module("ww_k" + stem[:2]), kernel)
        env = fn.environment()
        sig = ww_sig + "".join(f",{k}={v!r}" if isinstance(v, str) else f",{k}={v}"
                               for k, v in consts.items() if f"{k}:" not in ww_sig)
        req = dict(files=env.files, kernel=kernel, signature=sig, globals=env.globals,
                   target="sm_90a", num_warps=warps, num_stages=stages, num_ctas=1,
                   names=env.names)
        stage_ms = {}
        for stage in ("tile-ir", "ptx", "cubin"):
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                k = nat.compile(**req, stage=stage)
                ts.append((time.perf_counter() - t0) * 1e3)
            stage_ms[stage] = statistics.median(ts)
        rows[label] = (stage_ms["tile-ir"], stage_ms["ptx"], stage_ms["cubin"], k.ptx)
    sys.path.pop(0)
    return rows


def triton_times(work: Path, repeat: int):
    """{label: (triton.compile ms, ptx text)}, each compile with an empty cache folder."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        return {}
    sys.path.insert(0, str(work / "tri"))
    rows = {}
    for stem, kernel, label, ww_sig, tri_sig, consts, warps, stages in CASES:
        fn = getattr(importlib.import_module("tri_k" + stem[:2]), kernel)
        sig = dict(tri_sig, **{k: "constexpr" for k in consts})
        # The same 16-byte divisibility hints warpweave's signature gives (`name:TYPE:16`), as
        # Triton's launcher would find them on aligned tensors and sizes.
        aligned = {e.split(":")[0] for e in ww_sig.split(",") if e.endswith(":16")}
        attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
                 if name in aligned}
        ts = []
        for _ in range(repeat):
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(dir=work)
            t0 = time.perf_counter()
            k = triton.compile(ASTSource(fn, sig, consts, attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": warps, "num_stages": stages})
            ts.append((time.perf_counter() - t0) * 1e3)
        rows[label] = (statistics.median(ts), k.asm["ptx"])
    sys.path.pop(0)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tutorials", type=Path, required=True, help="Triton's python/tutorials")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare(args.tutorials, work)
        ours = warpweave_times(work, args.repeat)
        theirs = triton_times(work, args.repeat)
        print("| kernel (sm_90a) | warpweave to PTX ms | warpweave cold compile ms | ptxas alone "
              "on our PTX ms | Triton 3.x cold compile ms | ptxas alone on Triton's PTX ms |")
        print("|---|---|---|---|---|---|")
        for label, (_, ptx_ms, cubin_ms, ptx) in ours.items():
            ours_ptxas = ptxas_ms(ptx, work, args.repeat)
            tri = theirs.get(label)
            tri_cells = (f"{tri[0]:.0f} | {ptxas_ms(tri[1], work, args.repeat):.0f}" if tri
                         else "- | -")
            print(f"| {label} | {ptx_ms:.1f} | {cubin_ms:.0f} | {ours_ptxas:.0f} | {tri_cells} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
