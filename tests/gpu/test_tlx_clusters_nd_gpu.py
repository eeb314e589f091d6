"""2- and 3-D clusters, the bulk copy to a peer, and tl.inline_asm_elementwise on the GPU: the
checks of tests/python/test_tlx_clusters_nd.py and test_inline_asm.py, each in a subprocess with
WARPWEAVE_TRAP_HANGS set (a wrong cluster protocol traps instead of hanging)."""

import pytest

from gpu_requirements import cache_dir, require_cuda, run_trapped_check  # noqa: F401 (fixture)

require_cuda((9, 0), "clusters need an sm_90 or newer GPU")


@pytest.mark.parametrize("shape,grid", [((2, 1, 3), (10, 8, 12)), ((1, 2, 1), (3, 4, 1)),
                                        ((2, 2, 2), (4, 2, 6))])
def test_ranks_follow_the_cluster_shape(shape, grid, cache_dir):
    run_trapped_check("test_tlx_clusters_nd", f"gpu_check_ranks({shape}, {grid})", cache_dir, 1)


@pytest.mark.parametrize("c", [2, 4])
def test_partials_pushed_along_y(c, cache_dir):
    run_trapped_check("test_tlx_clusters_nd", f"gpu_check_row_sums({c})", cache_dir, 2)


@pytest.mark.parametrize("check", ["gpu_check_bulk_copy()", "gpu_check_multicast()",
                                   "gpu_check_swap_after_delay()",
                                   "gpu_check_exchange_halves()"])
def test_cluster_data_movement(check, cache_dir):
    run_trapped_check("test_tlx_clusters_nd", check, cache_dir, 3)


def test_inline_asm_kernels(cache_dir):
    run_trapped_check("test_inline_asm", "gpu_check_inline_asm()", cache_dir, 4)
