"""kernel[grid](...) end to end through the real runtime and a stand-in CUDA driver
(tools/cuda_stub, loaded with WARPWEAVE_LIBCUDA): real compiles, real module loads and
cuLaunchKernel calls whose grid, block, stream and packed parameter values the stub keeps. Each
test runs in a fresh process, since the runtime loads its driver once per process."""

import json
import os
import struct
import subprocess
import sys
import textwrap

import cuda_stub
import pytest

pytest.importorskip("warpweave._native")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What every test process starts with: the stub as the driver, kernels compiled from this text
# (two plain ones, two that take TensorDescriptors), stand-ins for torch's tensors
# (cuda_stub's: Tensor(address, dtype, cuda=True)), current device and stream.
PRELUDE = '''
import importlib, json, os, struct, sys
sys.path.insert(0, {stub_dir!r})
import cuda_stub
import warpweave as ww
import warpweave.language as tl
from warpweave import _native, tlx
jit = importlib.import_module("warpweave.jit")
stub = cuda_stub.Stub(os.environ["WARPWEAVE_LIBCUDA"]) \
    if os.path.exists(os.environ["WARPWEAVE_LIBCUDA"]) else None


@ww.jit
def add4(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@ww.jit
def scale(x_ptr, a, flag, big, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n) * a
    tl.store(x_ptr + offs + big * flag, v, mask=offs < n)


@ww.jit
def tma_scale(a, in_desc, out_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # in_desc fills a swizzled TLX buffer (it declares its swizzle); out_desc's tile is staged in
    # the scratch region, which lies over the dead buffer on whole swizzle atoms: swizzled too.
    bufs = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    row = tl.program_id(0) * BLOCK_M
    tlx.barrier_expect_bytes(tlx.local_view(bars, 0), BLOCK_M * BLOCK_N * 2)
    tlx.async_descriptor_load(in_desc, tlx.local_view(bufs, 0), [row, 0], tlx.local_view(bars, 0))
    tlx.barrier_wait(tlx.local_view(bars, 0), 0)
    out_desc.store([row, 0], tlx.local_load(tlx.local_view(bufs, 0)) * a)


@ww.jit
def tma_double(in_desc, out_desc):
    out_desc.store([0, 0], in_desc.load([0, 0]) * 2)


DType = cuda_stub.StandInDType
F32, F16 = DType("float32"), DType("float16")


def Tensor(address, dtype=F32, cuda=True):
    return (cuda_stub.StandInTensor if cuda else cuda_stub.StandInCpuTensor)(address, dtype)


jit._tensor_type = cuda_stub.StandInTensor
device = [0]
jit._stream_source = lambda: (lambda: device[0], lambda dev: 0x5000 + dev)
x, y, out = Tensor(0x7f0000010000), Tensor(0x7f0000020000), Tensor(0x7f0000030000)


def desc(base, block, shape=(256, 128)):
    return ww.TensorDescriptor(base, list(shape), [shape[1], 1], list(block))


def last():
    r = stub.record
    return dict(launches=r.launches, ex=r.launch_ex, grid=list(r.grid), block=list(r.block),
                stream=r.stream, shared=r.shared_bytes, cluster=list(r.cluster),
                params=list(stub.last_params()), loads=r.module_loads)
'''


def run_with_stub(tmp_path, body: str, env_extra=None):
    """Runs PRELUDE + body in a new process with the stub as its driver; body prints JSON."""
    env = dict(os.environ, WARPWEAVE_LIBCUDA=cuda_stub.build(), WARPWEAVE_TARGET="sm_90a",
               WARPWEAVE_CACHE_DISABLE="1", PYTHONUNBUFFERED="1")
    for k in ("WARPWEAVE_INTERPRET", "WARPWEAVE_TRAP_HANGS"):
        env.pop(k, None)
    env.update(env_extra or {})
    code = PRELUDE.format(stub_dir=os.path.join(REPO, "tools", "cuda_stub")) + \
        textwrap.dedent(body)
    script = tmp_path / "launches.py"  # a file: @ww.jit reads kernels' source
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "leaked" not in r.stderr, r.stderr[-4000:]  # nanobind's report of lost references
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_launches_are_counted_and_params_packed_as_the_kernel_takes_them(tmp_path):
    res = run_with_stub(tmp_path, '''
        stub.record_params([8, 8, 8, 4])
        runs = []
        calls = []
        real_run = jit.JITFunction.run
        jit.JITFunction.run = lambda self, *a, **k: calls.append(1) or real_run(self, *a, **k)
        add4[(3, 2)](x, y, out, 1000, BLOCK=256)  # general path: compiles and loads
        runs.append(last())
        for n in (1000, 999, -5):  # fast path: same key (i32, not a multiple of 16)
            add4[(3, 2)](x, y, out, n, BLOCK=256)
            runs.append(last())
        add4[lambda meta: (7,)](y, x, out, 1000, BLOCK=256, num_warps=8)  # a new kernel
        runs.append(last())
        print(json.dumps(dict(runs=runs, general=len(calls),
                              params=[p[:2] for p in add4.cache[next(iter(add4.cache))]
                                      .kernel.params])))
    ''')
    runs = res["runs"]
    assert res["params"] == [["x_ptr", "ptr<fp32>"], ["y_ptr", "ptr<fp32>"],
                             ["out_ptr", "ptr<fp32>"], ["n", "i32"]]
    assert [r["launches"] for r in runs] == [1, 2, 3, 4, 5]
    assert res["general"] == 2  # the first launch of each kernel
    x, y, o = 0x7f0000010000, 0x7f0000020000, 0x7f0000030000
    assert [r["params"] for r in runs] == [
        [x, y, o, 1000], [x, y, o, 1000], [x, y, o, 999], [x, y, o, 2**32 - 5], [y, x, o, 1000]]
    assert all(r["grid"] == [3, 2, 1] and r["block"] == [128, 1, 1] for r in runs[:4])
    assert runs[4]["grid"] == [7, 1, 1] and runs[4]["block"] == [256, 1, 1]
    assert all(r["stream"] == 0x5000 and r["ex"] == 0 and r["cluster"] == [0, 0, 0]
               for r in runs)
    assert [r["loads"] for r in runs] == [1, 1, 1, 1, 2]  # each kernel loaded once


def test_scalars_reach_the_driver_with_their_param_types(tmp_path):
    res = run_with_stub(tmp_path, '''
        stub.record_params([8, 4, 1, 8, 4])
        out = []
        for big in (-(1 << 40), -(1 << 40) + 1):  # general path, then fast
            scale[(1,)](x, 2.5, True, big, 100, BLOCK=128)
            out.append(last()["params"])
        types = [p[1] for p in scale.cache[next(iter(scale.cache))].kernel.params]
        print(json.dumps(dict(params=out, types=types)))
    ''')
    assert res["types"] == ["ptr<fp32>", "fp32", "i1", "i64", "i32"]
    f25 = int.from_bytes(__import__("struct").pack("<f", 2.5), "little")
    assert res["params"] == [[0x7f0000010000, f25, 1, 2**64 - (1 << 40), 100],
                             [0x7f0000010000, f25, 1, 2**64 - (1 << 40) + 1, 100]]


def test_the_device_picks_the_stream_and_the_launch_reaches_the_driver_once_per_call(tmp_path):
    res = run_with_stub(tmp_path, '''
        streams = []
        for dev in (0, 0, 2, 2, 0):
            device[0] = dev
            add4[(1,)](x, y, out, 64, BLOCK=64)
            streams.append(stub.record.stream)
        print(json.dumps(dict(streams=streams, launches=stub.record.launches)))
    ''')
    assert res["streams"] == [0x5000, 0x5000, 0x5002, 0x5002, 0x5000]
    assert res["launches"] == 5


def test_driver_errors_reach_python_unchanged_on_both_paths(tmp_path):
    res = run_with_stub(tmp_path, '''
        add4[(1,)](x, y, out, 64, BLOCK=64)
        add4[(1,)](x, y, out, 64, BLOCK=64)
        stub.fail_launches(700)  # CUDA_ERROR_ILLEGAL_ADDRESS
        errors = []
        for launch in (lambda: add4[(1,)](x, y, out, 64, BLOCK=64),  # fast path
                       lambda: add4[(1,)](x, y, out, 64, BLOCK=32)):  # general path
            try:
                launch()
            except _native.CudaError as e:
                errors.append([type(e).__name__, str(e)])
        stub.fail_launches(0)
        add4[(1,)](x, y, out, 64, BLOCK=64)
        print(json.dumps(dict(errors=errors, launches=stub.record.launches)))
    ''')
    msg = "cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was " \
          "encountered)"
    assert res["errors"] == [["CudaError", msg], ["CudaError", msg]]
    assert res["launches"] == 3


def test_cluster_kernels_launch_through_cuLaunchKernelEx_with_their_cluster_shape(tmp_path):
    res = run_with_stub(tmp_path, '''
        meta = dict(name="k", target="sm_90a", num_warps=4, num_ctas=2, folded=[],
                    params=[dict(name="p", type="ptr<fp32>", size=8),
                            dict(name="n", type="i32", size=4)])
        k = _native.kernel_from_metadata(json.dumps(meta), b"not a cubin", "")
        stub.record_params([8, 4])
        k.launch(4, 1, 1, 0x77, [0x1000, -1])
        rec = last()
        try:
            k.launch(3, 1, 1, 0x77, [0x1000, 1])
            err = None
        except _native.LaunchError as e:
            err = str(e)
        print(json.dumps(dict(rec=rec, err=err)))
    ''')
    rec = res["rec"]
    assert rec["ex"] == 1 and rec["cluster"] == [2, 1, 1] and rec["grid"] == [4, 1, 1]
    assert rec["params"] == [0x1000, 2**32 - 1] and rec["stream"] == 0x77
    assert "grid[0] = 3 must be a multiple of 2" in res["err"]


def test_a_missing_override_library_is_reported_by_name(tmp_path):
    res = run_with_stub(tmp_path, '''
        ok, why = _native.cuda_available()
        try:
            add4[(1,)](x, y, out, 64, BLOCK=64)
            err = None
        except _native.CudaError as e:
            err = str(e)
        print(json.dumps(dict(ok=ok, why=why, err=err)))
    ''', env_extra={"WARPWEAVE_LIBCUDA": "/nonexistent/libcuda_stub.so"})
    assert res["ok"] is False
    assert res["why"].startswith("CUDA driver WARPWEAVE_LIBCUDA=/nonexistent/libcuda_stub.so "
                                 "cannot be loaded: ")
    assert res["err"] == res["why"]


def test_descriptor_kernels_take_the_fast_path_with_the_general_paths_tensor_maps(tmp_path):
    res = run_with_stub(tmp_path, '''
        stub.record_params([4, 128, 128])
        general = []
        real = jit.JITFunction._launch_general
        jit.JITFunction._launch_general = lambda self, *a: general.append(1) or real(self, *a)
        a, o = Tensor(0x7f0000100000, F16), Tensor(0x7f0000200000, F16)
        launches = []
        for scale in (2.0, 0.5, 0.5):  # general path, then fast; new descriptors every call
            c = tma_scale[(4,)](scale, desc(a, [64, 128]), desc(o, [64, 128]), BLOCK_M=64,
                                BLOCK_N=128)
            launches.append([b.hex() for b in stub.last_param_bytes()])
        expected = [desc(a, [64, 128]).encode(c.swizzles["in_desc"]).hex(),
                    desc(o, [64, 128]).encode(c.swizzles["out_desc"]).hex()]
        print(json.dumps(dict(launches=launches, expected=expected, swizzles=c.swizzles,
                              general=len(general), kernels=tma_scale._launcher.num_kernels,
                              count=stub.record.launches)))
    ''')
    assert res["general"] == 1 and res["kernels"] == 1 and res["count"] == 3
    assert res["swizzles"] == {"in_desc": 128, "out_desc": 128}
    f2, f05 = (struct.pack("<f", v).hex() for v in (2.0, 0.5))
    assert res["launches"] == [[f2] + res["expected"]] + [[f05] + res["expected"]] * 2
    in_map, out_map = (bytes.fromhex(m) for m in res["expected"])
    # The stub's map keeps its inputs: each got the 128-byte swizzle (3:
    # CU_TENSOR_MAP_SWIZZLE_128B) and a box one swizzle span (64 halves) wide.
    assert int.from_bytes(in_map[:8], "little") == 0x7f0000100000
    assert int.from_bytes(out_map[:8], "little") == 0x7f0000200000
    for m in (in_map, out_map):
        assert struct.unpack_from("<I", m, 16)[0] == 3
        assert struct.unpack_from("<2I", m, 96) == (64, 64)


def test_descriptor_dtype_and_block_shape_select_kernels_and_cpu_bases_are_refused(tmp_path):
    res = run_with_stub(tmp_path, '''
        stub.record_params([128, 128])
        general = []
        real = jit.JITFunction._launch_general
        jit.JITFunction._launch_general = lambda self, *a: general.append(1) or real(self, *a)
        a, o = Tensor(0x7f0000100000, F16), Tensor(0x7f0000200000, F16)
        a32, o32 = Tensor(0x7f0000300000, F32), Tensor(0x7f0000400000, F32)
        mutable = desc(a, [8, 32])
        calls = [lambda: tma_double[(1,)](desc(a, [8, 32]), desc(o, [8, 32])),
                 lambda: tma_double[(1,)](desc(a, [16, 32]), desc(o, [16, 32])),
                 lambda: tma_double[(1,)](desc(a32, [8, 32]), desc(o32, [8, 32])),
                 lambda: tma_double[(1,)](mutable, desc(o, [8, 64]))]
        seen = []
        for i, call in enumerate(calls):
            if i == 3:
                mutable.block_shape = [8, 64]  # as autotuning does
            for _ in range(2):
                call()
                seen.append(dict(general=len(general), compiles=tma_double.compile_count,
                                 first=stub.last_param_bytes()[0][:8].hex()))
        errors = []
        for base in (Tensor(0x7f0000500000, F16, cuda=False), o):  # a CPU base, either side
            try:
                tma_double[(1,)](desc(base, [8, 32]), desc(Tensor(0x10, F16, cuda=False), [8, 32]))
            except ValueError as e:
                errors.append(str(e))
        print(json.dumps(dict(seen=seen, errors=errors, kernels=tma_double._launcher.num_kernels,
                              sigs=sorted(k.signature for k in tma_double.cache.values()))))
    ''')
    assert [s["compiles"] for s in res["seen"]] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert [s["general"] for s in res["seen"]] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert [s["first"] for s in res["seen"]] == \
        [(0x7f0000100000).to_bytes(8, "little").hex()] * 4 + \
        [(0x7f0000300000).to_bytes(8, "little").hex()] * 2 + \
        [(0x7f0000100000).to_bytes(8, "little").hex()] * 2
    assert res["kernels"] == 4
    assert res["sigs"] == ["in_desc:desc<fp16,16x32>,out_desc:desc<fp16,16x32>",
                           "in_desc:desc<fp16,8x32>,out_desc:desc<fp16,8x32>",
                           "in_desc:desc<fp16,8x64>,out_desc:desc<fp16,8x64>",
                           "in_desc:desc<fp32,8x32>,out_desc:desc<fp32,8x32>"]
    assert res["errors"] == [
        f"argument '{n}' of tma_double is a CPU tensor; GPU launches need CUDA tensors (move it "
        f"with .cuda(), pass NumPy arrays, or set WARPWEAVE_INTERPRET=1 to run in the interpreter)"
        for n in ("in_desc", "out_desc")]


def test_fp4_padded_descriptors_encode_four_bit_values_padded(tmp_path):
    # A descriptor the kernel declares fp4_padded (the e2m1 operand of a mixed
    # tlx.async_dot_scaled) over a uint8 [256, 128] tensor of packed e2m1, block [128, 64]: the
    # map is CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B over 256 values a row, byte strides kept,
    # boxes of 128 values, 128-byte swizzle; the same descriptor declared plain stays uint8.
    res = run_with_stub(tmp_path, '''
        from warpweave.tensor_descriptor import Fp4Padded, swizzle_of
        U8 = DType("uint8")
        t = Tensor(0x7f0000400000, U8)
        padded = desc(t, [128, 64]).encode(swizzle_of("desc<u8,128x64, swizzle=128, fp4_padded>"))
        plain = desc(t, [128, 64]).encode(swizzle_of("desc<u8,128x64, swizzle=64>"))
        print(json.dumps(dict(padded=padded.hex(), plain=plain.hex())))
    ''')
    padded, plain = bytes.fromhex(res["padded"]), bytes.fromhex(res["plain"])

    def words(m, at, n, size):
        return [int.from_bytes(m[at + size * i:at + size * (i + 1)], "little") for i in range(n)]

    # Stub layout: rank (8), data type (12), swizzle (16), dims (24), strides (64), box (96).
    assert words(padded, 8, 3, 4) == [2, 14, 3]  # CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, 128B
    assert words(padded, 24, 2, 8) == [256, 256] and words(padded, 64, 1, 8) == [128]
    assert words(padded, 96, 2, 4) == [128, 128]
    assert words(plain, 8, 3, 4) == [2, 0, 2]  # UINT8, CU_TENSOR_MAP_SWIZZLE_64B
    assert words(plain, 24, 2, 8) == [128, 256] and words(plain, 96, 2, 4) == [64, 128]


def test_arch_option_and_override_arch_knob_choose_the_target(tmp_path):
    # Triton's `arch=` launch / warmup option and knobs.runtime.override_arch (its
    # test_override_arch): the kernel compiles for that architecture instead of the device's.
    res = run_with_stub(tmp_path, '''
        import re
        h80 = add4.warmup(x, y, out, 1000, BLOCK=256, grid=(1,), arch="sm80")
        h90 = add4.warmup(x, y, out, 1000, BLOCK=256, grid=(1,))
        ww.knobs.runtime.override_arch = "sm100"
        h100 = add4.warmup(x, y, out, 1000, BLOCK=256, grid=(1,))
        ww.knobs.runtime.override_arch = None
        try:
            add4.warmup(x, y, out, 1000, BLOCK=256, grid=(1,), arch="sm70")
            bad = ""
        except ValueError as e:
            bad = str(e)
        print(json.dumps(dict(
            targets=[re.search(r"\\.target (\\w+)", h.asm["ptx"]).group(1)
                     for h in (h80, h90, h100)],
            ttgir=re.search(r"cuda:(\\d+)", h80.asm["ttgir"]).group(1), bad=bad)))
    ''')
    assert res["targets"] == ["sm_80", "sm_90a", "sm_100a"]
    assert res["ttgir"] == "80"
    assert "arch 'sm70' is not a warpweave target" in res["bad"]


def test_enable_reflect_ftz_false_keeps_subnormals_in_the_approximations(tmp_path):
    # Triton's option (its test_enable_reflect_ftz): exp2's ex2 without .ftz; the default flushes.
    res = run_with_stub(tmp_path, '''
        @ww.jit
        def exp2(data):
            ptrs = data + tl.arange(0, 128)
            tl.store(ptrs, tl.math.exp2(tl.load(ptrs)))

        ptx = {flag: exp2.warmup(x, grid=(1,), enable_reflect_ftz=flag).asm["ptx"]
               for flag in (False, True)}
        print(json.dumps({str(k): ["ex2.approx.ftz.f32" in v, "ex2.approx.f32" in v]
                          for k, v in ptx.items()}))
    ''')
    assert res == {"False": [False, True], "True": [True, False]}


def test_maxnreg_declares_the_kernels_registers(tmp_path):
    # Triton's option (its test_maxnreg): `.maxnreg N` on the .entry; kernels apart by N; a
    # Config's maxnreg reaches the launch; bad values are refused by name.
    res = run_with_stub(tmp_path, '''
        import re

        @ww.jit
        def store0(X):
            tl.store(X, 0)

        def entry(ptx):
            m = re.search(r"\\.visible \\.entry [^{]*?\\.maxnreg (\\d+)", ptx)
            return int(m.group(1)) if m else None

        got = {str(n): entry(store0.warmup(x, grid=(1,), maxnreg=n).asm["ptx"])
               for n in (42, 128, None)}

        @ww.autotune(configs=[ww.Config({}, maxnreg=64)], key=[])
        @ww.jit
        def tuned(X):
            tl.store(X, 1)

        tuned[(1,)](x)
        got["config"] = [entry(k.asm["ptx"]) for k in tuned.fn.cache.values()]
        errors = []
        for bad in (0, 300, 2.5, True):
            try:
                store0.warmup(x, grid=(1,), maxnreg=bad)
            except (TypeError, ValueError) as e:
                errors.append(str(e))
        got["errors"] = errors
        print(json.dumps(got))
    ''')
    assert res["42"] == 42 and res["128"] == 128 and res["None"] is None
    assert res["config"] == [64]
    assert len(res["errors"]) == 4 and all("maxnreg must be" in e for e in res["errors"])


def test_function_constexprs_key_the_fast_path_by_function(tmp_path):
    # A @jit function passed for a constexpr: each function its own kernel, and repeat launches
    # with either find their own (never the other's).
    res = run_with_stub(tmp_path, '''
        @ww.jit
        def neg(v):
            return -v

        @ww.jit
        def apply(x_ptr, F: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, F(tl.load(x_ptr + offs)))

        names = []
        for f in (neg, tl.abs, neg, tl.abs, neg):
            k = apply[(1,)](x, f, BLOCK=128)
            names.append("neg.f32" in k.asm["ptx"])
        print(json.dumps(dict(neg=names, loads=last()["loads"], compiled=len(apply.cache))))
    ''')
    assert res["neg"] == [True, False, True, False, True]
    assert res["loads"] == 2 and res["compiled"] == 2


def test_num_ctas_for_sm80_is_refused_as_triton_refuses_it(tmp_path):
    # Triton's test_num_ctas_pre_sm90: its CTA split needs clusters, so sm_80 refuses num_ctas > 1
    # (warpweave runs a program on one CTA either way; num_ctas=1 and sm_90a are fine).
    res = run_with_stub(tmp_path, '''
        @ww.jit
        def nothing(src):
            pass

        out = {}
        for arch, n in (("sm80", 2), ("sm80", 1), ("sm90", 2)):
            try:
                nothing.warmup(x, grid=(1,), num_ctas=n, arch=arch)
                out[f"{arch}-{n}"] = "ok"
            except ValueError as e:
                out[f"{arch}-{n}"] = str(e)
        print(json.dumps(out))
    ''')
    assert res["sm80-2"].startswith("num_ctas > 1 requires NVIDIA SM90+ (Hopper)")
    assert res["sm80-1"] == "ok" and res["sm90-2"] == "ok"
