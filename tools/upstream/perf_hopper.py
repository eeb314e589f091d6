#!/usr/bin/env python3
"""Times TLX's Hopper tutorial kernels (a copy prepared by run_upstream.py, run through warpweave)
beside cuBLAS (torch.matmul) and cuDNN SDPA, in one process, as medians of interleaved rounds.

    python3 tools/upstream/perf_hopper.py --tutorials SCRATCH/tlx-hopper/third_party/tlx/tutorials

Prints one table: each kernel's time, TFLOP/s and its ratio to the reference of the same shape.
The tutorial modules are loaded from their files; each GEMM runs its tutorial configuration
(the one its correctness test uses, or its autotuner), each attention its test configuration.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_util import kernel_ms, print_table, time_rounds  # noqa: E402

GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
ATTN_SHAPE = (4, 32, 4096, 128)  # Z, H, N_CTX, HEAD_DIM

# The configurations their correctness tests pass (None: the tutorial's own autotuning).
GEMM_TUTORIALS = {
    # Its autotuner holds one configuration (8 warps); the test's config= path launches 4 warps.
    "hopper_gemm_pipelined": ("matmul", None),
    "hopper_gemm_ws": ("matmul", {"BM": 128, "BN": 256, "BK": 64, "GROUP_SIZE_M": 8,
                                  "NUM_STAGES": 3, "NUM_MMA_WARPS": 8, "NUM_MMA_GROUPS": 2,
                                  "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1}),
    # The same configuration with warp barriers for the empty rings (its warp-barrier test).
    "hopper_gemm_ws:warp_barrier": ("matmul", {"BM": 128, "BN": 256, "BK": 64, "GROUP_SIZE_M": 8,
                                               "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
                                               "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False,
                                               "USE_WARP_BARRIER": True, "NUM_CTAS": 1}),
    # The test configuration in 2-CTA clusters (one of its autotune configurations): B's column
    # halves multicast to both CTAs, each stage released to the peer's producer too.
    "hopper_gemm_ws:2cta": ("matmul", {"BM": 128, "BN": 256, "BK": 64, "GROUP_SIZE_M": 8,
                                       "NUM_STAGES": 3, "NUM_MMA_WARPS": 8, "NUM_MMA_GROUPS": 2,
                                       "EPILOGUE_SUBTILE": False, "NUM_CTAS": 2,
                                       "ctas_per_cga": (2, 1, 1)}),
    "hopper-persistent-gemm-ws-cooperative": ("matmul_tlx_ws_persistent", None),
    "hopper-persistent-gemm-ws-pingpong": ("matmul_tlx_ws_persistent", None),
    # The tutorial's own benchmark (testing/test_hopper_gemm_perf.py) calls matmul(a, b): its
    # autotuner picks among its configurations.
    "hopper_gemm_ws:autotuned": ("matmul", None),
}
ATTN_TUTORIALS = {
    "hopper_fa_ws": {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_BUFFERS": 2, "NUM_MMA_WARPS": 8,
                     "NUM_MMA_GROUPS": 2},
    "hopper_fa_ws_pipelined": {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_BUFFERS": 2,
                               "NUM_MMA_WARPS": 8, "NUM_MMA_GROUPS": 2},
    "hopper_fa_ws_pipelined_pingpong": {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_BUFFERS": 2,
                                        "NUM_MMA_WARPS": 8, "NUM_MMA_GROUPS": 2},
    "hopper_fa_ws_pipelined_pingpong_persistent": {"BLOCK_M": 128, "BLOCK_N": 128,
                                                   "NUM_BUFFERS_Q": 1, "NUM_BUFFERS_KV": 2,
                                                   "NUM_MMA_WARPS": 8, "NUM_MMA_GROUPS": 2},
}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tutorials", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--only", default="", help="comma-separated tutorial names")
    ap.add_argument("--profile-once", action="store_true",
                    help="for a profiler (ncu --profile-from-start off): warm each kernel up, "
                         "then run it once at the first shape between cudaProfilerStart / Stop; "
                         "no timing, no references")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, str(args.tutorials))
    only = set(filter(None, args.only.split(",")))

    class Rows(list):
        # Each row is printed as it is measured: a run cut short by its time limit keeps them.
        def append(self, row):
            print("row: | " + " | ".join(row) + " |", flush=True)
            super().append(row)
    rows = Rows()

    def profile_once(call):
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        call()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()

    # The autotuned runs (dozens of configurations compiled and timed per shape) go last.
    gemms = sorted(GEMM_TUTORIALS.items(), key=lambda item: item[1][1] is None)
    for name, (fn_name, config) in gemms:
        if only and name not in only:
            continue
        try:
            mod = load(args.tutorials / f"{name.split(':')[0]}.py")
            fn = getattr(mod, fn_name)
        except Exception as e:  # noqa: BLE001 - reported in the table
            rows.append((name, "-", "load failed", f"{type(e).__name__}: {e}"[:90]))
            continue
        for (M, N, K) in GEMM_SHAPES:
            a = torch.randn((M, K), device="cuda", dtype=torch.float16) / 8
            b = torch.randn((K, N), device="cuda", dtype=torch.float16) / 8
            call = (lambda: fn(a, b, config=config)) if config is not None else (lambda: fn(a, b))
            if args.profile_once:
                profile_once(call)
                break
            try:
                out = call()
                ref = torch.matmul(a, b)
                err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
                # 20 calls a round: the host time of a round's first call (before its kernel is
                # queued) stays a small part of the round.
                ms_ref, ms = time_rounds([lambda: torch.matmul(a, b), call], args.rounds, 20)
                tf = 2 * M * N * K / ms / 1e9
                (_, k_ref), (k_all, k_ww) = kernel_ms(lambda: torch.matmul(a, b)), kernel_ms(call)
                rows.append((name, f"{M}x{N}x{K}", f"{ms:.3f} ms {tf:.0f} TF/s",
                             f"{ms_ref / ms:.2f}x cuBLAS (rel err {err:.1e})",
                             f"{k_ww:.3f} / {k_ref:.3f} ms: {k_ref / k_ww:.2f}x"
                             + (f" (all kernels of the call {k_all:.3f} ms)"
                                if k_all > 1.01 * k_ww else "")))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                rows.append((name, f"{M}x{N}x{K}", "failed", f"{type(e).__name__}: {e}"[:90]))

    Z, H, S, D = ATTN_SHAPE
    for name, config in ATTN_TUTORIALS.items():
        if only and name not in only:
            continue
        try:
            mod = load(args.tutorials / f"{name}.py")
        except Exception as e:  # noqa: BLE001
            rows.append((name, "-", "load failed", f"{type(e).__name__}: {e}"[:90]))
            continue
        q, k, v = (torch.randn((Z, H, S, D), device="cuda", dtype=torch.float16) for _ in range(3))
        sm_scale = 1.0 / D ** 0.5
        call = lambda: mod.attention(q, k, v, sm_scale, config=config)  # noqa: E731

        def sdpa():
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, scale=sm_scale)
        if args.profile_once:
            profile_once(call)
            continue
        try:
            out = call()
            ref = sdpa()
            err = (out.float() - ref.float()).abs().max().item()
            ms_ref, ms = time_rounds([sdpa, call], args.rounds, 3)
            tf = 4 * Z * H * S * S * D / ms / 1e9
            (_, k_ref), (_, k_ww) = kernel_ms(sdpa), kernel_ms(call)
            rows.append((name, f"{Z}x{H}x{S}x{D}", f"{ms:.3f} ms {tf:.0f} TF/s",
                         f"{ms_ref / ms:.2f}x cuDNN (max err {err:.1e})",
                         f"{k_ww:.3f} / {k_ref:.3f} ms: {k_ref / k_ww:.2f}x"))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append((name, f"{Z}x{H}x{S}x{D}", "failed", f"{type(e).__name__}: {e}"[:90]))

    print_table(("tutorial", "shape", "warpweave", "vs reference (wall)",
                 "main kernel, ours / ref"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
