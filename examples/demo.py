"""What warpweave is for, in one run (`bash scripts/demo`).

1. Compiles the library's warp-specialized kernels (the persistent TLX GEMM and flash-attention
   forward) for Hopper (sm_90a: wgmma) and Blackwell (sm_100a: tcgen05 into tensor memory) and
   prints what each uses: warps, the register budget of each warp group, shared memory, spills,
   and the compile time. (The Blackwell kernels have never run on a Blackwell GPU.)
2. Runs them: on a GPU machine on the GPU, elsewhere in the CPU interpreter (NumPy), where every
   barrier wait, arrival and shared-memory access is checked; results against NumPy.
3. Runs a small producer / consumer ring with a planted bug (the consumer never flips its barrier
   phase) in the interpreter, which reports it at its line before any GPU could hang on it.
4. On a GPU machine: times the GEMM beside cuBLAS and the attention beside cuDNN in one table.
"""

from __future__ import annotations

import re
import sys
import time

import numpy as np

import warpweave as ww
import warpweave.language as tl
import warpweave.ops as ops
from warpweave import tlx
from warpweave.backends.compiler import GPUTarget
from warpweave.compiler import ASTSource
from warpweave.ops.kernels.blackwell import attention_ws as bw_attention_ws
from warpweave.ops.kernels.blackwell import gemm_ws as bw_gemm_ws
from warpweave.ops.kernels.hopper import attention_ws, gemm_ws


def have_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths))  # noqa: E731
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


# ------------------------------------------------------------------------------------------------
# 1. Compile
# ------------------------------------------------------------------------------------------------

GEMM = (gemm_ws.gemm_ws_kernel, "persistent GEMM, 128x256x64 tiles, 4 TMA stages",
        {"a_desc": "desc<fp16,64x64>", "b_desc": "desc<fp16,64x256>", "c_desc": "desc<fp16,64x64>",
         "M": "i32", "N": "i32", "K": "i32"},
        {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 16, "NUM_STAGES": 4,
         "NUM_SMS": 132, "SMEM_EPILOGUE": True, "EPI_SUBTILE": 4})
ATTENTION = (attention_ws.attention_ws_kernel, "flash attention forward, D=128, ping-pong",
             {"q_desc": "desc<fp16,64x128>", "k_desc": "desc<fp16,128x128>",
              "v_desc": "desc<fp16,128x128>", "o_desc": "desc<fp16,64x128>", "lse_ptr": "*fp32",
              "sm_scale": "fp32", "N_CTX": "i32"},
             {"HEAD_DIM": 128, "BLOCK_M": 64, "BLOCK_N": 128, "NUM_STAGES": 2, "CAUSAL": False})
BW_GEMM = (bw_gemm_ws.gemm_ws_kernel, "TMEM accumulators, CLC-scheduled, 128x256x64, 4 stages",
           {"a_desc": "desc<fp16,128x64>", "b_desc": "desc<fp16,64x256>",
            "c_desc": "desc<fp16,128x64>", "M": "i32", "N": "i32", "K": "i32"},
           {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "NUM_STAGES": 4,
            "NUM_ACC": 2, "EPI_SUBTILE": 4, "USE_CLC": True, "PAIR": False})
BW_ATTENTION = (bw_attention_ws.attention_ws_kernel, "flash attention forward, D=128, P in TMEM",
                {"q_desc": "desc<fp16,128x128>", "k_desc": "desc<fp16,128x128>",
                 "v_desc": "desc<fp16,128x128>", "o_desc": "desc<fp16,128x128>",
                 "lse_ptr": "*fp32", "sm_scale": "fp32", "N_CTX": "i32"},
                {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 128, "NUM_STAGES": 2,
                 "CAUSAL": False})


def budgets(ptx: str) -> str:
    """The registers each warp group runs with: setmaxnreg's values, in task order."""
    found = re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)
    return " / ".join(found) if found else "-"


def ptx_compile_ms(src, target) -> float:
    """warpweave's own share of a compile: source to PTX (the best of 3, the disk cache unused)."""
    from warpweave._native_loader import native

    env = src.fn.environment()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        native().compile(files=env.files, kernel=src.name, signature=src.signature_text(),
                         globals=env.globals, target=target, num_warps=4, num_stages=3,
                         num_ctas=1, names=env.names, stage="ptx")
        best = min(best, (time.perf_counter() - start) * 1e3)
    return best


def compile_section():
    print("== 1. Compile the warp-specialized TLX kernels of warpweave.ops for Hopper and "
          "Blackwell\n")
    rows = []
    for arch, (fn, what, sig, consts) in (("sm_90a", GEMM), ("sm_90a", ATTENTION),
                                          ("sm_100a", BW_GEMM), ("sm_100a", BW_ATTENTION)):
        src = ASTSource(fn, signature={**sig, **{k: "constexpr" for k in consts}},
                        constexprs=consts)
        start = time.perf_counter()
        k = ww.compile(src, target=GPUTarget("cuda", int(arch[3:-1]), 32),
                       options={"num_warps": 4})
        total = (time.perf_counter() - start) * 1e3
        ptx_ms = ptx_compile_ms(src, arch)
        ptxas = f"{total - ptx_ms:.0f} ms" if "cubin" in k.asm else "(not installed)"
        rows.append([arch, f"{fn.__name__} ({what})", k.kernel.num_warps, budgets(k.asm["ptx"]),
                     f"{k.shared / 1024:.0f} KiB", f"{k.n_spills} B", f"{ptx_ms:.0f} ms",
                     ptxas])
    table(["target", "kernel", "warps", "registers per warp group", "shared", "spills",
           "warpweave to PTX", "ptxas"], rows)
    print()


# ------------------------------------------------------------------------------------------------
# 2. Run
# ------------------------------------------------------------------------------------------------

def attention_ref(q, k, v, sm_scale):
    s = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) * sm_scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


def run_section(gpu: bool):
    where = "on the GPU" if gpu else "in the CPU interpreter, synchronization checks on"
    print(f"== 2. Run {where}\n")
    rng = np.random.default_rng(0)
    M, N, K = (1024, 1024, 512) if gpu else (256, 512, 256)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    Z, H, S, D = (2, 4, 1024, 128) if gpu else (1, 2, 256, 128)
    q, k, v = (rng.standard_normal((Z, H, S, D)).astype(np.float16) for _ in range(3))
    if gpu:
        import torch

        dev = lambda x: torch.from_numpy(x).cuda()  # noqa: E731
        back = lambda x: x.cpu().numpy()  # noqa: E731
    else:
        dev = back = lambda x: x  # noqa: E731
    rows = []
    start = time.perf_counter()
    c = back(ops.matmul_tlx(dev(a), dev(b), "ws"))
    err = np.abs(c.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64)).max()
    rows.append([f"GEMM {M}x{N}x{K} fp16", f"{err:.3g}", f"{time.perf_counter() - start:.2f} s"])
    start = time.perf_counter()
    o = back(ops.attention_tlx(dev(q), dev(k), dev(v), sm_scale=D ** -0.5))
    err = np.abs(o.astype(np.float64) - attention_ref(q, k, v, D ** -0.5)).max()
    rows.append([f"attention Z{Z} H{H} S{S} D{D} fp16", f"{err:.3g}",
                 f"{time.perf_counter() - start:.2f} s"])
    table(["case", "max |error| vs NumPy (float64)", "wall (first call, compile included)"], rows)
    print()


# ------------------------------------------------------------------------------------------------
# 3. A planted barrier bug
# ------------------------------------------------------------------------------------------------

@ww.jit
def ring_copy(x_ptr, out_ptr, N_TILES: tl.constexpr, TILE: tl.constexpr,
              FLIP_PHASE: tl.constexpr):
    """out = 2 * x through a two-slot shared-memory ring: a producer task fills slot i % 2 and
    arrives on full[i % 2]; a consumer waits on it, reads the slot and frees it on empty[i % 2].
    Each trip around the ring is a new barrier phase, so the waits alternate parity."""
    bufs = tlx.local_alloc((TILE, ), tlx.dtype_of(x_ptr), 2)
    full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                slot = i % 2
                tlx.barrier_wait(tlx.local_view(empty, slot), ((i // 2) & 1) ^ 1)
                x = tl.load(x_ptr + i * TILE + tl.arange(0, TILE))
                tlx.local_store(tlx.local_view(bufs, slot), x)
                tlx.barrier_arrive(tlx.local_view(full, slot))
        with tlx.async_task(num_warps=4):
            for i in range(N_TILES):
                slot = i % 2
                if FLIP_PHASE:
                    phase = (i // 2) & 1
                else:
                    phase = 0  # the bug: the third tile waits for a phase that is long done
                tlx.barrier_wait(tlx.local_view(full, slot), phase)
                y = tlx.local_load(tlx.local_view(bufs, slot)) * 2
                tl.store(out_ptr + i * TILE + tl.arange(0, TILE), y)
                tlx.barrier_arrive(tlx.local_view(empty, slot))


def bug_section():
    print("== 3. A planted barrier bug, run in the interpreter\n")
    x = np.arange(4 * 256, dtype=np.float32)
    out = np.zeros_like(x)
    ring_copy[(1, )](x, out, N_TILES=4, TILE=256, FLIP_PHASE=True)
    print(f"correct ring (phase flips every trip): out == 2 * x is {bool((out == 2 * x).all())}")
    try:
        ring_copy[(1, )](x, np.zeros_like(x), N_TILES=4, TILE=256, FLIP_PHASE=False)
        print("planted bug: NOT caught")
        return False
    except ww.InterpreterError as e:
        first = str(e).splitlines()
        print("planted bug (the consumer's phase never flips), reported as:")
        for line in first[:6]:
            print("    " + line)
    print()
    return True


# ------------------------------------------------------------------------------------------------
# 4. Timing beside cuBLAS / cuDNN (GPU only)
# ------------------------------------------------------------------------------------------------

def timing_section():
    import torch
    import torch.nn.functional as F

    print("== 4. Timing on the GPU beside the vendor libraries (median of 20 calls)\n")
    rows = []
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        ours = ww.testing.do_bench(lambda: ops.matmul_tlx(a, b, "ws"), rep=100)
        ref = ww.testing.do_bench(lambda: torch.matmul(a, b), rep=100)
        tflops = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
        rows.append([f"GEMM {n}^3 fp16", f"{tflops(ours):.0f}", f"cuBLAS {tflops(ref):.0f}",
                     f"{ref / ours:.2f}x"])
    Z, H, S, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(Z, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))

    def sdpa():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v)

    ours = ww.testing.do_bench(lambda: ops.attention_tlx(q, k, v), rep=100)
    ref = ww.testing.do_bench(sdpa, rep=100)
    tflops = lambda ms: 4 * Z * H * S * S * D / ms / 1e9  # noqa: E731
    rows.append([f"attention Z{Z} H{H} S{S} D{D}", f"{tflops(ours):.0f}",
                 f"cuDNN {tflops(ref):.0f}", f"{ref / ours:.2f}x"])
    table(["case", "warpweave TFLOP/s", "reference TFLOP/s", "speed vs reference"], rows)
    print()


def main() -> int:
    gpu = have_gpu()
    compile_section()
    run_section(gpu)
    caught = bug_section()
    if gpu:
        timing_section()
    else:
        print("== 4. Timing: skipped (no sm_90 GPU here; the runs above used the interpreter)")
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main())
