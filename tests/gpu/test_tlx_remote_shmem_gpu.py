"""Distributed shared memory on the H200: cluster CTAs exchanging (max, sum) pairs through
tlx.async_remote_shmem_store (one exchange, and many rounds through reused slots and barrier
phases) and tlx.remote_shmem_store, against NumPy (checks in
tests/python/tlx_remote_shmem_kernels.py). Each check runs in a subprocess with
WARPWEAVE_TRAP_HANGS set: a wrong transaction count traps instead of hanging, and the trap cannot
leave this process's CUDA context unusable for the tests after it."""

import pytest

from gpu_requirements import cache_dir, require_cuda, run_trapped_check  # noqa: F401 (fixture)

require_cuda((9, 0), "distributed shared memory (st.async, mapa) needs an sm_90 or newer GPU")


def run_check(call, cache_dir):
    run_trapped_check("tlx_remote_shmem_kernels", call, cache_dir, seed=11)


@pytest.mark.parametrize("c", [2, 4])
@pytest.mark.parametrize("self_push", [False, True])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_exchange_of_pairs(c, self_push, num_warps, cache_dir):
    run_check(f"check_exchange_pairs({c}, 33, {self_push}, num_warps={num_warps})", cache_dir)


def test_store_to_itself_in_a_cluster_of_one_is_refused(cache_dir):
    # Launched without a cluster, st.async into the CTA's own shared memory raised an illegal
    # instruction on the H200: such a store compiles (as in TLX, where a 1-CTA launch may never
    # reach it) and, when it runs, prints its line ("... needs a cluster launch") and traps. On
    # the H200 (session 9) the trap ended the launch before the device printf buffer reached the
    # host, so the check accepts the failed launch alone, as our launcher words it or as
    # PyTorch does when its synchronize is the first call to see it (session 10); the
    # interpreter reports the line (tests/python/test_tlx_remote_shmem.py).
    with pytest.raises(AssertionError, match="needs a cluster launch|CUDA_ERROR_LAUNCH_FAILED"
                                             "|unspecified launch failure"):
        run_check("check_exchange_pairs(1, 65, True)", cache_dir)


@pytest.mark.parametrize("c,slots", [(2, 2), (4, 2), (4, 3)])
def test_many_rounds_through_reused_slots(c, slots, cache_dir):
    run_check(f"check_exchange_rounds({c}, {slots}, 64, 33)", cache_dir)


@pytest.mark.parametrize("c", [2, 4])
def test_synchronous_store(c, cache_dir):
    run_check(f"check_exchange_sync({c}, 33)", cache_dir)


@pytest.mark.parametrize("dtype,rows", [("float32", 8), ("float16", 16), ("float64", 8)])
def test_wide_tiles(dtype, rows, cache_dir):
    run_check(f"check_push_tile({dtype!r}, {rows}, 2)", cache_dir)
