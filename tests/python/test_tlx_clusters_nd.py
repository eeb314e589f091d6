"""Clusters of two and three dimensions (ctas_per_cga=(x, y, z)): the interpreter groups the
programs of each cluster by the shape and ranks them x fastest (as %cluster_ctarank does), remote
stores and multicast TMA reach peers by those ranks, the PTX declares the shape
(.reqnctapercluster x, y, z, which ptxas accepts) and the launcher passes it to cuLaunchKernelEx
(checked through the stand-in driver of tools/cuda_stub). Grids must be whole clusters."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

native = pytest.importorskip("warpweave._native")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@ww.jit
def rank_map(out_ptr, GX: tl.constexpr, GY: tl.constexpr):
    # Each program records its cluster's size and its rank: size * 100 + rank.
    where = tl.program_id(0) + GX * (tl.program_id(1) + GY * tl.program_id(2))
    tl.store(out_ptr + where, tlx.cluster_size_1d() * 100 + tlx.cluster_cta_rank())


@pytest.mark.parametrize("shape,grid", [((2, 1, 3), (10, 8, 12)), ((1, 2, 1), (3, 4, 1)),
                                        ((2, 2, 2), (4, 2, 6)), ((4, 1, 1), (8, 2, 1))])
def test_rank_and_size_follow_the_cluster_shape(shape, grid):
    out = np.full(grid[::-1], -1, np.int32)
    rank_map[grid](out, grid[0], grid[1], ctas_per_cga=shape)
    by_xyz = out.transpose(2, 1, 0)
    x, y, z = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    cx, cy, cz = shape
    expected = cx * cy * cz * 100 + (x % cx) + cx * ((y % cy) + cy * (z % cz))
    np.testing.assert_array_equal(by_xyz, expected)


def test_two_element_shapes_mean_z_of_one():
    out = np.full((1, 4, 2), -1, np.int32)
    k = rank_map[(2, 4, 1)](out, 2, 4, ctas_per_cga=(1, 2))
    assert k.metadata.ctas_per_cga == (1, 2, 1) == k.metadata.cluster_dims
    np.testing.assert_array_equal(out[0] % 100, np.array([[0, 0], [1, 1], [0, 0], [1, 1]]))


@pytest.mark.parametrize("grid,axis,size,dim", [((4, 3, 6), 1, 3, 2), ((3, 2, 6), 0, 3, 2),
                                                ((4, 2, 5), 2, 5, 3)])
def test_grid_must_hold_whole_clusters_on_every_axis(grid, axis, size, dim):
    with pytest.raises(ValueError, match=re.escape(
            f"kernel 'rank_map' runs in clusters of 12 CTAs (ctas_per_cga=(2, 2, 3)): "
            f"grid[{axis}] = {size} must be a multiple of {dim}")):
        rank_map[grid](np.zeros(grid[::-1], np.int32), grid[0], grid[1], ctas_per_cga=(2, 2, 3))


@pytest.mark.parametrize("bad,what", [((4, 4, 2), "a cluster holds 1 to 16 CTAs"),
                                      ((2, 0, 1), "a cluster holds 1 to 16 CTAs"),
                                      ((1, 1, 1, 1), "expected (x,), (x, y) or (x, y, z)")])
def test_cluster_shapes_out_of_range_are_refused(bad, what):
    with pytest.raises(ValueError, match=re.escape(what)):
        rank_map[(4, 4, 2)](np.zeros(32, np.int32), 4, 4, ctas_per_cga=bad)


def test_num_ctas_that_disagrees_with_the_shape_is_refused():
    with pytest.raises(ValueError, match="disagree"):
        rank_map[(2, 2, 1)](np.zeros(4, np.int32), 2, 2, ctas_per_cga=(2, 2, 1), num_ctas=2)


# ---- distributed shared memory along y: partial row sums pushed to rank 0 ----

@ww.jit
def row_sums_over_y(x_ptr, out_ptr, N: tl.constexpr, ROWS: tl.constexpr, C: tl.constexpr):
    """Cluster (1, C, 1): CTA r sums columns [r * N / C, (r + 1) * N / C) of the program's ROWS
    rows and pushes the partial to slot r of rank 0, which adds them up."""
    W: tl.constexpr = N // C
    slots = tlx.local_alloc((ROWS,), tl.float32, C)
    bars = tlx.alloc_barriers(num_barriers=C, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    for i in tl.static_range(1, C):
        tlx.barrier_expect_bytes(bars[i], ROWS * 4)
    tlx.cluster_barrier()
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = rank * W + tl.arange(0, W)
    part = tl.sum(tl.load(x_ptr + rows[:, None] * N + cols[None, :]), axis=1)
    if rank != 0:
        tlx.async_remote_shmem_store(slots[rank], part, 0, bars[rank])
    if rank == 0:
        total = part
        for i in tl.static_range(1, C):
            tlx.barrier_wait(bars[i], 0)
            total += tlx.local_load(slots[i])
        tl.store(out_ptr + rows, total)


@pytest.mark.parametrize("c", [2, 4])
def test_partials_pushed_along_the_cluster_y_axis(c):
    rng = np.random.default_rng(c)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    out = np.zeros(64, np.float32)
    row_sums_over_y[(4, c)](x, out, N=128, ROWS=16, C=c, ctas_per_cga=(1, c, 1))
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


# ---- multicast TMA over a 2 x 2 cluster ----

def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


@ww.jit
def multicast_down_columns(in_desc, out_desc, B: tl.constexpr):
    """Cluster (2, 2, 1), ranks [[0, 2], [1, 3]] over (x, y). The CTAs at y rank 0 load in's tile
    of their x and multicast it to themselves and the CTA below (rank + 2); every CTA stores what
    it received at its own (x, y) tile of out."""
    buf = tlx.local_alloc((B, B), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    tlx.barrier_expect_bytes(bars[0], B * B * 4)
    if rank < 2:
        tlx.async_descriptor_load(in_desc, buf[0], [tl.program_id(0) * B, 0], bars[0],
                                  multicast_targets=[rank, rank + 2])
    tlx.barrier_wait(bars[0], 0)
    out_desc.store([tl.program_id(0) * B, tl.program_id(1) * B], tlx.local_load(buf[0]))
    tlx.cluster_barrier()


def test_multicast_reaches_the_ranks_of_a_two_dimensional_cluster():
    b = 16
    x = np.arange(4 * b * b, dtype=np.float32).reshape(4 * b, b)
    out = np.full((4 * b, 4 * b), np.nan, np.float32)
    multicast_down_columns[(4, 4)](descriptor(x, [b, b]), descriptor(out, [b, b]), B=b,
                                   ctas_per_cga=(2, 2, 1))
    np.testing.assert_array_equal(out, np.tile(x, (1, 4)))


# ---- sm_90a: the declared shape, through ptxas ----

def compile_ptx(kernel, signature, shape):
    src = ww.compiler.ASTSource(kernel, signature=signature[0], constexprs=signature[1])
    from warpweave.backends.compiler import GPUTarget

    target = GPUTarget("cuda", 90, 32)
    return ww.compiler.compile(src, target=target, options=dict(ctas_per_cga=shape))


@pytest.mark.parametrize("shape", [(2, 1, 3), (1, 2, 1), (2, 2, 2)])
def test_the_ptx_declares_the_cluster_shape(shape):
    k = compile_ptx(rank_map, ({"out_ptr": "*i32"}, {"GX": 4, "GY": 4}), shape)
    ptx = k.asm["ptx"]
    assert ".explicitcluster\n.reqnctapercluster %d, %d, %d\n" % shape in ptx, ptx
    assert "%cluster_ctarank" in ptx and "%cluster_nctarank" in ptx
    if k.asm.get("cubin") is not None:  # ptxas accepted it (no ptxas: PTX only)
        assert len(k.asm["cubin"]) > 0


def test_remote_stores_and_multicast_compile_for_a_two_dimensional_cluster():
    k = compile_ptx(row_sums_over_y, ({"x_ptr": "*fp32", "out_ptr": "*fp32"},
                                      {"N": 128, "ROWS": 16, "C": 2}), (1, 2, 1))
    assert ".reqnctapercluster 1, 2, 1" in k.asm["ptx"]
    assert "st.async.shared::cluster.mbarrier::complete_tx::bytes" in k.asm["ptx"]


# ---- the launcher: cuLaunchKernelEx's cluster dimension, through the stand-in driver ----

def run_with_stub(tmp_path, body):
    sys.path.insert(0, os.path.join(REPO, "tools", "cuda_stub"))
    import cuda_stub

    env = dict(os.environ, WARPWEAVE_LIBCUDA=cuda_stub.build(), WARPWEAVE_TARGET="sm_90a",
               WARPWEAVE_CACHE_DISABLE="1")
    for k in ("WARPWEAVE_INTERPRET", "WARPWEAVE_TRAP_HANGS"):
        env.pop(k, None)
    prelude = textwrap.dedent(f'''
        import json, os, sys
        sys.path.insert(0, {os.path.join(REPO, "tools", "cuda_stub")!r})
        import cuda_stub
        from warpweave import _native
        stub = cuda_stub.Stub(os.environ["WARPWEAVE_LIBCUDA"])
        ''')
    script = tmp_path / "cluster_launch.py"
    script.write_text(prelude + textwrap.dedent(body))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_launches_pass_the_three_dimensional_cluster_shape(tmp_path):
    res = run_with_stub(tmp_path, '''
        meta = dict(name="k", target="sm_90a", num_warps=4, num_ctas=6, cluster_dims=[2, 1, 3],
                    folded=[], params=[dict(name="p", type="ptr<fp32>", size=8)])
        k = _native.kernel_from_metadata(json.dumps(meta), b"not a cubin", "")
        stub.record_params([8])
        k.launch(4, 5, 9, 0x77, [0x1000])
        r = stub.record
        rec = dict(ex=r.launch_ex, grid=list(r.grid), cluster=list(r.cluster))
        errs = []
        for grid in ((3, 5, 9), (4, 5, 8)):
            try:
                k.launch(*grid, 0x77, [0x1000])
            except _native.LaunchError as e:
                errs.append(str(e))
        clusters = k.max_active_clusters(6)
        print(json.dumps(dict(rec=rec, errs=errs, occ=list(stub.record.occupancy_cluster))))
    ''')
    assert res["rec"] == dict(ex=1, grid=[4, 5, 9], cluster=[2, 1, 3])
    assert res["errs"] == [
        "kernel 'k' runs in clusters of 6 CTAs (ctas_per_cga=(2, 1, 3)): grid[0] = 3 must be a "
        "multiple of 2",
        "kernel 'k' runs in clusters of 6 CTAs (ctas_per_cga=(2, 1, 3)): grid[2] = 8 must be a "
        "multiple of 3"]
    assert res["occ"] == [2, 1, 3]


def test_metadata_whose_shape_disagrees_with_num_ctas_is_refused():
    meta = dict(name="k", target="sm_90a", num_warps=4, num_ctas=4, cluster_dims=[2, 1, 3],
                folded=[], params=[])
    with pytest.raises(ValueError, match="cluster_dims"):
        native.kernel_from_metadata(json.dumps(meta), b"x", "")


# ---- a cluster of one CTA: the remote store compiles and, when never reached, runs ----

@pytest.mark.parametrize("c", [1, 2])
def test_a_store_a_one_cta_cluster_never_reaches_compiles_and_runs(c):
    # At (1, 1, 1) rank 0 keeps its own partial and never stores (TLX accepts the kernel too).
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    out = np.zeros(16, np.float32)
    row_sums_over_y[(1, c)](x, out, N=64, ROWS=16, C=c, ctas_per_cga=(1, c, 1))
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    k = compile_ptx(row_sums_over_y, ({"x_ptr": "*fp32", "out_ptr": "*fp32"},
                                      {"N": 64, "ROWS": 16, "C": c}), (1, c, 1))
    ptx = k.asm["ptx"]
    if c == 1:  # no cluster launch: a store that ran would report itself and trap
        assert ".reqnctapercluster" not in ptx and "st.async" not in ptx and "trap;" in ptx
    else:
        assert ".reqnctapercluster 1, 2, 1" in ptx and "st.async" in ptx


# ---- async_remote_shmem_copy: one bulk copy of a shared buffer into a peer's ----

@ww.jit
def bulk_to_peer(x_ptr, out_ptr, N: tl.constexpr):
    """Cluster (1, 2, 1): rank 0 stages x in its shared memory and copies it to rank 1's buffer,
    completing the bytes on rank 1's barrier; rank 1 writes what arrived."""
    buf = tlx.local_alloc((N,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    if rank == 1:
        tlx.barrier_expect_bytes(bars[0], N * 4)
    tlx.cluster_barrier()
    if rank == 0:
        tlx.local_store(buf[0], tl.load(x_ptr + tl.arange(0, N)) * 2.0)
        tlx.fence("async_shared")
        tlx.async_remote_shmem_copy(dst=buf[0], src=buf[0], remote_cta_rank=1, barrier=bars[0])
    if rank == 1:
        tlx.barrier_wait(bars[0], 0)
        tl.store(out_ptr + tl.arange(0, N), tlx.local_load(buf[0]))
    tlx.cluster_barrier()


def test_bulk_copy_into_a_peer_lands_on_its_barrier():
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(256, np.float32)
    bulk_to_peer[(1, 2)](x, out, N=256, ctas_per_cga=(1, 2, 1))
    np.testing.assert_array_equal(out, 2 * x)


def test_bulk_copy_ptx_maps_both_addresses_and_copies_once():
    k = compile_ptx(bulk_to_peer, ({"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"N": 256}),
                    (1, 2, 1))
    ptx = k.asm["ptx"]
    assert ptx.count("mapa.shared::cluster") == 2
    copies = re.findall(r"(@%p\d+ )?cp\.async\.bulk\.shared::cluster\.shared::cta\.mbarrier::"
                        r"complete_tx::bytes \[%r\d+\], \[%r\d+\], 1024, \[%r\d+\];", ptx)
    assert len(copies) == 1 and copies[0], ptx  # one elected thread issues it
    # The kernel's fence (alloc_barriers' own follows the mbarrier init) precedes the copy.
    copy_at = ptx.index("cp.async.bulk.shared::cluster")
    assert ptx.rfind("fence.proxy.async.shared::cta", 0, copy_at) > ptx.rfind("st.shared", 0,
                                                                              copy_at)
    assert k.asm["cubin"]


@ww.jit
def bulk_copy_too_small(out_ptr):
    buf = tlx.local_alloc((2,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_copy(buf[0], buf[0], 1, bars[0])


def test_bulk_copy_of_less_than_16_bytes_is_refused_at_the_call():
    with pytest.raises(ww.CompilationError, match=r"test_tlx_clusters_nd\.py:\d+:\d+.*a bulk copy "
                                                   r"moves a multiple of 16 bytes"):
        compile_ptx(bulk_copy_too_small, ({"out_ptr": "*fp32"}, {}), (2, 1, 1))


# ---- remote_shmem_store with an inline-asm delay, in the interpreter's subset ----

# ---- a bulk copy into a row slice of a swizzled tile (TLX's 2-CTA attention backward) ----

@ww.jit
def exchange_halves(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """Cluster (2, 1, 1), the dS exchange of TLX's 2-CTA attention backward: CTA r holds two
    [R, C] blocks, x[r, 0] (its own) and x[r, 1] (its peer's). It stores its own into rows
    r*R..(r+1)*R of its [2R, C] tile and bulk-copies its peer's, staged in an [R, C] buffer,
    into the same rows of the peer's tile; then each tile holds CTA 0's rows above CTA 1's."""
    tile = tlx.local_alloc((2 * R, C), tl.float16, 1)
    xchg = tlx.local_alloc((R, C), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rank = tlx.cluster_cta_rank()
    rows = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tlx.barrier_expect_bytes(bars[0], R * C * 2)
    tlx.cluster_barrier()
    if rank == 0:
        own = tlx.local_slice(tile[0], [0, 0], [R, C])
    else:
        own = tlx.local_slice(tile[0], [R, 0], [R, C])
    tlx.local_store(own, tl.load(x_ptr + rank * 2 * R * C + rows))
    tlx.local_store(xchg[0], tl.load(x_ptr + rank * 2 * R * C + R * C + rows))
    tlx.fence("async_shared")
    tlx.async_remote_shmem_copy(dst=own, src=xchg[0], remote_cta_rank=1 - rank, barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)
    all_rows = tl.arange(0, 2 * R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(out_ptr + rank * 2 * R * C + all_rows, tlx.local_load(tile[0]))
    tlx.cluster_barrier()


def exchanged(x):
    """What exchange_halves leaves in each CTA's tile: rows from CTA 0 above rows from CTA 1,
    each CTA's own block where it is the holder, else the block its peer sent."""
    return np.stack([np.concatenate([x[0, 0 if p == 0 else 1], x[1, 1 if p == 0 else 0]])
                     for p in (0, 1)])


SLICE_SHAPES = [(64, 64), (16, 32), (128, 64)]  # 128- and 64-byte swizzles; the tutorial's


@pytest.mark.parametrize("r,c", SLICE_SHAPES[:2])
def test_bulk_copy_into_a_row_slice_of_a_peers_tile(r, c):
    rng = np.random.default_rng(r + c)
    x = rng.standard_normal((2, 2, r, c)).astype(np.float16)
    out = np.zeros((2, 2 * r, c), np.float16)
    exchange_halves[(2,)](x, out, R=r, C=c, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(out, exchanged(x))


def compile_sm100(kernel, signature, shape):
    src = ww.compiler.ASTSource(kernel, signature=signature[0], constexprs=signature[1])
    from warpweave.backends.compiler import GPUTarget

    return ww.compiler.compile(src, target=GPUTarget("cuda", 100, 32),
                               options=dict(ctas_per_cga=shape))


@pytest.mark.parametrize("r,c", SLICE_SHAPES)
@pytest.mark.parametrize("arch", [90, 100])
def test_bulk_copy_into_a_row_slice_ptx(r, c, arch):
    sig = ({"x_ptr": "*fp16", "out_ptr": "*fp16"}, {"R": r, "C": c})
    k = (compile_ptx if arch == 90 else compile_sm100)(exchange_halves, sig, (2, 1, 1))
    ptx = k.asm["ptx"]
    # One copy of the staged block's bytes; rank 1's slice starts R rows (R * C * 2 bytes, whole
    # swizzle periods) into the tile, an addition to the tile's address.
    copies = re.findall(r"cp\.async\.bulk\.shared::cluster\.shared::cta\.mbarrier::complete_tx::"
                        r"bytes \[%r\d+\], \[%r\d+\], (\d+), \[%r\d+\];", ptx)
    assert copies == [str(r * c * 2)], ptx
    assert re.search(r"add\.s32 %r\d+, %r\d+, " + str(r * c * 2) + ";", ptx), ptx
    assert k.asm["cubin"]


@ww.jit
def copy_into_columns(out_ptr):
    tile = tlx.local_alloc((64, 64), tl.float16, 1)
    half = tlx.local_alloc((128, 32), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_copy(tlx.local_slice(tile[0], [0, 0], [64, 32]),
                                tlx.local_slice(half[0], [0, 0], [64, 32]), 1, bars[0])


@ww.jit
def copy_between_swizzles(out_ptr):
    wide = tlx.local_alloc((64, 64), tl.float16, 1)
    narrow = tlx.local_alloc((128, 32), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.async_remote_shmem_copy(wide[0], narrow[0], 1, bars[0])


@pytest.mark.parametrize("kernel,what", [
    (copy_into_columns, r"dst buffer<1x64x32xfp16, smem> is not one contiguous range of shared memory"),
    (copy_between_swizzles, r"are laid out differently in shared memory")])
def test_bulk_copies_that_would_scatter_elements_are_refused(kernel, what):
    with pytest.raises(ww.CompilationError, match=r"test_tlx_clusters_nd\.py:\d+:\d+.*" + what):
        compile_ptx(kernel, ({"out_ptr": "*fp16"}, {}), (2, 1, 1))


@ww.jit
def swap_after_delay(x_ptr, y_ptr):
    """Cluster of 2: each CTA writes -1 into its own slot, rank 1 after a nanosleep; after a
    cluster barrier each stores its value into the peer's slot, then reads its own."""
    slots = tlx.local_alloc((1,), tl.float32, 2)
    rank = tlx.cluster_cta_rank()
    value = tl.load(x_ptr + rank + tl.arange(0, 1)) + (rank + 1) * 10
    if rank == 1:
        tl.inline_asm_elementwise("nanosleep.u32 1000; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)
    tlx.local_store(tlx.local_view(slots, rank), tl.full((1,), -1.0, tl.float32))
    tlx.cluster_barrier()
    tlx.remote_shmem_store(dst=tlx.local_view(slots, rank ^ 1), src=value, remote_cta_rank=rank ^ 1)
    tlx.cluster_barrier()
    tl.store(y_ptr + rank + tl.arange(0, 1), tlx.local_load(tlx.local_view(slots, rank)))


def test_remote_store_after_an_asm_delay():
    x = np.array([1.0, 2.0], np.float32)
    y = np.zeros(2, np.float32)
    swap_after_delay[(2,)](x, y, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(y, [22.0, 11.0])
    k = compile_ptx(swap_after_delay, ({"x_ptr": "*fp32", "y_ptr": "*fp32"}, {}), (2, 1, 1))
    assert "nanosleep.u32 1000;" in k.asm["ptx"] and k.asm["cubin"]


# ---- the same kernels on the GPU (tests/gpu/test_tlx_clusters_nd_gpu.py runs these) ----

def gpu_check_ranks(shape, grid):
    import torch

    out = torch.full(grid[::-1], -1, dtype=torch.int32, device="cuda")
    rank_map[grid](out, grid[0], grid[1], ctas_per_cga=shape)
    x, y, z = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    cx, cy, cz = shape
    expected = cx * cy * cz * 100 + (x % cx) + cx * ((y % cy) + cy * (z % cz))
    np.testing.assert_array_equal(out.cpu().numpy().transpose(2, 1, 0), expected)


def gpu_check_row_sums(c):
    import torch

    x = torch.randn(64, 128, device="cuda")
    out = torch.zeros(64, device="cuda")
    row_sums_over_y[(4, c)](x, out, N=128, ROWS=16, C=c, ctas_per_cga=(1, c, 1))
    torch.testing.assert_close(out, x.sum(dim=1), rtol=1e-5, atol=1e-4)


def gpu_check_bulk_copy():
    import torch

    x = torch.randn(256, device="cuda")
    out = torch.zeros(256, device="cuda")
    bulk_to_peer[(2, 2)](x, out, N=256, ctas_per_cga=(1, 2, 1))
    torch.testing.assert_close(out, 2 * x)


def gpu_check_exchange_halves():
    import torch

    for r, c in SLICE_SHAPES:
        x = torch.randn(2, 2, r, c, device="cuda").half()
        out = torch.zeros(2, 2 * r, c, dtype=torch.float16, device="cuda")
        exchange_halves[(2,)](x, out, R=r, C=c, ctas_per_cga=(2, 1, 1))
        np.testing.assert_array_equal(out.cpu().numpy(), exchanged(x.cpu().numpy()))


def gpu_check_multicast():
    import torch

    b = 16
    x = torch.arange(4 * b * b, dtype=torch.float32, device="cuda").reshape(4 * b, b)
    out = torch.full((4 * b, 4 * b), float("nan"), device="cuda")
    desc = ww.TensorDescriptor.from_tensor
    multicast_down_columns[(4, 4)](desc(x, [b, b]), desc(out, [b, b]), B=b,
                                   ctas_per_cga=(2, 2, 1))
    torch.testing.assert_close(out, x.repeat(1, 4))


def gpu_check_swap_after_delay():
    import torch

    x = torch.tensor([1.0, 2.0], device="cuda")
    y = torch.zeros(2, device="cuda")
    swap_after_delay[(2,)](x, y, ctas_per_cga=(2, 1, 1))
    assert y.tolist() == [22.0, 11.0], y
