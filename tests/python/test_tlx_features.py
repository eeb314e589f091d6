"""TLX views (local_slice, local_reinterpret, local_trans read by local_load), clusters (rank, size,
remote barrier arrive, cluster_barrier), async-task replica ids and the tlx export list: the
interpreter against NumPy, and the PTX backend (PTX content, ptxas for sm_90a and sm_100a, clear
errors on sm_80 and for what it refuses)."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

from tlx_feature_kernels import (arrive_from_wide_task, arrive_once_per_task, replica_ids,
                                 reinterpret_load, reinterpret_store, slice_load,
                                 slice_of_3d_transposed, slice_store, trans_load, view_zoo)
from warpweave import tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_feature_kernels.py")


def compile_here(kernel, signature, target="sm_90a", num_warps=4, num_ctas=1, stage="cubin"):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target=target,
                                          num_warps=num_warps, num_ctas=num_ctas, stage=stage)


def compile_error(kernel, signature, target="sm_90a", num_ctas=1):
    with pytest.raises(Exception) as info:
        compile_here(kernel, signature, target=target, num_ctas=num_ctas)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# Interpreter against NumPy
# ---------------------------------------------------------------------------------------------


def rand16(rng, shape):
    return rng.standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (64, 64, 32, 0, 32, 64), (64, 64, 0, 32, 64, 32), (64, 128, 16, 64, 16, 64),
    (32, 64, 8, 48, 8, 16)])
def test_slice_load_interp(r, c, orow, ocol, sr, sc):
    x = rand16(np.random.default_rng(1), (r, c))
    out = np.zeros((sr, sc), np.float16)
    slice_load[(1,)](x, out, R=r, C=c, OR=orow, OC=ocol, SR=sr, SC=sc)
    np.testing.assert_array_equal(out, x[orow:orow + sr, ocol:ocol + sc])


def quadrants_swapped(x):
    r, c = x.shape[0] // 2, x.shape[1] // 2
    return np.block([[x[r:, c:], x[r:, :c]], [x[:r, c:], x[:r, :c]]])


@pytest.mark.parametrize("r,c", [(64, 128), (64, 64), (32, 32)])
def test_slice_store_interp(r, c):
    x = rand16(np.random.default_rng(2), (r, c))
    out = np.zeros_like(x)
    slice_store[(1,)](x, out, R=r, C=c, SR=r // 2, SC=c // 2)
    np.testing.assert_array_equal(out, quadrants_swapped(x))


def test_reinterpret_interp():
    x = np.random.default_rng(3).standard_normal((32, 32)).astype(np.float32)
    out = np.zeros((32, 64), np.int16)
    reinterpret_load[(1,)](x, out, R=32, C=32, R2=32, C2=64)
    np.testing.assert_array_equal(out, x.view(np.int16).reshape(32, 64))
    out2 = np.zeros((64, 32), np.int16)
    reinterpret_load[(1,)](x, out2, R=32, C=32, R2=64, C2=32)
    np.testing.assert_array_equal(out2, x.view(np.int16).reshape(64, 32))
    xi = np.random.default_rng(4).integers(-2**31, 2**31 - 1, (16, 32), dtype=np.int32)
    outi = np.zeros_like(xi)
    reinterpret_store[(1,)](xi.view(np.float32), outi, R=16, C=32)
    np.testing.assert_array_equal(outi, xi)


def test_trans_interp():
    x = rand16(np.random.default_rng(5), (32, 64))
    out = np.zeros((64, 32), np.float16)
    trans_load[(1,)](x, out, R=32, C=64)
    np.testing.assert_array_equal(out, x.T)


def test_view_zoo_interp():
    x = rand16(np.random.default_rng(6), (64, 64))
    row, wide, flat = np.zeros((1, 64), np.float16), np.zeros((64, 16)), np.zeros(8192, np.int8)
    view_zoo[(1,)](x, row, wide, flat, ROW=5)
    np.testing.assert_array_equal(row[0], x[5])
    np.testing.assert_array_equal(wide.view(np.uint64), x.view(np.uint64).reshape(64, 16))
    np.testing.assert_array_equal(flat, x.view(np.int8).reshape(-1))
    x3 = np.random.default_rng(7).standard_normal((4, 16, 16)).astype(np.float32)
    out = np.zeros((16, 2, 8), np.float32)
    slice_of_3d_transposed[(1,)](x3, out)
    np.testing.assert_array_equal(out, x3[2:4, 8:16, :].transpose(2, 0, 1))


def test_replica_ids_interp():
    out = np.zeros((3, 16), np.int32)
    replica_ids[(1,)](out, N=16)
    np.testing.assert_array_equal(out, np.array([[1] * 16, [11] * 16, [21] * 16], np.int32))


# ---------------------------------------------------------------------------------------------
# PTX backend
# ---------------------------------------------------------------------------------------------

SLICE_SIG = "x_ptr:*fp16:16, out_ptr:*fp16:16, R={}, C={}, OR={}, OC={}, SR={}, SC={}"


def run_straight_line_ptx(ptx, threads, arrays, elem_bytes):
    """Evaluates a one-CTA PTX kernel that only moves data: integer address arithmetic on
    %tid.x, global and shared loads and stores, bar.sync and predicated branches. Data are
    tracked byte by byte as (parameter, byte offset) labels, so the result says where each byte
    of `arrays` (parameter index -> element ids, or None for an output) ended up. Returns, per
    output parameter, the array of element ids it received (-1: never written)."""
    body = ptx[ptx.index("{", ptx.index(".entry")) + 1:]
    insts, labels = [], {}
    for line in body.split("\n"):
        line = line.split("//")[0].strip()
        if not line or line.startswith(".") or line == "}":
            continue
        if line.endswith(":"):
            labels[line[:-1]] = len(insts)
            continue
        guard = None
        if line.startswith("@"):
            g, line = line.split(None, 1)
            guard = (g[1:].startswith("!"), g[1:].lstrip("!"))
        opcode, _, rest = line.rstrip(";").partition(" ")
        ops = [o.strip() for o in re.split(r",(?![^{]*})", rest)] if rest.strip() else []
        insts.append((guard, opcode, ops))
    param_base = {i: (i + 1) << 40 for i in arrays}
    sizes = {i: len(a) for i, a in arrays.items() if a is not None}
    shared, global_out = {}, {}

    def param_index(name):
        return int(re.search(r"_param_(\d+)$", name).group(1))

    def read(regs, o):
        if o in regs:
            return regs[o]
        if o.startswith("%tid.x"):
            return regs["%tid.x"]
        if re.fullmatch(r"-?\d+", o):
            return int(o)
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", o):
            return int(o, 16)
        if o.startswith("%ctaid") or o.startswith("%tid."):
            return 0
        if not o.startswith("%"):
            return 0  # the shared-memory base symbol
        raise AssertionError(f"read of unset {o}")

    def address(regs, o):
        inner = o.strip("[]")
        base, _, off = inner.partition("+")
        if "_param_" in base:
            return base
        return read(regs, base) + (int(off) if off else 0)

    def int_op(op, ty, a, b):
        bits = int(re.search(r"(\d+)$", ty).group(1)) if re.search(r"\d+$", ty) else 64
        mask = (1 << bits) - 1
        r = {"add": a + b, "sub": a - b, "and": a & b, "or": a | b, "xor": a ^ b,
             "shl": a << b, "shr": a >> b, "min": min(a, b), "max": max(a, b)}[op]
        return r & mask

    def cmp(c, a, b):
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                "ge": a >= b}[c]

    def unpack(v):
        return [x.strip() for x in v.strip("{}").split(",")]

    states = [{"%tid.x": t} for t in range(threads)]
    pcs = [0] * threads
    done = [False] * threads
    while not all(done):
        for t in range(threads):
            regs = states[t]
            while not done[t]:
                if pcs[t] >= len(insts):
                    done[t] = True
                    break
                guard, opcode, ops = insts[pcs[t]]
                pcs[t] += 1
                if guard is not None and bool(regs[guard[1]]) == guard[0]:
                    continue
                parts = opcode.split(".")
                head = parts[0]
                if head == "ret" or head == "exit":
                    done[t] = True
                elif head == "bar" or opcode.startswith("barrier.sync"):
                    break
                elif head == "bra":
                    pcs[t] = labels[ops[0]]
                elif head == "ld" and "param" in parts:
                    regs[ops[0]] = param_base[param_index(ops[1].strip("[]"))]
                elif head == "cvta":
                    regs[ops[0]] = read(regs, ops[1])
                elif head in ("ld", "st"):
                    width = int(re.search(r"(\d+)$", parts[-1]).group(1)) // 8
                    vals, addr = (ops[0], ops[1]) if head == "ld" else (ops[1], ops[0])
                    names = unpack(vals)
                    a = address(regs, addr)
                    for k, name in enumerate(names):
                        at = a + k * width
                        if head == "ld" and "shared" in parts:
                            regs[name] = tuple(shared.get(at + i) for i in range(width))
                        elif head == "ld":
                            p = (at >> 40) - 1
                            off = at - param_base[p]
                            assert 0 <= off < sizes[p] * elem_bytes, (p, off)
                            regs[name] = tuple((p, off + i) for i in range(width))
                        else:
                            data = regs[name]
                            assert isinstance(data, tuple) and len(data) == width, (name, data)
                            mem = shared if "shared" in parts else global_out
                            for i in range(width):
                                mem[at + i] = data[i]
                elif head == "mov" and ops[0].startswith("{"):
                    data, dsts = regs[ops[1]], unpack(ops[0])
                    n = len(data) // len(dsts)
                    for k, name in enumerate(dsts):
                        regs[name] = data[k * n:(k + 1) * n]
                elif head == "mov" and ops[1].startswith("{"):
                    regs[ops[0]] = sum((regs[x] for x in unpack(ops[1])), ())
                elif head in ("mov", "cvt"):
                    regs[ops[0]] = read(regs, ops[1])
                elif head in ("add", "sub", "and", "or", "xor", "shl", "shr", "min", "max"):
                    regs[ops[0]] = int_op(head, parts[-1], read(regs, ops[1]), read(regs, ops[2]))
                elif head == "mul" or head == "mad":
                    r = read(regs, ops[1]) * read(regs, ops[2])
                    if head == "mad":
                        r += read(regs, ops[3])
                    regs[ops[0]] = r & ((1 << (64 if "wide" in parts else 32)) - 1)
                elif head == "selp":
                    regs[ops[0]] = read(regs, ops[1] if regs[ops[3]] else ops[2])
                elif head == "setp":
                    regs[ops[0]] = cmp(parts[1], read(regs, ops[1]), read(regs, ops[2]))
                else:
                    raise AssertionError(f"unexpected instruction {opcode} {ops}")
    outs = {}
    for p, a in arrays.items():
        if a is not None:
            continue
        got = {}
        for at, label in global_out.items():
            off = at - param_base[p]
            if 0 <= off < (1 << 40):
                assert label is not None, f"byte {off} of output {p} stored from unwritten smem"
                src, src_off = label
                assert src_off % elem_bytes == off % elem_bytes, (off, label)
                got.setdefault(off // elem_bytes, set()).add((src, src_off // elem_bytes))
        n = max(got) + 1 if got else 0
        out = np.full(n, -1, np.int64)
        for i, srcs in got.items():
            assert len(srcs) == 1, f"element {i} of output {p} mixes bytes of {srcs}"
            src, e = srcs.pop()
            out[i] = arrays[src][e]
        outs[p] = out
    return outs


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (64, 64, 32, 0, 32, 64), (64, 64, 0, 32, 64, 32), (64, 128, 16, 64, 16, 64),
    (32, 64, 8, 48, 8, 16)])
def test_slice_load_compiles(target, r, c, orow, ocol, sr, sc):
    k = compile_here("slice_load", SLICE_SIG.format(r, c, orow, ocol, sr, sc), target=target)
    assert k.cubin and "ld.shared" in k.ptx and "st.shared" in k.ptx


def test_slice_store_and_views_compile():
    for target in ["sm_90a", "sm_100a"]:
        k = compile_here("slice_store", "x_ptr:*fp16:16, out_ptr:*fp16:16, R=64, C=128, SR=32, "
                         "SC=64", target=target)
        assert k.cubin
        k = compile_here("reinterpret_load", "x_ptr:*fp32:16, out_ptr:*i16:16, R=32, C=32, "
                         "R2=32, C2=64", target=target)
        assert k.cubin
        k = compile_here("reinterpret_store", "x_ptr:*fp32:16, out_ptr:*i32:16, R=16, C=32",
                         target=target)
        assert k.cubin
        k = compile_here("trans_load", "x_ptr:*fp16:16, out_ptr:*fp16:16, R=32, C=64",
                         target=target)
        assert k.cubin


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_more_views_compile(target):
    k = compile_here("view_zoo", "x_ptr:*fp16:16, row_ptr:*fp16:16, wide_ptr:*fp64:16, "
                     "flat_ptr:*i8:16, ROW=5", target=target)
    assert k.cubin and "ld.shared.v2.f64" in k.ptx
    k = compile_here("slice_of_3d_transposed", "x_ptr:*fp32:16, out_ptr:*fp32:16", target=target)
    assert k.cubin


def test_local_store_is_one_step_of_the_warp_group():
    k = compile_here("trans_load", "x_ptr:*fp16:16, out_ptr:*fp16:16, R=32, C=64")
    body = k.ptx[k.ptx.index("{"):]
    first_store = body.index("st.shared")
    first_load = body.index("ld.shared")
    assert "bar.sync" in body[:first_store]
    assert "bar.sync" in body[first_store:first_load]


@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (64, 64, 32, 0, 32, 64), (64, 64, 0, 32, 64, 32), (64, 128, 16, 64, 16, 64),
    (32, 64, 8, 48, 8, 16)])
def test_slice_load_ptx_reads_the_slice(r, c, orow, ocol, sr, sc):
    k = compile_here("slice_load", SLICE_SIG.format(r, c, orow, ocol, sr, sc))
    x = np.arange(r * c, dtype=np.int64).reshape(r, c)
    out = run_straight_line_ptx(k.ptx, 128, {0: x.reshape(-1), 1: None}, elem_bytes=2)
    np.testing.assert_array_equal(out[1].reshape(sr, sc), x[orow:orow + sr, ocol:ocol + sc])


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("r,c", [(64, 64), (32, 32)])
def test_store_into_a_slice_cutting_the_swizzle(target, r, c):
    # Quadrants of half a swizzle row: the store XORs the slice's swizzle constant into its
    # addresses as the load does. The PTX, evaluated for every thread, puts each element of x
    # where the interpreter does.
    k = compile_here("slice_store", f"x_ptr:*fp16:16, out_ptr:*fp16:16, R={r}, C={c}, "
                     f"SR={r // 2}, SC={c // 2}", target=target)
    assert k.cubin
    x = np.arange(r * c, dtype=np.int64).reshape(r, c)
    out = run_straight_line_ptx(k.ptx, 128, {0: x.reshape(-1), 1: None}, elem_bytes=2)
    np.testing.assert_array_equal(out[1].reshape(r, c), quadrants_swapped(x))


def test_slices_need_offsets_aligned_to_their_size():
    msg = compile_error("slice_load", SLICE_SIG.format(64, 64, 16, 0, 32, 64))
    assert "each offset a multiple of its size" in msg, msg


def test_views_are_refused_on_sm80():
    msg = compile_error("slice_load", SLICE_SIG.format(64, 64, 32, 0, 32, 64), target="sm_80")
    assert "sm_90a and sm_100a only" in msg, msg


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_cluster_kernel_ptx(target):
    k = compile_here("cluster_info", "out_ptr:*i32:16", target=target, num_ctas=2)
    assert k.cubin
    ptx = k.ptx
    assert "%cluster_ctarank" in ptx and "%cluster_nctarank" in ptx
    assert re.search(r"mapa\.shared::cluster\.u32\s+%r\d+, %r\d+, %r\d+;", ptx), ptx
    # The remote arrive and the wait take PTX's default semantics, as Triton lowers TLX's:
    # explicit cluster scope costs a MEMBAR.ALL.GPU before each arrive and an L1 invalidation
    # after each wait. The header declares the cluster shape the launcher uses.
    assert "mbarrier.arrive.shared::cluster.b64" in ptx
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert ".release.cluster.shared::cluster" not in ptx and ".acquire.cluster" not in ptx
    assert ".explicitcluster\n.reqnctapercluster 2, 1, 1\n" in ptx
    # Barrier inits are visible cluster-wide before a peer can arrive; the closing barrier.
    init = ptx.index("mbarrier.init.shared::cta.b64")
    arrive = ptx.index("mbarrier.arrive.shared::cluster")
    assert "fence.mbarrier_init.release.cluster" in ptx[init:arrive]
    assert "barrier.cluster.arrive.release.aligned" in ptx[init:arrive]
    assert "barrier.cluster.wait.acquire.aligned" in ptx[init:arrive]
    assert ptx.count("barrier.cluster.arrive.release.aligned") == 2
    assert k.num_ctas == 2


def test_cluster_barrier_under_control_flow_is_not_aligned():
    k = compile_here("cluster_barrier_in_loop", "out_ptr:*i32:16, n:i32", num_ctas=2)
    assert k.cubin
    assert re.search(r"barrier\.cluster\.arrive\.release;", k.ptx), k.ptx
    assert re.search(r"barrier\.cluster\.wait\.acquire;", k.ptx), k.ptx
    assert ".aligned" not in k.ptx[k.ptx.index("barrier.cluster"):]


def test_cluster_ops_on_sm80_are_clear_errors():
    msg = compile_error("cluster_info", "out_ptr:*i32:16", target="sm_80", num_ctas=2)
    assert "sm_90a or sm_100a" in msg, msg


def test_cluster_barrier_inside_an_async_task_compiles_unaligned():
    # TLX semantics: every task calls it (the interpreter reports a task that does not); inside a
    # task the warps diverge from the others, so no .aligned.
    k = compile_here("cluster_barrier_in_task", "out_ptr:*i32:16")
    assert "barrier.cluster.arrive.release;" in k.ptx, k.ptx
    assert "barrier.cluster.wait.acquire;" in k.ptx, k.ptx


def test_replicas_get_their_own_warps_and_ids():
    k = compile_here("replica_ids", "out_ptr:*i32:16, N=16")
    ptx = k.ptx
    assert ".reqntid 512, 1, 1" in ptx  # default 4 warps + 3 replicas of 4
    # Each replica's warp range check, and its id baked into the stored constant.
    for first in (128, 256, 384):
        assert re.search(rf"sub\.u32\s+%r\d+, %r\d+, {first};", ptx), first
    for value in (1, 11, 21):
        assert re.search(rf"mov\.b32\s+%r\d+, {value};|, {value};", ptx), value


def test_plain_arrive_counts_once_per_task():
    # As in TLX, 8 warps arrive once: a count-1 barrier completes, a count-2 one never does ...
    out = np.zeros(64, np.int32)
    arrive_once_per_task[(1,)](out, N=64, COUNT=1, num_warps=8)
    assert (out == 1).all()
    with pytest.raises(Exception, match="deadlock"):
        arrive_once_per_task[(1,)](np.zeros(64, np.int32), N=64, COUNT=2, num_warps=8)
    # ... and the PTX arrives from thread 0 alone (the predicate of the barrier's init), after
    # the CTA meets.
    ptx = compile_here("arrive_once_per_task", "out_ptr:*i32:16, N=64, COUNT=1", num_warps=8).ptx
    m = re.search(r"bar\.sync\s+0;\s+@(%p\d+) mbarrier\.arrive\.shared::cta\.b64", ptx)
    assert m, ptx
    assert re.search(rf"{m.group(1)} mbarrier\.init\.shared::cta\.b64", ptx), ptx
    assert ", 127;" not in ptx


def test_plain_arrive_counts_once_per_wide_task():
    # An 8-warp task and a 4-warp one complete a count-2 barrier between them.
    out = np.zeros(64, np.int32)
    arrive_from_wide_task[(1,)](out, N=64, num_warps=4)
    assert (out == 1).all()
    ptx = compile_here("arrive_from_wide_task", "out_ptr:*i32:16, N=64").ptx
    assert ptx.count("mbarrier.arrive.shared::cta.b64") == 2, ptx


def test_replicas_with_a_start_group_sit_side_by_side():
    ptx = compile_here("replica_ids_from_group", "out_ptr:*i32:16, N=16").ptx
    # Warp groups 2 and 3 (threads 256 and 384 on); warp group 1 stays unused.
    assert ".reqntid 512, 1, 1" in ptx
    for first in (256, 384):
        assert re.search(rf"sub\.u32\s+%r\d+, %r\d+, {first};", ptx), first
    assert not re.search(r"sub\.u32\s+%r\d+, %r\d+, 128;", ptx)


@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (128, 64, 64, 0, 64, 64),  # rows of whole 8-row swizzle atoms
    (64, 128, 0, 64, 64, 64),  # the second 128-byte column block
    (128, 128, 64, 64, 64, 64)])
def test_tma_accepts_slices_of_whole_swizzle_atoms(r, c, orow, ocol, sr, sc):
    sig = (f"in_desc:desc<fp16,{sr}x{sc}>, out_desc:desc<fp16,{sr}x{sc}>, R={r}, C={c}, "
           f"OR={orow}, OC={ocol}, SR={sr}, SC={sc}")
    k = compile_here("tma_through_slice", sig)
    assert k.cubin
    # The tile starts at the slice's byte offset in the buffer (a multiple of 1024).
    offset = (ocol // 64) * r * 128 + orow * 128
    assert re.search(rf"add\.s32\s+%r\d+, %r\d+, {offset};", k.ptx) or offset == 0, k.ptx


def test_tma_refuses_a_slice_cutting_the_swizzle():
    sig = ("in_desc:desc<fp16,64x32>, out_desc:desc<fp16,64x32>, R=64, C=64, OR=0, OC=32, "
           "SR=64, SC=32")
    msg = compile_error("tma_through_slice", sig)
    assert "TMA and async_dot accept a view made of whole 128-byte swizzle atoms" in msg, msg
    assert "columns in blocks of 64 elements" in msg


def test_async_dot_reads_a_slice():
    sig = "a_desc:desc<fp16,64x64>, b_desc:desc<fp16,64x64>, c_ptr:*fp32:16, M=64, N=64, K=64"
    k = compile_here("async_dot_rows_of_a", sig)
    assert k.cubin
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in k.ptx
    assert re.search(r"add\.s32\s+%r\d+, %r\d+, 8192;", k.ptx), k.ptx


# ---------------------------------------------------------------------------------------------
# The Python surface
# ---------------------------------------------------------------------------------------------


def test_every_exported_function_is_known_to_the_compiler(tmp_path):
    """A kernel calling any exported tlx function gets a diagnostic about that call, never
    'unknown name'."""
    funcs = [n for n in tlx.__all__
             if n not in ("storage_kind", "constexpr", "dtype") and n not in tlx._HOST_ONLY]
    for name in funcs:
        src = tmp_path / f"k_{name}.py"
        src.write_text("import warpweave as ww\nimport warpweave.language as tl\n"
                       "from warpweave import tlx\n\n\n@ww.jit\ndef k(x_ptr):\n"
                       f"    tlx.{name}()\n")
        try:
            native_loader.native().compile([(str(src), src.read_text())], "k",
                                           "x_ptr:*fp32:16", {}, target="sm_90a",
                                           stage="ptx")
        except Exception as e:  # noqa: BLE001 - any diagnostic is fine but "unknown name"
            assert "unknown name" not in str(e), (name, str(e))
            assert f"k_{name}.py:8" in str(e), (name, str(e))
    assert "subslice" in funcs and "make_tensor_descriptor" not in funcs


