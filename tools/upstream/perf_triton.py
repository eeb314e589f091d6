#!/usr/bin/env python3
"""Times Triton's own tutorials (03 matmul, 09 persistent matmul, 06 fused attention) through
warpweave and through the installed Triton, side by side in one process, with cuBLAS / cuDNN beside
them: the measurement of the compiler's own path (tl.dot, descriptors, warp_specialize loops).

    python3 tools/upstream/perf_triton.py --tutorials UPSTREAM/python/tutorials [--only 03,09,06]

The tutorial files are copied into a scratch folder twice: as they are (imported with Triton) and
with the word `triton` replaced by `warpweave`. Each case runs both copies' entry point on the same
tensors; the table gives wall times (medians of interleaved rounds) and the main kernel's GPU time,
as ratios to Triton and to the vendor library.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_util import kernel_ms, print_table, time_rounds  # noqa: E402

_WORD = re.compile(r"\btriton\b")
_BENCH_RUN = re.compile(r"^(\w+\.run\(.*\))\s*$", re.M)  # a top-level `benchmark.run(...)` line
FILES = {"03": "03-matrix-multiplication.py", "09": "09-persistent-matmul.py",
         "06": "06-fused-attention.py"}


def copy_tutorials(src: Path, work: Path) -> tuple[Path, Path]:
    tri, ww = work / "triton", work / "warpweave"
    for d in (tri, ww):
        d.mkdir(parents=True, exist_ok=True)
    for name in FILES.values():
        text = (src / name).read_text()
        # 03 runs its benchmark table at import, outside any `__main__` guard: imported here, it
        # would autotune and time every size of the table with both compilers first.
        text = _BENCH_RUN.sub(r"pass  # perf_triton.py: \1 left out", text)
        (tri / name).write_text(text)
        (ww / name).write_text(_WORD.sub("warpweave", text))
    return tri, ww


def load(path: Path, module_name: str):
    spec = importlib.util.spec_from_file_location(module_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    spec.loader.exec_module(mod)
    return mod


def ensure_triton_target_api():
    """The TLX repository's tutorials ask `get_current_target().is_cuda_backend()`, which Triton
    3.6's GPUTarget lacks: added here (backend == "cuda") so that the same files run on both."""
    try:
        from triton.backends.compiler import GPUTarget
    except ImportError:
        return
    if not hasattr(GPUTarget, "is_cuda_backend"):
        GPUTarget.is_cuda_backend = lambda self: self.backend == "cuda"


def gemm_cases(mods, shapes):
    """(label, shape text, flops, {provider: callable}) for 03 and 09."""
    import torch
    cases = []
    for (M, N, K) in shapes:
        a = torch.randn((M, K), device="cuda", dtype=torch.float16) / 8
        b = torch.randn((K, N), device="cuda", dtype=torch.float16) / 8
        bt = b.T.contiguous()  # 09's TMA variants take B as (N, K)
        shape, flops = f"{M}x{N}x{K}", 2 * M * N * K
        ref = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
        if "03" in mods:
            cases.append(("03 matmul", shape, flops, ref,
                          {p: (lambda m=m, a=a, b=b: m.matmul(a, b)) for p, m in mods["03"].items()}))
        if "09" in mods:
            variants = [("09 matmul", lambda m, a=a, b=b: m.matmul(a, b)),
                        ("09 persistent", lambda m, a=a, b=b: m.matmul_persistent(a, b))]
            for ws in (False, True):
                tag = " ws" if ws else ""
                variants += [
                    (f"09 tma{tag}", lambda m, a=a, bt=bt, ws=ws: m.matmul_tma(a, bt, ws)),
                    (f"09 tma persistent{tag}",
                     lambda m, a=a, bt=bt, ws=ws: m.matmul_tma_persistent(a, bt, ws)),
                    (f"09 descriptor persistent{tag}",
                     lambda m, a=a, bt=bt, ws=ws: m.matmul_descriptor_persistent(a, bt, ws)),
                ]
            for label, call in variants:
                cases.append((label, shape, flops, ref,
                              {p: (lambda m=m, call=call: call(m)) for p, m in mods["09"].items()}))
    return cases


def attention_cases(mods, Z, H, S, dims):
    import torch
    import torch.nn.functional as F
    cases = []
    if "06" not in mods:
        return cases
    for D in dims:
        q, k, v = (torch.randn((Z, H, S, D), device="cuda", dtype=torch.float16).requires_grad_()
                   for _ in range(3))
        do = torch.randn_like(q)
        scale = 1.0 / D ** 0.5
        for causal in (False, True):
            flops = 4 * Z * H * S * S * D * (0.5 if causal else 1.0)
            shape = f"Z{Z} H{H} S{S} D{D}{' causal' if causal else ''}"

            def sdpa(causal=causal, q=q, k=k, v=v, scale=scale):
                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

            def fwd(m, causal=causal, q=q, k=k, v=v, scale=scale):
                return m.attention(q, k, v, causal, scale, False)

            cases.append(("06 attention fwd", shape, flops, sdpa,
                          {p: (lambda m=m, fwd=fwd: fwd(m)) for p, m in mods["06"].items()}))
            # Backward: the forward once, then its backward timed alone (2.5x the forward's flops).
            outs = {}

            # The case's own tensors bound now: the calls run after every case is built.
            def bwd_of(run_fwd, key, outs=outs, q=q, k=k, v=v, do=do):
                def call():
                    if key not in outs:
                        outs[key] = run_fwd()
                    q.grad = k.grad = v.grad = None
                    outs[key].backward(do, retain_graph=True)
                return call
            cases.append(("06 attention bwd", shape, 2.5 * flops, bwd_of(sdpa, "ref"),
                          {p: bwd_of(lambda m=m, fwd=fwd: fwd(m), p) for p, m in mods["06"].items()}))
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tutorials", type=Path, required=True, help="Triton's python/tutorials")
    ap.add_argument("--only", default="03,09,06", help="tutorials to run (03, 09, 06)")
    ap.add_argument("--filter", default="", help="run only the cases whose label contains this")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    ap.add_argument("--attention", default="4x32x4096", help="Z x H x S for tutorial 06")
    ap.add_argument("--dims", default="64,128", help="head dims for tutorial 06")
    args = ap.parse_args()
    import torch

    work = Path(tempfile.mkdtemp(prefix="ww_perf_triton_"))
    tri_dir, ww_dir = copy_tutorials(args.tutorials, work)
    ensure_triton_target_api()
    mods: dict = {}
    rows = []
    for key in filter(None, args.only.split(",")):
        for provider, folder in (("triton", tri_dir), ("warpweave", ww_dir)):
            try:
                mod = load(folder / FILES[key], f"tut{key}_{provider}")
                mods.setdefault(key, {})[provider] = mod
            except Exception as e:  # noqa: BLE001 - reported in the table
                traceback.print_exc()
                rows.append((f"{key} (import)", "-", provider, "import failed",
                             f"{type(e).__name__}: {e}"[:100]))
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s]
    Z, H, S = (int(x) for x in args.attention.split("x"))
    cases = gemm_cases(mods, shapes) + attention_cases(
        mods, Z, H, S, [int(d) for d in args.dims.split(",") if d])
    for label, shape, flops, ref, impls in cases:
        if args.filter and args.filter not in label:
            continue
        names, fns = ["reference"], [ref]
        for provider, fn in impls.items():
            try:  # first call: compiles and autotunes; a failure is reported, not timed
                fn()
                torch.cuda.synchronize()
                names.append(provider)
                fns.append(fn)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                rows.append((label, shape, provider, "failed", f"{type(e).__name__}: {e}"[:100]))
        if len(fns) == 1:
            continue
        try:
            walls = time_rounds(fns, args.rounds, 10)
            kernels = [kernel_ms(f)[1] for f in fns]
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append((label, shape, "-", "timing failed", f"{type(e).__name__}: {e}"[:100]))
            continue
        t = dict(zip(names, zip(walls, kernels)))
        # The configurations each autotuner chose (Triton's and ours time their own compiles).
        for key, by_provider in mods.items():
            for provider, mod in by_provider.items():
                for name, obj in sorted(vars(mod).items()):
                    cfg = getattr(obj, "best_config", None)
                    if cfg is not None and label.startswith(key):
                        print(f"config: {label} {shape} {provider} {name}: {cfg}", flush=True)
        for provider in names[1:]:
            wall, kern = t[provider]
            vs = [f"{t['reference'][0] / wall:.2f}x ref"]
            if provider == "warpweave" and "triton" in t:
                vs.append(f"{t['triton'][0] / wall:.2f}x Triton "
                          f"(kernel {t['triton'][1] / kern:.2f}x)")
            rows.append((label, shape, provider, f"{wall:.3f} ms {flops / wall / 1e9:.0f} TF/s",
                         ", ".join(vs)))
            print("row: | " + " | ".join(rows[-1]) + " |", flush=True)  # kept if a limit ends the run
    shutil.rmtree(work, ignore_errors=True)
    print_table(("case", "shape", "compiler", "wall (median)", "vs reference / Triton"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
