"""asm["ttir"] / asm["ttgir"]: the Tile IR printed in the words of Triton's dialects (issue 16).
Triton and TLX users check their kernels' lowering by the op names there (an async copy, a TMA
load, a warp_specialize with its partitions); each test compiles a kernel of its own and reads
what that text says of the ops the compiler kept."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx
from warpweave.tools.tensor_descriptor import TensorDescriptor


def _ttir(compiled):
    """The kernel's TTIR, after checking that its TTGIR got layouts assigned."""
    text = compiled.asm["ttir"]
    assert "#linear" not in text and "#ttg.linear" not in text
    assert "no layouts assigned" not in compiled.asm["ttgir"]
    return text


@ww.jit
def _masked_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask) * 2.0, mask=mask)


def test_plain_kernel_prints_tt_and_arith_ops_with_mlir_names():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    k = _masked_add[(2,)](x, x, out, 100, BLOCK=64)
    np.testing.assert_array_equal(out, 3 * x)
    ir = _ttir(k)
    assert ir.startswith("module attributes {") and 'ttg.target = "cuda:90"' in ir
    assert '"ttg.num-warps" = 4 : i32' in ir and '"ttg.threads-per-warp" = 32 : i32' in ir
    assert re.search(r"tt.func public @_masked_add\(%arg0: !tt.ptr<f32> "
                     r"\{tt.divisibility = 16 : i32\}, .*%arg3: i32", ir)
    assert "%0 = tt.get_program_id x : i32" in ir
    assert "%c64_i32 = arith.constant 64 : i32" in ir
    assert "tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>" in ir
    assert re.search(r"arith.cmpi slt, %\d+, %\d+ : tensor<64xi32>", ir)
    assert re.search(r"%cst = arith.constant dense<2.000000e\+00> : tensor<64xf32>", ir)
    assert ir.count("tt.load") == 2 and ir.count("tt.store") == 1
    assert ir.count("arith.mulf") == 1 and ir.count("arith.addf") == 1
    assert "arith.addi" in ir and "tt.addptr" in ir and ir.rstrip().endswith("}")
    # The word "kernel" appears nowhere but in kernels' own names (TLX's tests count it).
    assert "kernel" not in ir


@ww.jit
def _async_copies(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 3)
    tlx.async_load(x_ptr + offs, bufs[0], mask=mask)
    tlx.async_load(y_ptr + offs, bufs[1], mask=mask)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    a = tlx.local_load(bufs[0])
    b = tlx.local_load(bufs[1])
    tlx.local_store(bufs[2], a - b)
    tl.store(out_ptr + offs, tlx.local_load(bufs[2]), mask=mask)


def test_tlx_buffers_and_cp_async_print_as_ttg_ops():
    x = np.arange(64, dtype=np.float32)
    y = np.ones_like(x)
    out = np.zeros_like(x)
    k = _async_copies[(1,)](x, y, out, 64, BLOCK=64)
    np.testing.assert_array_equal(out, x - 1)
    ir = _ttir(k)
    assert ir.count("ttg.local_alloc") == 1
    assert "ttg.local_alloc : () -> !ttg.memdesc<3x64xf32, #smem, mutable>" in ir
    # One index per buffer used (the same view is one value), as after Triton's CSE.
    assert ir.count("ttg.memdesc_index") == 3
    assert re.search(r"ttg.memdesc_index %\d+\[%c0_i32\] : !ttg.memdesc<3x64xf32, #smem, mutable>"
                     r" -> !ttg.memdesc<64xf32, #smem, mutable>", ir)
    assert ir.count("ttg.async_copy_global_to_local") == 2 and " mask %" in ir
    assert ir.count("ttg.async_commit_group") == 1
    assert ir.count("ttg.async_wait {num = 0 : i32}") == 1
    assert ir.count("ttg.local_load") == 3 and ir.count("ttg.local_store") == 1


@ww.jit
def _barrier_rounds(x_ptr, z_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    x = tl.load(x_ptr + offs)
    tlx.barrier_arrive(bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.barrier_arrive(bars[1])
    tlx.barrier_wait(bars[1], 0)
    tl.store(z_ptr + offs, x * x)


def test_barriers_print_one_init_per_barrier_and_their_waits_and_arrives():
    x = np.arange(32, dtype=np.float32)
    z = np.zeros_like(x)
    ir = _ttir(_barrier_rounds[(1,)](x, z, N=32))
    np.testing.assert_array_equal(z, x * x)
    assert ir.count("ttng.init_barrier") == 2 and "[1], 1 : !ttg.memdesc<2xi64" in ir
    assert ir.count("ttng.wait_barrier") == 2 and ir.count("ttng.arrive_barrier") == 2
    assert "ttng.barrier_expect" not in ir


@ww.jit
def _tasks(x_ptr, a_ptr, out_ptr, side_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    with tlx.async_tasks():
        with tlx.async_task("default", registers=80):
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)
        with tlx.async_task(num_warps=2, registers=40, warp_group_start_id=8, replicate=2):
            r = tlx.async_task_replica_id()
            tl.store(side_ptr + r * N + offs, tl.load(a_ptr + offs) - r)
        with tlx.async_task(num_warps=1, registers=24, warp_group_start_id=12):
            tl.store(side_ptr + 2 * N + offs, tl.load(a_ptr + offs) * 2)


def test_async_tasks_print_as_one_warp_specialize_with_partitions():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    side = np.zeros(48, np.float32)
    ir = _ttir(_tasks[(1,)](x, x, out, side, N=16, num_warps=4))
    np.testing.assert_array_equal(out, x + 1)
    np.testing.assert_array_equal(side, np.concatenate([x, x - 1, 2 * x]))
    assert ir.count("ttg.warp_specialize(") == 1
    head = re.search(r"ttg.warp_specialize\((.*)\) attributes \{(.*)\}\n", ir)
    assert head, ir
    # The default task's budget, each partition's and its first warp (a task's replicas one
    # after another: 8, 10).
    assert head.group(2) == ("defaultRequestedRegisters = 80 : i32, requestedRegisters = "
                             "array<i32: 40, 40, 24>, warpGroupStartIds = "
                             "array<i32: 8, 10, 12>")
    # Every partition takes the captured values as arguments and names its warps.
    parts = re.findall(r"partition(\d)\(([^\n]*)\) num_warps\((\d)\) \{", ir)
    assert [(p, w) for p, _, w in parts] == [("0", "2"), ("1", "2"), ("2", "1")]
    captured = len(head.group(1).split(", "))
    assert all(len(args.split(", ")) == captured for _, args, _ in parts)
    assert "default {" in ir and ir.count("ttg.warp_yield") == 1
    assert ir.count("ttg.warp_return") == 3
    # Inside a partition the captures are its own arguments.
    body0 = ir[ir.index("partition0("):ir.index("partition1(")]
    first_arg = re.search(r"partition0\((%arg\d+)", body0).group(1)
    assert first_arg in body0.split("\n", 1)[1]
    # Each replica is a partition of its own, its replica id a constant there.
    body1 = ir[ir.index("partition1("):ir.index("partition2(")]
    assert "dense<1.000000e+00>" in body1 and "dense<1.000000e+00>" not in body0


def test_replicas_of_the_default_task_are_partitions_after_it():
    @ww.jit
    def twice(out_ptr, N: tl.constexpr):
        with tlx.async_tasks():
            with tlx.async_task("default", replicate=2):
                r = tlx.async_task_replica_id()
                tl.store(out_ptr + r * N + tl.arange(0, N), tl.full((N,), 1.0, tl.float32) * r)
            with tlx.async_task(num_warps=1):
                tl.store(out_ptr + 2 * N + tl.arange(0, N), tl.full((N,), 7.0, tl.float32))

    out = np.zeros(48, np.float32)
    ir = _ttir(twice[(1,)](out, N=16, num_warps=4))
    np.testing.assert_array_equal(out, np.repeat([0.0, 1.0, 7.0], 16))
    assert re.findall(r"partition(\d)\([^\n]*\) num_warps\((\d)\)", ir) == [("0", "4"),
                                                                              ("1", "1")]
    assert "attributes {" not in ir.split("ttg.warp_specialize(", 1)[1].split("\n", 1)[0]


def test_a_lone_default_task_is_inlined():
    @ww.jit
    def lone(out_ptr, N: tl.constexpr):
        with tlx.async_tasks():
            with tlx.async_task("default"):
                tl.store(out_ptr + tl.arange(0, N), tl.arange(0, N))

    out = np.zeros(8, np.int32)
    ir = _ttir(lone[(1,)](out, N=8))
    np.testing.assert_array_equal(out, np.arange(8))
    assert "warp_specialize" not in ir and "tt.store" in ir


@ww.jit
def _tma_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 2)
    off_m = tl.program_id(0) * BM
    tlx.async_descriptor_prefetch_tensor(in_desc, [off_m, 0])
    tlx.async_descriptor_load(in_desc, buf[0], [off_m, 0], bar[0], eviction_policy="evict_first")
    tlx.barrier_wait(bar[0], 0)
    tlx.fence_async_shared()
    tlx.async_descriptor_store(out_desc, buf[0], [off_m, 0], eviction_policy="evict_last")
    tlx.async_descriptor_store_wait(0)


def test_tma_copies_print_as_ttng_tma_ops_with_their_eviction_policy():
    x = np.arange(64 * 32, dtype=np.float16).reshape(64, 32)
    y = np.zeros_like(x)
    ir = _ttir(_tma_copy[(2,)](TensorDescriptor.from_tensor(x, [32, 32]),
                                TensorDescriptor.from_tensor(y, [32, 32]), BM=32, BN=32))
    np.testing.assert_array_equal(y, x)
    assert ir.count("ttng.async_tma_copy_global_to_local") == 1
    assert ir.count("ttng.async_tma_copy_local_to_global") == 1
    # Triton's operand form: the descriptor indexed by the coordinates, then the buffer (and
    # the barrier for a load).
    assert re.search(r"ttng.async_tma_copy_global_to_local %arg0\[%\d+, %c0_i32\] %\d+, %\d+ ",
                     ir)
    assert re.search(r"ttng.async_tma_copy_local_to_global %arg1\[%\d+, %c0_i32\] %\d+ ", ir)
    assert "evictionPolicy = evict_first" in ir and "evictionPolicy = evict_last" in ir
    assert ir.count("ttng.async_tma_store_wait {pendings = 0 : i32}") == 1
    assert ir.count("ttng.fence_async_shared") == 1
    assert ir.count("ttng.async_tma_prefetch") == 1 and ir.count("ttng.barrier_expect") == 1
    assert "!tt.tensordesc<tensor<32x32xf16>>" in ir


def test_in_kernel_descriptors_print_scratch_map_and_reinterpret():
    @ww.jit
    def made(in_ptr, out_ptr, n, B: tl.constexpr):
        slots = tlx.allocate_tensor_descriptor(num=2)
        tlx.make_tensor_descriptor(desc_ptr=slots[0], base=in_ptr, shape=[n], strides=[1],
                                   block_shape=[B])
        tlx.make_tensor_descriptor(desc_ptr=slots[1], base=out_ptr, shape=[n], strides=[1],
                                   block_shape=[B])
        src = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[0], block_shape=[B],
                                                dtype=tl.int16)
        dst = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[1], block_shape=[B],
                                                dtype=tl.int16)
        off = tl.program_id(0) * B
        dst.store([off], src.load([off]))

    ww.set_allocator(lambda size, align, stream: np.zeros(size, np.int8))
    x = np.arange(128, dtype=np.int16)
    y = np.zeros_like(x)
    ir = _ttir(made[(2,)](x, y, 128, B=64))
    np.testing.assert_array_equal(y, x)
    # One scratch allocation for the two slots; each map written there and read back.
    assert ir.count("ttg.global_scratch_alloc") == 1
    assert ir.count("ttng.tensormap_create") == 2
    assert ir.count("ttng.reinterpret_tensor_descriptor") == 2
    assert "tt.descriptor_load" in ir and "tt.descriptor_store" in ir


def test_fences_print_with_their_scope():
    @ww.jit
    def fenced(p):
        tl.atomic_add(p, 1, sem="release", scope="gpu")
        tlx.fence("gpu")
        tlx.fence("sys")
        tl.atomic_add(p + 1, 1, sem="acquire", scope="sys")

    p = np.zeros(2, np.int32)
    ir = _ttir(fenced[(1,)](p, num_warps=1))
    assert 'ttng.fence {scope = "gpu"}' in ir and 'ttng.fence {scope = "sys"}' in ir
    assert ir.count("tt.atomic_rmw") == 2


def test_clusters_print_their_shape_rank_barriers_and_remote_arrives():
    @ww.jit
    def pair(out_ptr):
        bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
        tlx.fence_mbarrier_init_cluster()
        rank = tlx.cluster_cta_rank()
        tlx.cluster_barrier()
        if rank == 0:
            tlx.barrier_arrive(bars[0], remote_cta_rank=1)
        if rank == 1:
            tlx.barrier_wait(bars[0], 0)
        tl.store(out_ptr + rank, rank + 10)

    out = np.zeros(2, np.int32)
    ir = _ttir(pair[(2,)](out, ctas_per_cga=(2, 1, 1)))
    np.testing.assert_array_equal(out, [10, 11])
    assert ('"ttg.cluster-dim-x" = 2 : i32, "ttg.cluster-dim-y" = 1 : i32, '
            '"ttg.cluster-dim-z" = 1 : i32') in ir
    assert ir.count("nvg.cluster_id") == 1
    assert ir.count("ttng.fence_mbarrier_init_release_cluster") == 1
    assert ir.count("ttng.cluster_arrive") == 1 and ir.count("ttng.cluster_wait") == 1
    # The peer's barrier mapped, then arrived on.
    mapped = re.search(r"(%\d+) = ttng.map_to_remote_buffer", ir)
    assert mapped and f"ttng.arrive_barrier {mapped.group(1)}, 1" in ir


def test_control_flow_and_reductions_print_as_scf_and_generic_tt_reduce():
    @ww.jit
    def rows(x_ptr, out_ptr, K: tl.constexpr):
        acc = tl.zeros((8, 16), tl.float32)
        for k in range(0, K, 16):
            acc += tl.load(x_ptr + k + tl.arange(0, 8)[:, None] * K + tl.arange(0, 16)[None, :])
        s = tl.sum(acc, axis=1)
        if tl.program_id(0) == 0:
            s = s * 2
        tl.store(out_ptr + tl.arange(0, 8), s)

    x = np.arange(8 * 32, dtype=np.float32).reshape(8, 32)
    out = np.zeros(8, np.float32)
    ir = _ttir(rows[(1,)](x, out, K=32))
    np.testing.assert_allclose(out, 2 * x.sum(axis=1))
    assert re.search(r"scf.for %arg\d+ = %c0_i32 to %c32_i32 step %c16_i32 "
                     r"iter_args\(%arg\d+ = %cst\) -> \(tensor<8x16xf32>\) : i32 \{", ir)
    assert ir.count('"tt.reduce"(') == 1 and "axis = 1" in ir
    assert "scf.if" in ir and "scf.yield" in ir


def test_shared_layout_objects_print_as_triton_shared_encodings(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")  # no tensor argument says where to run
    @ww.jit
    def pinned(layout: tl.constexpr):
        buf = tlx.local_alloc((64, 64), tl.float16, 2, layout=layout)
        tlx.local_store(buf[1], tl.zeros((64, 64), tl.float16))

    swz = _ttir(pinned.warmup(tlx.swizzled_layout(3, 0, 6, order=[1, 0]), grid=(1,)))
    assert ("!ttg.memdesc<2x64x64xf16, #ttg.swizzled_shared<{vec = 1, perPhase = 1, "
            "maxPhase = 8, order = [1, 0]}>, #smem, mutable>") in swz
    pad = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [64, 64], [1, 0])
    assert "#ttg.padded_shared<[64:+8]>" in _ttir(pinned.warmup(pad, grid=(1,)))


def test_the_stages_survive_an_ast_compile_for_blackwell():
    from warpweave.backends.compiler import GPUTarget
    from warpweave.compiler import ASTSource

    src = ASTSource(fn=_masked_add, signature={"x_ptr": "*fp32", "y_ptr": "*fp32",
                                               "out_ptr": "*fp32", "n": "i32",
                                               "BLOCK": "constexpr"}, constexprs={"BLOCK": 32})
    try:
        k = ww.compile(src, target=GPUTarget("cuda", 100, 32))
    except Exception as e:  # noqa: BLE001 - no ptxas on this machine
        pytest.skip(f"no sm_100a compile here: {e}")
    assert 'ttg.target = "cuda:100"' in k.asm["ttgir"] and "tt.load" in k.asm["ttir"]


# ------------------------------------------------------------------------------------------------
# TTGIR: the layouts code generation uses, in Triton's attribute syntax
# ------------------------------------------------------------------------------------------------


def _linear_aliases(ttgir):
    """{alias: {in_dim: [basis vectors]}} of the #linearN definitions at the top of a TTGIR."""
    out = {}
    for name, body in re.findall(r"^(#linear\d*) = #ttg.linear<\{(.*)\}>$", ttgir, re.M):
        dims = {}
        for dim, bases in re.findall(r"(\w+) = \[((?:\[[^\]]*\](?:, )?)*)\]", body):
            dims[dim] = [[int(c) for c in b.split(", ")] for b in re.findall(r"\[([^\]]*)\]", bases)]
        out[name] = dims
    return out


def _positions(dims, rank):
    """Every (register, lane, warp) combination's tensor coordinates: the XOR of the bases of the
    set bits, as a linear layout maps them."""
    from itertools import product

    bases = [b for d in ("register", "lane", "warp", "block") for b in dims.get(d, [])]
    seen = set()
    for bits in product([0, 1], repeat=len(bases)):
        c = [0] * rank
        for on, b in zip(bits, bases):
            if on:
                c = [x ^ y for x, y in zip(c, b)]
        seen.add(tuple(c))
    return seen


@ww.jit
def _transpose_add(x_ptr, y_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + r[None, :])
    tl.store(y_ptr + r[:, None] * N + r[None, :], tl.trans(x) + tl.sum(x, axis=0)[:, None])


def test_ttgir_gives_every_tensor_a_register_layout_that_covers_its_shape():
    x = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    y = np.zeros_like(x)
    k = _transpose_add[(1,)](x, y, N=32)
    np.testing.assert_array_equal(y, x.T + x.sum(axis=0)[:, None])
    ttgir = k.asm["ttgir"]
    aliases = _linear_aliases(ttgir)
    assert aliases and "#smem = #ttg.shared_memory" in ttgir
    # Every tensor type names one of the aliases defined above the module.
    tensors = re.findall(r"tensor<([0-9x]+)x(?:!tt\.ptr<\w+>|\w+)(?:, (#linear\d*))?>", ttgir)
    assert tensors and all(enc in aliases for _, enc in tensors)
    # A layout maps the 128 threads' registers onto exactly the elements of its tensor's shape.
    for shape, enc in tensors:
        dims = [int(d) for d in shape.split("x")]
        want = {tuple(int(i) for i in idx) for idx in np.ndindex(*dims)}
        assert _positions(aliases[enc], len(dims)) == want, (shape, enc)
    # The transpose's result is stored in the load's layout: one conversion there, from one
    # alias to another.
    cvt = re.findall(r"ttg.convert_layout %\d+ : tensor<32x32xf32, (#linear\d*)> -> "
                     r"tensor<32x32xf32, (#linear\d*)>", ttgir)
    assert cvt and all(a != b for a, b in cvt)
    # TTIR has the same ops without the layouts or the conversions.
    ttir = k.asm["ttir"]
    assert "#linear" not in ttir and "convert_layout" not in ttir and '"tt.reduce"' in ttir


def test_ttgir_shows_the_nvmma_swizzle_and_the_wgmma_accumulator_layout():
    @ww.jit
    def one_mma(a_desc, b_desc, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        a = tlx.local_alloc((BM, BK), tl.float16, 1)
        b = tlx.local_alloc((BK, BN), tl.float16, 1)
        bar = tlx.alloc_barriers(num_barriers=1)
        tlx.barrier_expect_bytes(bar[0], (BM * BK + BK * BN) * 2)
        tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
        tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
        tlx.barrier_wait(bar[0], 0)
        acc = tlx.async_dot_wait(0, tlx.async_dot(a[0], b[0]))
        tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], acc)

    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    k = one_mma[(1,)](TensorDescriptor.from_tensor(a, [64, 64]),
                      TensorDescriptor.from_tensor(b, [64, 64]), c, BM=64, BN=64, BK=64)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))
    ttgir = k.asm["ttgir"]
    nvmma = ("!ttg.memdesc<1x64x64xf16, #ttg.nvmma_shared<{swizzlingByteWidth = 128, "
             "transposed = false, elementBitWidth = 16}>, #smem, mutable>")
    assert ttgir.count(f"ttg.local_alloc : () -> {nvmma}") == 2
    acc = re.search(r"ttng.warp_group_dot_wait %\d+ \{pendings = 0 : i32\} : "
                    r"\(tensor<64x64xf32, (#linear\d*)>\)", ttgir).group(1)
    # wgmma's m64 accumulator: a thread's pairs of columns, 8-row halves, four warps of 16 rows.
    assert _linear_aliases(ttgir)[acc] == {
        "register": [[0, 1], [8, 0], [0, 8], [0, 16], [0, 32]],
        "lane": [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]],
        "warp": [[16, 0], [32, 0]], "block": []}


def test_tensor_memory_reuse_prints_as_a_reinterpreted_view():
    @ww.jit
    def overlay(out_ptr, N: tl.constexpr):
        acc = tlx.local_alloc((128, N), tl.float32, 1, tlx.storage_kind.tmem)
        half = tlx.local_alloc((128, N), tl.float16, 1, tlx.storage_kind.tmem, reuse=acc)
        tlx.local_store(half[0], tl.full((128, N), 2.0, tl.float16))
        x = tlx.local_load(half[0])
        tl.store(out_ptr + tl.arange(0, 128)[:, None] * N + tl.arange(0, N)[None, :], x)

    out = np.zeros((128, 32), np.float16)
    ir = _ttir(overlay[(1,)](out, N=32))
    np.testing.assert_array_equal(out, 2.0)
    # One allocation of columns; the fp16 tiles are a view of them, as TLX lowers reuse=.
    assert ir.count("ttng.tmem_alloc") == 1
    assert re.search(r"ttg.memdesc_reinterpret %\d+ : !ttg.memdesc<1x128x32xf32, "
                     r"#ttng.tensor_memory, mutable> -> !ttg.memdesc<1x128x32xf16", ir)
    assert ir.count("ttng.tmem_store") == 1 and ir.count("ttng.tmem_load") == 1


def test_tcgen05_mmas_print_triton_operand_order_with_use_d_and_pred():
    @ww.jit
    def twice(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
        rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
        a = tlx.local_alloc((M, K), tl.float16, 1)
        b = tlx.local_alloc((K, N), tl.float16, 1)
        tlx.local_store(a[0], tl.load(a_ptr + rm[:, None] * K + rk[None, :]))
        tlx.local_store(b[0], tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
        acc = tlx.local_alloc((M, N), tl.float32, 1, tlx.storage_kind.tmem)
        bars = tlx.alloc_barriers(num_barriers=2)
        tlx.async_dot(a[0], b[0], acc[0], use_acc=False, mBarriers=[bars[0]])
        tlx.barrier_wait(bars[0], 0)
        tlx.async_dot(a[0], b[0], acc[0], mBarriers=[bars[1]])
        tlx.barrier_wait(bars[1], 0)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], tlx.local_load(acc[0]))

    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (128, 32)).astype(np.float16)
    b = rng.integers(-2, 3, (32, 64)).astype(np.float16)
    c = np.zeros((128, 64), np.float32)
    ir = _ttir(twice[(1,)](a, b, c, M=128, N=64, K=32))
    np.testing.assert_array_equal(c, 2 * (a.astype(np.float32) @ b.astype(np.float32)))
    mmas = [line for line in ir.splitlines() if "ttng.tc_gen5_mma " in line]
    assert len(mmas) == 2
    # a, b, acc, use_d, pred, barrier: the first overwrites (use_d false), the second
    # accumulates; neither is predicated (pred true, a constant the view defines).
    assert re.search(r"tc_gen5_mma %\d+, %\d+, %\d+, %false, %true(_\d+)?, %\d+ ", mmas[0])
    assert re.search(r"tc_gen5_mma %\d+, %\d+, %\d+, %true(_\d+)?, %true(_\d+)?, %\d+ ", mmas[1])
    assert re.search(r"%true(_\d+)? = arith.constant true", ir)


def test_an_interpreted_kernel_speaks_for_the_device_it_stands_in_for(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_100a")
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    k = _masked_add[(1,)](x, x, out, 64, BLOCK=64)
    assert 'ttg.target = "cuda:100"' in k.asm["ttgir"]
    assert 'ttg.target = "cuda:100"' in k.asm["ttir"]
