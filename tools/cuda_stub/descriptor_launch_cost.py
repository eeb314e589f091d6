"""Host cost per kernel[grid](...) of a TensorDescriptor kernel through the stand-in driver:
layernorm_bwd_tma_kernel (3 descriptors, 6 pointers, 1 int) launched as ops.layernorm_bwd
launches it at 65536x1024 fp16, once with descriptors taking the general path (as before the
fast path served them) and once through the fast path; also the cost with new descriptor
objects per call (what the ops wrappers do) and with the same ones. Stand-in tensors replace
torch's, so absolute numbers are this machine's, not the H200 host's.

    PYTHONPATH=$(scripts/dev-pythonpath build-x) python3 tools/cuda_stub/descriptor_launch_cost.py
"""

import importlib
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cuda_stub  # noqa: E402

cuda_stub.use_stub_driver()

import warpweave as ww  # noqa: E402

jit = importlib.import_module("warpweave.jit")


cuda_stub.stand_in_torch(jit)
Tensor = cuda_stub.StandInTensor
F16, F32 = cuda_stub.StandInDType("float16"), cuda_stub.StandInDType("float32")

from warpweave.ops.kernels.hopper import layernorm_tma  # noqa: E402

kernel = layernorm_tma.layernorm_bwd_tma_kernel
ROWS, COLS, TILE_R, TILE_C, PROGRAMS = 65536, 1024, 16, 64, 264
x, dy, dx = (Tensor(0x7F0000000000 + i * (1 << 32), F16) for i in range(3))
dw, db, w, mean, rstd = (Tensor(0x7F1000000000 + i * (1 << 24), F32) for i in range(5))
meta = dict(TILE_R=TILE_R, TILE_C=TILE_C, NUM_STAGES=2, num_warps=4)


def row_descriptor(t):
    return ww.TensorDescriptor(t, [ROWS * TILE_R, TILE_C], [TILE_C, 1], [TILE_R, TILE_C])


def launch_new():
    kernel[(PROGRAMS,)](row_descriptor(x), row_descriptor(dy), row_descriptor(dx), dx, dw, db, w,
                        mean, rstd, ROWS, **meta)


same = [row_descriptor(t) for t in (x, dy, dx)]


def launch_same():
    kernel[(PROGRAMS,)](*same, dx, dw, db, w, mean, rstd, ROWS, **meta)


def per_call_us(fn, calls=20000, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main():
    stub = cuda_stub.Stub(os.environ["WARPWEAVE_LIBCUDA"])
    launch_new()  # compiles; configures the launcher
    launcher = kernel._launcher
    general_calls = []
    real = jit.JITFunction._launch_general
    jit.JITFunction._launch_general = lambda self, *a: general_calls.append(1) or real(self, *a)
    rows = []
    for path in ("general", "fast"):
        # The launcher without the descriptor type: descriptors take the general path.
        launcher.configure(Tensor, *jit._stream_source(),
                           descriptor_type=ww.TensorDescriptor if path == "fast" else None)
        for name, fn in (("new descriptors", launch_new), ("same descriptors", launch_same)):
            before = len(general_calls), stub.record.launches
            us = per_call_us(fn)
            calls = stub.record.launches - before[1]
            rows.append((path, name, us, (len(general_calls) - before[0]) / calls))
    swizzles = [next(iter(kernel.cache.values())).swizzles[n] for n in ("x_desc", "dy_desc",
                                                                        "dx_desc")]
    building = per_call_us(lambda: [row_descriptor(t) for t in (x, dy, dx)])
    encoding = per_call_us(lambda: [row_descriptor(t).encode(s) for t, s in
                                    zip((x, dy, dx), swizzles)]) - building
    print(f"layernorm_bwd_tma_kernel[({PROGRAMS},)] at {ROWS}x{COLS} fp16 through the stub driver")
    print(f"of which building 3 descriptors: {building:.2f} us, their first encode (cached maps): "
          f"{encoding:.2f} us")
    print(f"{'path':8} {'descriptors':18} {'us/call':>8} {'general share':>14}")
    for path, name, us, share in rows:
        print(f"{path:8} {name:18} {us:8.2f} {share:14.2f}")


if __name__ == "__main__":
    main()
