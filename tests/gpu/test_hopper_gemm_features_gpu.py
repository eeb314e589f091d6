"""Hopper GEMM features on the H200 (checks in tests/python/hopper_gemm_kernels.py), against
PyTorch: the warp-specialized TMA GEMM with column-major A and / or B (wgmma's transpose
immediates), fp8 e4m3 / e5m2 operands, 2-CTA clusters that share B through multicast TMA with
targets computed at run time into a half chosen at run time; TMA into a run-time view; the
cp.async pipelined GEMM at 128x256x64 on 8 warps. Each check runs in a subprocess with
WARPWEAVE_TRAP_HANGS set: a wrong protocol traps instead of hanging, and the trap cannot leave
this process's CUDA context unusable for the tests after it."""

import importlib

import pytest

from gpu_requirements import cache_dir, run_trapped_check  # noqa: F401 (fixture)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
if not native_loader.available():
    pytest.skip("warpweave._native is not built (pip install .)", allow_module_level=True)
if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("wgmma and multicast TMA need an sm_90 GPU", allow_module_level=True)


def run_check(call, cache_dir):
    run_trapped_check("hopper_gemm_kernels", call, cache_dir, seed=11)


LAYOUTS = [(True, True), (False, True), (True, False), (False, False)]


@pytest.mark.parametrize("a_row_major,b_row_major", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tile_dot_with_column_major_operands(a_row_major, b_row_major, dtype, cache_dir):
    run_check(f"check_tile_dot({dtype!r}, {dtype!r}, {a_row_major}, {b_row_major})", cache_dir)


@pytest.mark.parametrize("a_dtype,b_dtype", [("float8_e4m3fn", "float8_e4m3fn"),
                                             ("float8_e5m2", "float8_e5m2"),
                                             ("float8_e4m3fn", "float8_e5m2")])
def test_tile_dot_with_fp8_operands(a_dtype, b_dtype, cache_dir):
    run_check(f"check_tile_dot({a_dtype!r}, {b_dtype!r}, True, False)", cache_dir)


@pytest.mark.parametrize("ctas", [1, 2])
@pytest.mark.parametrize("a_row_major,b_row_major", LAYOUTS)
def test_ws_gemm_with_column_major_operands(a_row_major, b_row_major, ctas, cache_dir):
    run_check(f"check_ws_gemms({a_row_major}, {b_row_major}, {ctas})", cache_dir)


def test_ws_gemm_bf16_column_major_in_clusters(cache_dir):
    run_check("check_ws_gemms(False, False, 2, 'bfloat16')", cache_dir)


@pytest.mark.parametrize("a_dtype,b_dtype,ctas", [("float8_e4m3fn", "float8_e4m3fn", 1),
                                                  ("float8_e5m2", "float8_e5m2", 2),
                                                  ("float8_e4m3fn", "float8_e5m2", 2)])
def test_ws_gemm_with_fp8_operands(a_dtype, b_dtype, ctas, cache_dir):
    run_check(f"check_fp8_ws_gemms({a_dtype!r}, {b_dtype!r}, {ctas})", cache_dir)


# 128 columns of fp16 split by rows is not a whole-swizzle-atom view, which TMA needs here (the
# compiler refuses it with a located error); the run-time multicast itself is the same at 64.
@pytest.mark.parametrize("clusters,cols", [(1, 64), (5, 64)])
def test_multicast_targets_computed_at_run_time(clusters, cols, cache_dir):
    run_check(f"check_multicast_halves_runtime({clusters}, {cols})", cache_dir)


@pytest.mark.parametrize("which", [0, 1])
def test_tma_into_a_view_chosen_at_run_time(which, cache_dir):
    run_check(f"check_runtime_view_load({which})", cache_dir)


@pytest.mark.parametrize("which", [0, 1])
def test_tma_into_a_buffer_and_barrier_chosen_at_run_time(which, cache_dir):
    run_check(f"check_runtime_stage_load({which})", cache_dir)


@pytest.mark.parametrize("mnk", [(128, 256, 64), (1000, 776, 328), (4096, 4096, 4096)])
def test_pipelined_gemm_on_8_warps(mnk, cache_dir):
    run_check(f"check_pipelined_gemm({mnk[0]}, {mnk[1]}, {mnk[2]})", cache_dir)
