"""Times variants of the TLX attention kernel (python/warpweave/ops/kernels/hopper/attention_ws.py, or copies of it
named on the command line) beside cuDNN in one process, so that schedule changes are compared on
the same GPU, clocks and inputs. A benchmark: prints a table, never fails on a timing.

    python3 bench/bench_attention_variants.py --variant new=python/warpweave/ops/kernels/hopper/attention_ws.py \
        --variant old=/tmp/old_attention_ws.py:2 [--sass-dir DIR]

Each variant is FILE[:NUM_STAGES]; the file must define attention_ws_kernel with the signature
and grid of python/warpweave/ops/kernels/hopper/attention_ws.py. --sass-dir writes each variant's cubin, ptxas report
and SASS (cuobjdump) at D=128, causal and not. The H200's clock drifts within a run: use
--passes 2 or more and compare columns within a pass.
"""
import argparse
import importlib.util
import math
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 4096, 64, False),
          (4, 32, 4096, 64, True), (1, 16, 16384, 128, False), (1, 16, 16384, 128, True)]
BLOCK_M, BLOCK_N = 64, 128


def load_variant(spec):
    name, _, rest = spec.partition("=")
    path, _, stages = rest.partition(":")
    module_spec = importlib.util.spec_from_file_location(f"attn_variant_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return name, Path(path), module, int(stages or 2)


def launcher(ops, module, stages, q, k, v, scale, causal):
    """attention_tlx's host side with the variant's kernel and stage count."""
    import torch

    z, h, n_ctx, d = q.shape
    q2, k2, v2 = (t.reshape(-1, d) for t in (q, k, v))
    out = q.new_empty(q.shape)
    lse = q.new_empty((z * h, n_ctx), dtype=torch.float32)
    o2 = out.reshape(-1, d)
    descs = [_common._descriptor(t, [rows, d])
             for t, rows in ((q2, BLOCK_M), (k2, BLOCK_N), (v2, BLOCK_N), (o2, BLOCK_M))]
    grid = (n_ctx // (2 * BLOCK_M), z * h)

    def run():
        module.attention_ws_kernel[grid](*descs, lse, float(scale), n_ctx, HEAD_DIM=d,
                                         BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, NUM_STAGES=stages,
                                         CAUSAL=bool(causal), num_warps=4)
        return out
    return run


def dump_sass(variants, out_dir):
    native = importlib.import_module("warpweave._native_loader").native()
    out_dir.mkdir(parents=True, exist_ok=True)
    cuobjdump = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    for name, path, _, stages in variants:
        for causal in (0, 1):
            d = 128
            sig = (f"q_desc:desc<fp16,64x{d}>, k_desc:desc<fp16,128x{d}>, "
                   f"v_desc:desc<fp16,128x{d}>, o_desc:desc<fp16,64x{d}>, lse_ptr:*fp32:16, "
                   f"sm_scale:fp32, N_CTX:i32:16, HEAD_DIM={d}, BLOCK_M=64, BLOCK_N=128, "
                   f"NUM_STAGES={stages}, CAUSAL={causal}")
            k = native.compile([(str(path), path.read_text())], "attention_ws_kernel", sig, {},
                               target="sm_90a", num_warps=4, stage="cubin")
            stem = out_dir / f"{name}_c{causal}"
            stem.with_suffix(".cubin").write_bytes(k.cubin)
            info = (f"{name} causal={causal}: {k.registers} registers, {k.spill_bytes} spill "
                    f"bytes, {k.shared_bytes} B shared")
            print(info)
            sass = subprocess.run([cuobjdump, "--dump-sass", str(stem.with_suffix(".cubin"))],
                                  capture_output=True, text=True, timeout=120).stdout
            stem.with_suffix(".sass").write_text(info + "\n" + sass)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=FILE[:NUM_STAGES] (default: the library kernel, 2 stages)")
    parser.add_argument("--sass-dir", type=Path)
    parser.add_argument("--sass-variants", default="",
                        help="comma-separated variant names to disassemble (default: all)")
    parser.add_argument("--profile", action="store_true",
                        help="launch each variant once on the first shape, untimed (for ncu)")
    parser.add_argument("--rep", type=int, default=100)
    parser.add_argument("--shapes", default="",
                        help="comma-separated indices into the shape list (default: all)")
    parser.add_argument("--passes", type=int, default=1,
                        help="time each shape this often, rotating the order of the columns "
                             "each pass (clock drift then shows as spread, not as a bias)")
    args = parser.parse_args(argv)
    specs = args.variant or [f"lib={ROOT / 'python/warpweave/ops/kernels/hopper/attention_ws.py'}:2"]
    variants = [load_variant(s) for s in specs]
    if args.sass_dir:
        wanted = set(filter(None, args.sass_variants.split(",")))
        dump_sass([v for v in variants if not wanted or v[0] in wanted], args.sass_dir)

    import torch
    import warpweave as ww
    from warpweave import ops
    from warpweave.ops import _common

    from bench_kernels import rel_err, sdpa_fn

    sdpa = sdpa_fn(torch)
    names = ["cudnn"] + [v[0] for v in variants]
    print(f"{'case':34s}" + "".join(f"{n:>16s}" for n in names))
    if args.profile:
        z, h, n_ctx, d, causal = SHAPES[0]
        q, k, v = (torch.randn(z, h, n_ctx, d, device="cuda").half() for _ in range(3))
        for name, _, module, stages in variants:
            launcher(ops, module, stages, q, k, v, 1 / math.sqrt(d), causal)()
        torch.cuda.synchronize()
        return 0
    shapes = [SHAPES[int(i)] for i in args.shapes.split(",")] if args.shapes else SHAPES
    for z, h, n_ctx, d, causal in shapes:
        q, k, v = (torch.randn(z, h, n_ctx, d, device="cuda").half() for _ in range(3))
        scale = 1 / math.sqrt(d)
        flops = 4 * z * h * n_ctx * n_ctx * d * (0.5 if causal else 1.0)
        ref = sdpa(q, k, v, is_causal=causal, scale=scale)
        fns = {"cudnn": lambda: sdpa(q, k, v, is_causal=causal, scale=scale)}
        for name, _, module, stages in variants:
            fns[name] = launcher(ops, module, stages, q, k, v, scale, causal)
        label = f"Z{z} H{h} S{n_ctx} D{d}{' causal' if causal else ''}"
        for turn in range(args.passes):
            cells = {}
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                try:
                    err = rel_err(torch, fns[name](), ref)
                    ms = ww.testing.do_bench(fns[name], warmup=25, rep=args.rep,
                                             return_mode="median")
                except Exception as e:  # a variant that does not compile is reported
                    cells[name] = f"{type(e).__name__}"[:15]
                    print(f"  {name}: {e}", file=sys.stderr)
                    continue
                bad = "!" if err > 2e-3 else ""
                cells[name] = (flops / ms * 1e-9, bad)
            base = cells["cudnn"][0] if isinstance(cells.get("cudnn"), tuple) else None
            text = [c if isinstance(c, str) else
                    f"{c[0]:7.0f} {c[0] / base:4.2f}x{c[1]}" if base else f"{c[0]:7.0f}{c[1]}"
                    for c in (cells[n] for n in names)]
            print(f"{label:34s}" + "".join(f"{c:>16s}" for c in text), flush=True)
        del q, k, v, ref
    return 0


if __name__ == "__main__":
    sys.exit(main())
