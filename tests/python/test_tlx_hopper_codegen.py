"""The Hopper TLX kernels (python/warpweave/ops/kernels/hopper) at their GPU configurations, compiled on the CPU: TMA
copies of rows wider than the 128-byte swizzle (split into column blocks, and the host box that
matches them), register budgets without spills, and the SASS that the issue asks for."""

import importlib
import re
import sys
from pathlib import Path

import pytest

import warpweave as ww

native_loader = importlib.import_module("warpweave._native_loader")
tensor_descriptor = importlib.import_module("warpweave.tensor_descriptor")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

ROOT = Path(__file__).resolve().parents[2]
HOPPER = ROOT / "python" / "warpweave" / "ops" / "kernels" / "hopper"
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


def compile_source(path, kernel, signature, num_warps=4, stage="cubin", num_ctas=1):
    """Compiles `kernel` of the file `path`; a library kernel (warpweave.ops.kernels) comes with
    the files its relative imports name and its module's globals, as @ww.jit compiles it."""
    path = Path(path)
    files, globals_ = [(str(path), path.read_text())], {}
    if path.is_relative_to(HOPPER.parent):
        module = importlib.import_module(
            ".".join(path.relative_to(ROOT / "python").with_suffix("").parts))
        env = getattr(module, kernel).environment()
        files, globals_ = env.files, env.globals
    return native_loader.native().compile(files, kernel, signature, globals_, target="sm_90a",
                                          num_warps=num_warps, stage=stage, num_ctas=num_ctas)


def tma_kernel(tmp_path, rows, cols, dtype="fp16"):
    """A kernel that TMA-loads one [rows, cols] tile into a TLX buffer and TMA-stores it back."""
    src = tmp_path / "tma_round_trip.py"
    src.write_text(
        "import warpweave as ww\n"
        "import warpweave.language as tl\n"
        "from warpweave import tlx\n"
        "\n"
        "\n"
        "@ww.jit\n"
        "def tma_round_trip(in_desc, out_desc, row, col, ROWS: tl.constexpr,\n"
        "                   COLS: tl.constexpr):\n"
        "    dtype: tl.constexpr = tlx.dtype_of(in_desc)\n"
        "    buf = tlx.local_alloc((ROWS, COLS), dtype, 1)\n"
        "    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"
        "    tile = tlx.local_view(buf, 0)\n"
        "    full = tlx.local_view(bar, 0)\n"
        "    tlx.barrier_expect_bytes(full, ROWS * COLS * tlx.size_of(dtype))\n"
        "    tlx.async_descriptor_load(in_desc, tile, [row, col], full)\n"
        "    tlx.barrier_wait(full, 0)\n"
        "    tlx.async_descriptor_store(out_desc, tile, [row, col])\n"
        "    tlx.async_descriptor_store_wait(0)\n")
    sig = (f"in_desc:desc<{dtype},{rows}x{cols}>, out_desc:desc<{dtype},{rows}x{cols}>, "
           f"row:i32, col:i32, ROWS={rows}, COLS={cols}")
    return compile_source(src, "tma_round_trip", sig)


def copies(ptx, opcode):
    """The operand text of each `opcode` instruction in `ptx`."""
    return re.findall(re.escape(opcode) + r"\s+([^;]*);", ptx)


def defining_add(ptx, reg):
    """The constant that `reg` was computed as (add.s32 reg, base, constant), or None."""
    m = re.search(r"add\.s32\s+" + re.escape(reg) + r",\s*%\w+,\s*(-?\d+);", ptx)
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("rows,cols,dtype,swizzle", [
    (64, 128, "fp16", 128), (128, 256, "bf16", 128), (32, 64, "fp32", 128)])
def test_wide_rows_copy_one_column_block_per_swizzle_span(tmp_path, rows, cols, dtype, swizzle):
    k = tma_kernel(tmp_path, rows, cols, dtype)
    elem = {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]
    blocks = cols * elem // swizzle
    loads, stores = copies(k.ptx, TMA_LOAD), copies(k.ptx, TMA_STORE)
    assert len(loads) == blocks and len(stores) == blocks, k.ptx
    # One bulk group per store op, whatever the number of column copies.
    assert k.ptx.count("cp.async.bulk.commit_group") == 1
    box_cols = swizzle // elem
    for ops in (loads, stores):
        # Block c lands at c * rows * swizzle bytes into the buffer and reads columns from
        # col + c * box_cols: every copy but the first adds those constants.
        col_offsets = [0]
        for text in ops[1:]:
            coords = re.search(r"\{([^}]*)\}", text).group(1).split(",")
            col_offsets.append(defining_add(k.ptx, coords[0].strip()))
        assert col_offsets == [c * box_cols for c in range(blocks)], (ops, col_offsets)
    # Both descriptors are declared with the buffer's swizzle, so the host encodes a box one
    # swizzle span wide (see tensor_descriptor.box_shape).
    assert [p[0] for p in k.params[:2]] == ["in_desc", "out_desc"]
    for p in k.params[:2]:
        assert f"swizzle={swizzle}" in p[1], p
    assert k.spill_bytes == 0


def test_column_blocks_sit_one_swizzle_block_apart_in_shared_memory(tmp_path):
    # 64 rows x 128 fp16: two 64x64 blocks of 64 * 128 = 8192 bytes each.
    k = tma_kernel(tmp_path, 64, 128)
    assert re.search(r"add\.s32\s+%\w+,\s*%\w+,\s*8192;", k.ptx), k.ptx
    k = tma_kernel(tmp_path, 128, 256, "bf16")  # four blocks of 128 * 128 = 16384 bytes
    for offset in (16384, 32768, 49152):
        assert re.search(r"add\.s32\s+%\w+,\s*%\w+,\s*" + str(offset) + ";", k.ptx), offset


def test_narrow_rows_stay_one_copy(tmp_path):
    k = tma_kernel(tmp_path, 64, 64)
    assert len(copies(k.ptx, TMA_LOAD)) == 1 and len(copies(k.ptx, TMA_STORE)) == 1


@pytest.mark.parametrize("block,dtype,swizzle,box", [
    ([128, 128], "fp16", 128, [128, 64]), ([64, 256], "bf16", 128, [64, 64]),
    ([64, 64], "fp16", 128, [64, 64]), ([128, 128], "fp16", 0, [128, 128]),
    ([8, 64], "fp32", 128, [8, 32]), ([16, 32], "fp16", 64, [16, 32])])
def test_host_box_is_one_swizzle_span_wide(block, dtype, swizzle, box):
    assert tensor_descriptor.box_shape(block, dtype, swizzle) == box


# ------------------------------------------------------------------------------------------------
# The kernels at the GPU configurations of warpweave.ops
# ------------------------------------------------------------------------------------------------

GEMM_WS = ("gemm_ws.py", "gemm_ws_kernel",
           "a_desc:desc<fp16,64x64>, b_desc:desc<fp16,64x256>, c_desc:desc<fp16,64x64>, M:i32, "
           "N:i32, K:i32, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4, "
           "NUM_SMS=132, SMEM_EPILOGUE=1, EPI_SUBTILE=4", 4)
GEMM_PINGPONG = ("gemm_ws_pingpong.py", "gemm_ws_pingpong_kernel",
                 "a_desc:desc<fp16,128x64>, b_desc:desc<fp16,64x128>, "
                 "c_desc:desc<fp16,128x128>, M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=128, "
                 "BLOCK_K=64, GROUP_M=8, "
                 "NUM_STAGES=4, NUM_SMS=132", 4)
GEMM_PIPELINED = ("gemm_pipelined.py", "gemm_pipelined_kernel",
                  "a_desc:desc<bf16,128x64>, b_desc:desc<bf16,64x256>, "
                  "c_desc:desc<bf16,128x256>, M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=256, "
                  "BLOCK_K=64, GROUP_M=8, NUM_STAGES=3", 8)

# Tutorial 09's kernels with warp_specialize=True, warp-specialized by the compiler itself
# (transforms/WarpSpecialize.cpp): a TMA producer warp and the wgmma consumers.
AUTO_WS = ROOT / "tests" / "python" / "auto_ws_kernels.py"
TUTORIAL09_TMA_WS = (AUTO_WS, "tma_gemm_ws",
                     "a_desc:desc<fp16,128x64>, b_desc:desc<fp16,256x64>, "
                     "c_desc:desc<fp16,128x256>, M:i32, N:i32, K:i32, BLOCK_SIZE_M=128, "
                     "BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, WARP_SPECIALIZE=1", 8)
TUTORIAL09_TMA_PERSISTENT_WS = (AUTO_WS, "tma_persistent_ws",
                                "a_desc:desc<fp16,128x64>, b_desc:desc<fp16,128x64>, "
                                "c_desc:desc<fp16,128x64>, M:i32, N:i32, K:i32, "
                                "BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, "
                                "GROUP_SIZE_M=8, EPILOGUE_SUBTILE=1, NUM_SMS=132, "
                                "WARP_SPECIALIZE=1", 4)
TUTORIAL09_DESCRIPTOR_PERSISTENT_WS = (AUTO_WS, "descriptor_persistent_ws",
                                       "a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp16:16, "
                                       "M:i32:16, N:i32:16, K:i32:16, BLOCK_SIZE_M=128, "
                                       "BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, "
                                       "EPILOGUE_SUBTILE=1, NUM_SMS=132, WARP_SPECIALIZE=1", 8)


def attention(head_dim, causal):
    d = head_dim
    return ("attention_ws.py", "attention_ws_kernel",
            f"q_desc:desc<fp16,64x{d}>, k_desc:desc<fp16,128x{d}>, v_desc:desc<fp16,128x{d}>, "
            f"o_desc:desc<fp16,64x{d}>, lse_ptr:*fp32:16, sm_scale:fp32, N_CTX:i32:16, "
            f"HEAD_DIM={d}, BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2, CAUSAL={int(causal)}", 4)


CONFIGS = {"gemm_ws": GEMM_WS, "gemm_pingpong": GEMM_PINGPONG, "gemm_pipelined": GEMM_PIPELINED,
           "attention_d128": attention(128, False), "attention_d128_causal": attention(128, True),
           "attention_d64": attention(64, False), "attention_d64_causal": attention(64, True),
           "tutorial09_tma_ws": TUTORIAL09_TMA_WS,
           "tutorial09_tma_persistent_ws": TUTORIAL09_TMA_PERSISTENT_WS,
           "tutorial09_descriptor_persistent_ws": TUTORIAL09_DESCRIPTOR_PERSISTENT_WS}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_hopper_kernels_compile_without_spills_to_the_expected_sass(name, sass):
    file, kernel, sig, warps = CONFIGS[name]
    k = compile_source(HOPPER / file, kernel, sig, num_warps=warps)
    assert k.spill_bytes == 0, k.ptx[:200]
    assert k.shared_bytes <= 232448  # what an sm_90 block may have
    code = sass(k.cubin)
    assert "HGMMA" in code
    assert "UTMALDG" in code
    assert "SYNCS" in code  # mbarrier waits and arrivals
    # Warp-specialized kernels set their tasks' registers; the pipelined GEMM has no tasks, nor
    # has tutorial 09's one-tile kernel, whose marked K loop the software pipeliner takes (one
    # tile per program measured faster pipelined than split; docs/status.md).
    if kernel not in ("gemm_pipelined_kernel", "tma_gemm_ws"):
        assert "USETMAXREG" in code
    else:
        assert "USETMAXREG" not in code
    if name.startswith("attention"):
        assert "UTMASTG" in code  # O leaves through the Q buffer with TMA
    print(f"{name}: {k.registers} registers, {k.shared_bytes} B shared, "
          f"{code.count('HGMMA')} HGMMA, {code.count('UTMALDG')} UTMALDG")


def test_wide_tiles_split_their_tma_copies():
    file, kernel, sig, warps = CONFIGS["gemm_ws"]
    ptx = compile_source(HOPPER / file, kernel, sig, num_warps=warps, stage="ptx").ptx
    # Per stage: two A halves (one 128-byte block each) and B's 512-byte rows in four blocks;
    # each consumer's C tile leaves in four 64-column chunks of one block each.
    assert len(copies(ptx, TMA_LOAD)) == 6
    assert len(copies(ptx, TMA_STORE)) == 2 * 4
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    file, kernel, sig, warps = CONFIGS["attention_d128"]
    ptx = compile_source(HOPPER / file, kernel, sig, num_warps=warps, stage="ptx").ptx
    # Q (two tiles, unrolled), K and V: two blocks each; O: two blocks.
    assert len(copies(ptx, TMA_LOAD)) == 8
    assert len(copies(ptx, TMA_STORE)) == 2 * 2  # each consumer replica stores its O tile


@pytest.mark.parametrize("name", list(CONFIGS))
def test_wgmma_pipelines_are_not_serialized(name, ptxas):
    # The accumulator of an async_dot is updated in place: copying it would read the registers
    # of a wgmma still in flight, and ptxas then serializes every wgmma (warning C7514).
    file, kernel, sig, warps = CONFIGS[name]
    ptx = compile_source(HOPPER / file, kernel, sig, num_warps=warps, stage="ptx").ptx
    log = ptxas(ptx, "sm_90a", verbose=True).log
    assert "C7514" not in log, log


@pytest.mark.parametrize("name", list(CONFIGS))
def test_no_barrier_follows_the_same_barrier(name):
    # The threads that just met have nothing more to wait for: a TMA store wait's barrier right
    # before a local_store's own had written `bar.sync 15, 128` twice in the epilogues.
    file, kernel, sig, warps = CONFIGS[name]
    ptx = compile_source(HOPPER / file, kernel, sig, num_warps=warps, stage="ptx").ptx
    lines = [ln.strip() for ln in ptx.splitlines() if not ln.strip().startswith(".loc")]
    twice = [a for a, b in zip(lines, lines[1:]) if a.startswith("bar.sync") and a == b]
    assert not twice, twice


MULTICAST = Path(__file__).resolve().parent / "tlx_multicast_kernels.py"


@pytest.mark.parametrize("cols,blocks", [(64, 1), (128, 2)])
def test_multicast_loads_name_the_cluster_and_its_cta_mask(cols, blocks):
    sig = (f"in_desc:desc<fp16,64x{cols}>, out_desc:desc<fp16,64x{cols}>, HALF=64, "
           f"COLS={cols}")
    k = compile_source(MULTICAST, "multicast_halves", sig, num_ctas=2)
    loads = copies(k.ptx, TMA_LOAD + ".multicast::cluster")
    assert len(loads) == blocks, k.ptx
    # The CTA mask (ranks 0 and 1) is the copy's last operand.
    mask = loads[0].rsplit(",", 1)[1].strip()
    assert re.search(r"mov\.b16\s+" + re.escape(mask) + r",\s*3;", k.ptx), (mask, k.ptx)
    assert ".multicast::cluster" not in "".join(copies(k.ptx, TMA_STORE))
    assert k.spill_bytes == 0


def test_multicast_without_a_cluster_launch_is_a_located_error():
    sig = "in_desc:desc<fp16,64x64>, out_desc:desc<fp16,64x64>, HALF=64, COLS=64"
    with pytest.raises(ww.CompilationError, match=r"tlx_multicast_kernels\.py:\d+:\d+: .*"
                                                  r"multicast_targets needs a cluster launch"):
        compile_source(MULTICAST, "multicast_halves", sig, num_ctas=1)


def test_cluster_gemm_multicasts_a_and_releases_stages_in_both_ctas(tmp_path):
    file, kernel, sig, warps = GEMM_WS
    k = compile_source(HOPPER / file, kernel, sig + ", CLUSTER_N=2", num_warps=warps,
                       num_ctas=2)
    assert k.spill_bytes == 0
    # One A half per stage, multicast; B stays local (four 128-byte column blocks).
    assert len(copies(k.ptx, TMA_LOAD + ".multicast::cluster")) == 1
    assert len(copies(k.ptx, TMA_LOAD)) == 4
    # Each consumer releases a stage in its own CTA and, through mapa, in the peer.
    assert "mapa.shared::cluster.u32" in k.ptx
    assert "mbarrier.arrive.shared::cluster.b64" in k.ptx
    assert_no_cluster_scope_per_step(k.ptx)
    assert "barrier.cluster.wait" in k.ptx


def assert_no_cluster_scope_per_step(ptx):
    """A stage's release and the producer's wait take PTX's default semantics (Triton's
    lowering, CUTLASS's pipelines): at cluster scope each arrive became MEMBAR.ALL.GPU + arrive
    and each wait try_wait + CCTL.IVALL in the SASS, 2.7x the kernel's time on an H100."""
    assert ".release.cluster.shared::cluster" not in ptx
    assert "try_wait.parity.acquire.cluster" not in ptx


def test_cluster_m_gemm_multicasts_b_column_halves():
    file, kernel, sig, warps = GEMM_WS
    sig = sig.replace("b_desc:desc<fp16,64x256>", "b_desc:desc<fp16,64x128>")
    k = compile_source(HOPPER / file, kernel, sig + ", CLUSTER_M=2", num_warps=warps,
                       num_ctas=2)
    assert k.spill_bytes == 0
    # A's two halves stay local; B's 128-column half (two 128-byte column blocks) is multicast,
    # from one branch per rank (slice offsets are compile-time constants).
    assert len(copies(k.ptx, TMA_LOAD + ".multicast::cluster")) == 2 * 2
    assert len(copies(k.ptx, TMA_LOAD)) == 2
    assert "mbarrier.arrive.shared::cluster.b64" in k.ptx
    assert_no_cluster_scope_per_step(k.ptx)
    assert "barrier.cluster.wait" in k.ptx


def test_chunked_epilogue_leaves_room_for_four_stages():
    file, kernel, sig, warps = GEMM_WS
    assert "NUM_STAGES=4" in sig and "EPI_SUBTILE=4" in sig
    k = compile_source(HOPPER / file, kernel, sig, num_warps=warps)
    assert k.spill_bytes == 0
    # 4 stages of 16 + 32 KB and 4 chunk buffers of 64x64 halves, plus the barriers.
    assert 4 * 48 * 1024 + 4 * 8192 <= k.shared_bytes <= 232448
    # Each consumer replica: four chunks of one 128-byte block, each waiting until at most the
    # other buffer's store is pending; the column split costs no shuffles.
    assert len(copies(k.ptx, TMA_STORE)) == 2 * 4
    assert k.ptx.count("cp.async.bulk.wait_group.read 1;") == 2 * 4
    assert "shfl" not in k.ptx


CARRIED = Path(__file__).resolve().parent / "tlx_carried_mma_kernels.py"
CARRIED_SIG = "a_ptr:*fp16:16, b_ptr:*fp16:16, out_ptr:*fp32:16, N:i32, SPLIT:i32, BLOCK=64"


def test_a_product_carried_in_flight_across_loops_is_never_copied(ptxas):
    # The product is issued into the registers of the value the wait returned (read before, dead
    # after) and the second loop carries on the first loop's registers: no copy reads a wgmma's
    # registers in flight, which ptxas would answer by serializing every wgmma (C7514).
    ptx = compile_source(CARRIED, "carried_scores", CARRIED_SIG, stage="ptx").ptx
    assert ptx.count("wgmma.mma_async") == 3 * 4  # three issues of four k-steps
    issued = [set(m.split(", ")) for m in re.findall(r"wgmma\.mma_async\S*\s+\{([^}]*)\}", ptx)]
    assert all(regs == issued[0] for regs in issued), "each issue writes new registers"
    copied = set(re.findall(r"mov\.f32\s+%f\d+,\s*(%f\d+);", ptx))
    assert not copied & issued[0], sorted(copied & issued[0])
    log = ptxas(ptx, "sm_90a", verbose=True).log
    assert "C7514" not in log, log


@pytest.mark.parametrize("n,split", [(1, 0), (3, 1), (4, 4), (5, 2)])
def test_a_product_carried_in_flight_across_loops_runs_in_the_interpreter(n, split):
    import importlib.util

    import numpy as np
    spec = importlib.util.spec_from_file_location("tlx_carried_mma_kernels", CARRIED)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    b = rng.integers(-2, 3, (64, 64)).astype(np.float16)
    out = np.full((64, 64), np.nan, dtype=np.float32)
    kernels.carried_scores[(1,)](a, b, out, n, split, BLOCK=64)  # NumPy arrays: the interpreter
    np.testing.assert_array_equal(out, (n + 1) * (a.astype(np.float32) @ b.astype(np.float32)))


def test_ptxas_wgmma_performance_notes_become_performance_warnings(tmp_path, monkeypatch,
                                                                   requires_ptxas):
    # Reading a product before its wait: ptxas injects the wait itself (C7517), which the user
    # should hear of when the kernel compiles; a kernel without such a note compiles silently.
    import warnings

    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")  # the note comes with a compile

    from warpweave.errors import PerformanceWarning
    path = tmp_path / "unwaited.py"
    path.write_text(
        "import warpweave as ww\nimport warpweave.language as tl\nfrom warpweave import tlx\n\n\n"
        "@ww.jit\ndef unwaited(a_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    rows = tl.arange(0, BLOCK)\n"
        "    offs = rows[:, None] * BLOCK + rows[None, :]\n"
        "    a = tlx.local_view(tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1), 0)\n"
        "    tlx.local_store(a, tl.load(a_ptr + offs))\n"
        "    tlx.fence_async_shared()\n"
        "    s = tlx.async_dot(a, a)\n"
        "    t = s * 2.0\n"
        "    s = tlx.async_dot_wait(0, tlx.async_dot(a, a, s))\n"
        "    tl.store(out_ptr + offs, s + t)\n")
    spec = importlib.util.spec_from_file_location("unwaited", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import numpy as np
    a, out = np.zeros((64, 64), np.float16), np.zeros((64, 64), np.float32)

    def compile_for_sm90a(kernel, *args, **meta):
        values = kernel.bind(args, meta)
        kernel.compile_for(values, False, kernel._options(4, None, None, None), target="sm_90a")

    with pytest.warns(PerformanceWarning, match=r"kernel 'unwaited': ptxas C7517: .*wait"):
        compile_for_sm90a(module.unwaited, a, out, BLOCK=64)
    spec = importlib.util.spec_from_file_location("tlx_carried_mma_kernels", CARRIED)
    carried = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(carried)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        compile_for_sm90a(carried.carried_scores, a, a, out, 3, 1, BLOCK=64)


def test_consecutive_stage_releases_meet_once():
    # A consumer releasing its A stage and its B stage (two barrier_arrive in a row, one arrival
    # per task each) meets its warp group once: the second arrive follows the first's meeting
    # with nothing done in between, so it needs no bar.sync of its own.
    import numpy as np

    import hopper_gemm_kernels as hk

    x = np.zeros((1024, 1024), np.float16)
    descs = [ww.TensorDescriptor.from_tensor(x, block) for block in ([64, 64], [64, 256], [64, 256])]
    values = hk.ws_gemm.bind((*descs, 1024, 1024, 1024),
                             dict(BM=128, BN=256, BK=64, NUM_STAGES=3, A_ROW_MAJOR=True,
                                  B_ROW_MAJOR=True, NUM_CTAS=1, CONSUMERS=2))
    ptx = hk.ws_gemm.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx
    lines = [line.strip() for line in ptx.splitlines() if not line.strip().startswith(".loc")]
    arrives = [i for i, line in enumerate(lines)
               if re.fullmatch(r"@%p\d+ mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];", line)]
    pairs = [(i, j) for i, j in zip(arrives, arrives[1:]) if j - i <= 5]
    assert pairs, "\n".join(lines[arrives[0] - 5:arrives[0] + 5])
    for i, j in pairs:
        assert not any(line.startswith("bar.sync") for line in lines[i:j])
        assert any(re.match(r"bar\.sync \d+, 128;", line) for line in lines[i - 4:i])
