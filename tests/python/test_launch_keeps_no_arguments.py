"""A launch keeps no reference to its arguments once it returns (Triton's contract, checked by
TLX's test_gpu_memory_not_leaked): neither the autotuner (its `nargs` lives only during the call)
nor the benchmark helper (its L2-flush buffer lives only during do_bench)."""

import gc
import importlib
import weakref

import numpy as np

import warpweave as ww
import warpweave.language as tl

testing = importlib.import_module("warpweave.testing")


@ww.autotune(configs=[ww.Config({"BLOCK": 64}), ww.Config({"BLOCK": 128})], key=["n"])
@ww.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def test_autotuned_launch_releases_its_arguments():
    def run():
        src = np.arange(256, dtype=np.float32)
        dst = np.zeros_like(src)
        copy_kernel[lambda m: (ww.cdiv(256, m["BLOCK"]),)](src, dst, 256)
        np.testing.assert_array_equal(src, dst)
        return weakref.ref(src), weakref.ref(dst)

    refs = run()
    gc.collect()
    assert all(r() is None for r in refs), "a launch argument outlived the call"
    assert copy_kernel.nargs is None


def test_flush_buffer_is_not_cached():
    class Buffer:
        pass

    class FakeTorch:
        int32 = "int32"

        @staticmethod
        def empty(n, dtype, device):
            return Buffer()

    buf = testing._flush_buffer(FakeTorch, 0)
    ref = weakref.ref(buf)
    del buf
    gc.collect()
    assert ref() is None, "the L2-flush buffer outlived do_bench"
