"""Distributed shared memory between the CTAs of a cluster: tlx.async_remote_shmem_store (st.async
completing its bytes on the peer's mbarrier) and tlx.remote_shmem_store (st.shared::cluster).
The interpreter against NumPy (C = 2 and 4, one exchange and many rounds through reused slots),
its race and deadlock reports, and the PTX backend: the instructions, ptxas for sm_90a and
sm_100a, each element stored by exactly one thread, and the errors."""

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
from tlx_remote_shmem_kernels import (constant_rank, exchange_in_task, exchange_pairs,
                                      exchange_pairs_reference, exchange_rounds,
                                      exchange_row_sums,
                                      exchange_rounds_reference, exchange_scalars, exchange_sync,
                                      expect_too_few, expect_too_many, push_tile, read_before_wait,
                                      sync_store_without_barrier)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_remote_shmem_kernels.py")
ST_ASYNC = "st.async.shared::cluster.mbarrier::complete_tx::bytes"


def line_of(kernel, text):
    lines, first = inspect.getsourcelines(kernel.fn if hasattr(kernel, "fn") else kernel)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def small_ints(rng, shape):
    # Integers keep every sum exact in float32, whatever order the kernel adds in.
    return rng.integers(-50, 51, shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Interpreter against NumPy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("c", [2, 4])
@pytest.mark.parametrize("self_push", [False, True])
@pytest.mark.parametrize("clusters", [1, 3])
def test_exchange_of_pairs_combines_every_ctas_partial(c, self_push, clusters):
    n = 64
    x = small_ints(np.random.default_rng(c * 7 + clusters), (clusters, c * n))
    out = np.full((clusters * c, 2), np.nan, np.float32)
    exchange_pairs[(clusters * c,)](x, out, C=c, N=n, SELF=self_push, ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, exchange_pairs_reference(x, c))


def test_exchange_is_right_under_seeded_schedules(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", "5")
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", "6")
    x = small_ints(np.random.default_rng(3), (2, 4 * 32))
    out = np.full((8, 2), np.nan, np.float32)
    exchange_pairs[(8,)](x, out, C=4, N=32, SELF=True, ctas_per_cga=(4, 1, 1))
    np.testing.assert_array_equal(out, exchange_pairs_reference(x, 4))


@pytest.mark.parametrize("c,slots", [(2, 2), (4, 2), (4, 3), (2, 4)])
def test_many_rounds_through_reused_slots_and_phases(c, slots):
    n, rounds, clusters = 32, 9, 2
    x = small_ints(np.random.default_rng(c * 10 + slots), (clusters * rounds, c * n))
    out = np.full((clusters, rounds * c, 2), np.nan, np.float32)
    exchange_rounds[(clusters * c,)](x, out, C=c, N=n, ROUNDS=rounds, SLOTS=slots,
                                      ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, exchange_rounds_reference(x, c, rounds))


def test_one_slot_reused_every_round_is_a_race():
    # With one slot a CTA may push round i into a peer's slot before that peer has read round
    # i - 1 from it (it has only had to push its own round i - 1 first).
    n, rounds, c = 32, 4, 2
    x = small_ints(np.random.default_rng(1), (rounds, c * n))
    out = np.zeros((1, rounds * c, 2), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        exchange_rounds[(c,)](x, out, C=c, N=n, ROUNDS=rounds, SLOTS=1, ctas_per_cga=(c, 1, 1))
    assert "async_remote_shmem_store" in str(e.value), str(e.value)


@pytest.mark.parametrize("c", [2, 4])
def test_synchronous_remote_store_then_cluster_barrier(c):
    n = 64
    x = small_ints(np.random.default_rng(c), (2, c * n))
    out = np.full((2 * c, 2), np.nan, np.float32)
    exchange_sync[(2 * c,)](x, out, C=c, N=n, ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, exchange_pairs_reference(x, c))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_wide_tile_pushed_to_every_peer(dtype):
    r, k, c = 8, 64, 2
    x = np.random.default_rng(9).standard_normal((c, r, k)).astype(dtype)
    out = np.zeros((c, c, r, k), dtype)
    push_tile[(c,)](x, out, R=r, K=k, C=c, ctas_per_cga=(c, 1, 1))
    for pid in range(c):
        np.testing.assert_array_equal(out[pid], x)


@pytest.mark.parametrize("c", [2, 4])
def test_exchange_from_an_async_task(c):
    n = 32
    x = small_ints(np.random.default_rng(c + 100), (2, c * n))
    out = np.full((2 * c, 2), np.nan, np.float32)
    exchange_in_task[(2 * c,)](x, out, C=c, N=n, ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, exchange_pairs_reference(x, c))


@pytest.mark.parametrize("c", [2, 4])
def test_scalars_into_one_element_slots(c):
    n = 32
    x = small_ints(np.random.default_rng(c + 200), (3, c * n))
    out = np.full((3 * c, 2), np.nan, np.float32)
    exchange_scalars[(3 * c,)](x, out, C=c, N=n, ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, exchange_pairs_reference(x, c))


def test_synchronous_store_read_without_a_cluster_barrier_is_a_located_race():
    out = np.zeros((2, 2), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        sync_store_without_barrier[(2,)](out, C=2, ctas_per_cga=(2, 1, 1))
    msg = str(e.value)
    # Whichever CTA reads first: its peer's store has not happened yet, or is not ordered
    # before the read.
    assert re.search(r"local_load reads shared memory that (nothing wrote|remote_shmem_store "
                     r"by program \(\d, 0, 0\) wrote, with no barrier ordering)", msg), msg
    assert f":{line_of(sync_store_without_barrier, 'got = tlx.local_load')}:" in msg, msg


@pytest.mark.parametrize("c", [2, 4])
@pytest.mark.parametrize("m", [1, 16])
def test_row_sums_with_own_slot_by_local_store(c, m):
    n = 32
    x = small_ints(np.random.default_rng(c * m), (2, m, c * n))
    out = np.full((2 * c, m), np.nan, np.float32)
    exchange_row_sums[(2 * c,)](x, out, M=m, N=n, C=c, ctas_per_cga=(c, 1, 1))
    np.testing.assert_array_equal(out, np.repeat(x.sum(2), c, axis=0))


def test_reading_before_the_barrier_wait_is_a_located_race():
    out = np.zeros((2, 2), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        read_before_wait[(2,)](out, C=2, ctas_per_cga=(2, 1, 1))
    msg = str(e.value)
    assert re.search(r"local_load reads shared memory that async_remote_shmem_store by program "
                     r"\(\d, 0, 0\) is still writing", msg), msg
    assert f":{line_of(read_before_wait, 'got = tlx.local_load')}:" in msg, msg
    assert f":{line_of(read_before_wait, 'tlx.async_remote_shmem_store')}:" in msg, msg


@pytest.mark.parametrize("c", [2, 4])
def test_expecting_too_many_bytes_is_a_located_deadlock(c):
    out = np.zeros((c, 2), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        expect_too_many[(c,)](out, C=c, EXTRA=8, ctas_per_cga=(c, 1, 1))
    msg = str(e.value)
    assert "deadlock" in msg, msg
    assert f":{line_of(expect_too_many, 'tlx.barrier_wait(bar, 0)')}:" in msg, msg
    assert "still expects 8 transaction bytes" in msg, msg


@pytest.mark.parametrize("c", [2, 4])
def test_expecting_too_few_bytes_is_reported_at_the_late_store(c):
    # The phase completes before the last store lands: on the GPU the reader may see the slot
    # before it is written. The interpreter lands every store before the reader runs, so only
    # the byte count can tell.
    out = np.zeros((c, 2), np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        expect_too_few[(c,)](out, C=c, ctas_per_cga=(c, 1, 1))
    msg = str(e.value)
    assert re.search(r"async_remote_shmem_store delivers 8 bytes to phase 1 of barrier 0 of "
                     r"'bars'.* before any barrier_wait has seen phase 0 complete", msg), msg
    assert f":{line_of(expect_too_few, 'tlx.async_remote_shmem_store')}:" in msg, msg


def printf_strings(ptx):
    """The text of the PTX's string constants (.global .b8 NAME[] = {bytes})."""
    out = []
    for body in re.findall(r"\.b8 \S+\[\d*\] = \{([^}]*)\}", ptx):
        out.append(bytes(int(b) for b in body.split(",") if b.strip()).decode(errors="replace"))
    return "\n".join(out)


def test_outside_a_cluster_the_stores_are_refused():
    # The H200 raises an illegal instruction for st.async in a kernel launched without a
    # cluster, even into its own CTA (seen in tests/gpu): the interpreter and the compiler
    # refuse it at the store's line instead.
    out = np.zeros((1, 2), np.float32)
    x = np.zeros((1, 2 * 16), np.float32)
    for c in (1, 2):
        with pytest.raises(ww.InterpreterError) as e:
            exchange_pairs[(1,)](x, out, C=c, N=16, SELF=True)
        msg = str(e.value)
        assert "async_remote_shmem_store needs a cluster launch" in msg, msg
        assert f":{line_of(exchange_pairs, 'tlx.async_remote_shmem_store')}:" in msg, msg
    # The compiler accepts the store, as TLX does (a 1-CTA launch may never reach it, as behind
    # `if rank != 0`); a store that runs prints its line and traps.
    k = compile_here("exchange_pairs", "x_ptr:*fp32:16, out_ptr:*fp32:16, C=1, N=16, SELF=True",
                     num_ctas=1)
    assert "st.async" not in k.ptx and "trap;" in k.ptx
    line = line_of(exchange_pairs, 'tlx.async_remote_shmem_store')
    assert re.search(r'tlx_remote_shmem_kernels\.py:%d: tlx\.async_remote_shmem_store needs a '
                     r'cluster launch' % line, printf_strings(k.ptx)), k.ptx


# ---------------------------------------------------------------------------------------------
# PTX backend
# ---------------------------------------------------------------------------------------------


def compile_here(kernel, signature, target="sm_90a", num_warps=4, num_ctas=2, stage="cubin"):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target=target,
                                          num_warps=num_warps, num_ctas=num_ctas, stage=stage)


PAIRS_SIG = "x_ptr:*fp32:16, out_ptr:*fp32:16, C={c}, N=64, SELF={self_push}"


@pytest.mark.parametrize("num_warps", [4, 8])
def test_scalar_store_is_one_4_byte_store_by_one_thread(num_warps):
    k = compile_here("exchange_scalars", "x_ptr:*fp32:16, out_ptr:*fp32:16, C=2, N=32",
                     num_warps=num_warps)
    assert k.cubin and k.ptx.count(ST_ASYNC + ".f32 [") == 4, k.ptx
    body = k.ptx[k.ptx.index(".entry"):]
    guards = set(re.findall(r"@(%p\d+) " + re.escape(ST_ASYNC), body))
    assert len(guards) == 1, body
    # The guard holds for thread 0 alone: (tid & (threads - 1)) == 0.
    guard = guards.pop()
    m = re.search(r"setp\.eq\.u32\s+" + re.escape(guard) + r", (%r\d+), 0;", body)
    assert m, body
    assert re.search(re.escape(m.group(1)) + rf", %r\d+, {num_warps * 32 - 1};", body), body


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("c", [2, 4])
def test_ptx_has_st_async_to_mapped_addresses_and_assembles(target, c):
    k = compile_here("exchange_pairs", PAIRS_SIG.format(c=c, self_push=True), target=target,
                     num_ctas=c)
    assert k.cubin
    store = re.escape(ST_ASYNC) + r"(\.v[24])?\.(\w+)\s+\[(%r\d+)\], [^;]*, \[(%r\d+)\];"
    stores = re.findall(store, k.ptx)
    # One per peer: the 8-byte pair from one thread as one vector store (each st.async also
    # updates the peer's barrier).
    assert len(stores) == c, k.ptx
    mapped = set(re.findall(r"mapa\.shared::cluster\.u32\s+(%r\d+),", k.ptx))
    for vec, type_, addr, bar in stores:
        assert (vec, type_) == (".v2", "f32"), k.ptx
        assert addr in mapped and bar in mapped, (addr, bar, k.ptx)
    assert "barrier.cluster" in k.ptx  # after alloc_barriers


def test_sm80_is_refused_at_the_store():
    with pytest.raises(Exception) as e:
        compile_here("exchange_pairs", PAIRS_SIG.format(c=2, self_push=True), target="sm_80",
                     num_ctas=1)
    msg = str(e.value)
    assert "tlx.async_remote_shmem_store needs sm_90 or later" in msg, msg
    assert f":{line_of(exchange_pairs, 'tlx.async_remote_shmem_store(mine')}:" in msg, msg


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_synchronous_store_is_st_shared_cluster(target):
    k = compile_here("exchange_sync", "x_ptr:*fp32:16, out_ptr:*fp32:16, C=2, N=64",
                     target=target)
    assert k.cubin and re.search(r"st\.shared::cluster(\.v2)?\.f32\s+\[%r\d+\]", k.ptx), k.ptx
    assert ST_ASYNC not in k.ptx


@pytest.mark.parametrize("dtype,rows,vector", [
    ("fp32", 8, ".v4.f32"), ("fp16", 16, ".v4.b32"), ("fp16", 8, ".v2.b32"),
    ("fp64", 8, ".v2.f64")])
def test_wide_tiles_go_as_16_byte_vectors(dtype, rows, vector):
    # 4 warps load rows x 64 elements, 16 bytes per thread where there are enough of them (the
    # 16-bit ones in packed pairs).
    k = compile_here("push_tile", f"x_ptr:*{dtype}:16, out_ptr:*{dtype}:16, R={rows}, K=64, C=2")
    assert k.cubin and ST_ASYNC + vector in k.ptx, k.ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("m", [1, 16, 64])
def test_row_sums_of_shape_m_by_1_assemble(target, m):
    k = compile_here("exchange_row_sums", f"x_ptr:*fp32:16, out_ptr:*fp32:16, M={m}, N=32, C=2",
                     target=target, num_warps=8)
    assert k.cubin and ST_ASYNC in k.ptx, k.ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_store_from_an_async_task_assembles(target):
    k = compile_here("exchange_in_task", "x_ptr:*fp32:16, out_ptr:*fp32:16, C=2, N=32",
                     target=target)
    assert k.cubin and k.ptx.count(ST_ASYNC) == 2, k.ptx
    # The task's barrier before its stores is its own named barrier, not bar.sync 0 of the CTA.
    first = k.ptx.index(ST_ASYNC)
    assert re.search(r"bar\.sync\s+[1-9]\d*, 128;", k.ptx[:first]), k.ptx


@pytest.mark.parametrize("rank,num_ctas", [(2, 2), (4, 4)])
def test_constant_rank_outside_the_cluster_is_refused(rank, num_ctas):
    with pytest.raises(Exception) as e:
        compile_here("constant_rank", f"out_ptr:*fp32:16, RANK={rank}", num_ctas=num_ctas)
    msg = str(e.value)
    assert f"remote_cta_rank {rank} is outside the cluster of {num_ctas} CTA" in msg, msg
    assert f":{line_of(constant_rank, 'tlx.async_remote_shmem_store')}:" in msg, msg


@pytest.mark.parametrize("kernel,fragment", [
    ("bad_rank", "remote_cta_rank must be an integer scalar"),
    ("bad_shape", "src is tensor<4xfp32> but dst holds 2 tiles"),
    ("bad_dtype", "convert it with .to(...)"),
    ("bad_barrier", "barrier must be a barrier (from tlx.alloc_barriers)"),
    ("bad_dst", "dst must be a shared-memory buffer"),
])
def test_user_errors_name_the_argument(kernel, fragment):
    with pytest.raises(Exception) as e:
        compile_here(kernel, "out_ptr:*fp32:16", num_ctas=1)
    msg = str(e.value)
    assert fragment in msg, msg
    assert "tlx_remote_shmem_kernels.py:" in msg, msg


def stores_per_thread(ptx, threads, rank=0):
    """Evaluates the integer and predicate arithmetic of a PTX kernel up to its last st.async
    (straight-line code: no branch may come first) for each thread, with the shared-memory base
    at 0, %cluster_ctarank = `rank`, and mapa(x, r) = x + (r + 1) << 24. Returns one
    (peer, byte offset, bytes) per st.async each thread executes."""
    body = ptx[ptx.index("{", ptx.index(".entry")) + 1:]
    lines = [ln.split("//")[0].strip().rstrip(";") for ln in body.split("\n")]
    lines = [ln for ln in lines if ln and not ln.startswith(".") and not ln.endswith(":")]
    last = max(i for i, ln in enumerate(lines) if ST_ASYNC in ln)
    assert not any(re.match(r"(@\S+\s+)?bra", ln) for ln in lines[:last]), "not straight-line"
    specials = {"%tid.x": None, "%cluster_ctarank": rank, "global_smem": 0}
    binary = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
              "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
              "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
              "mul": lambda a, b: a * b}
    compare = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
               "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
    out = []
    for tid in range(threads):
        regs = {}
        specials["%tid.x"] = tid

        def val(o):
            o = o.strip()
            if o in specials:
                return specials[o]
            if o in regs:
                return regs[o]
            if re.fullmatch(r"-?\d+", o):
                return int(o)
            return None

        for ln in lines[:last + 1]:
            guard = None
            if ln.startswith("@"):
                g, ln = ln.split(None, 1)
                guard = (g[1] == "!", g.lstrip("@!"))
            opcode, _, rest = ln.partition(" ")
            ops = [o.strip() for o in re.split(r",(?![^{]*})", rest)] if rest.strip() else []
            parts = opcode.split(".")
            if opcode.startswith(ST_ASYNC):
                g = True if guard is None else val(guard[1])
                assert g is not None, ln
                if guard and guard[0]:
                    g = not g
                if not g:
                    continue
                addr = val(ops[0].strip("[]").split("+")[0])
                assert addr is not None, ln
                width = {"f32": 4, "b32": 4, "f64": 8, "b64": 8}[parts[-1]]
                count = int(parts[-2][1]) if parts[-2].startswith("v") else 1
                out.append((tid, (addr >> 24) - 1, addr & 0xFFFFFF, width * count))
                continue
            if not ops or not ops[0].startswith("%"):
                continue  # no register result (bar.sync 0, stores, arrives)
            dst, args = ops[0], [val(o) for o in ops[1:]]
            result = None
            if parts[0] == "mov" and len(args) == 1:
                result = args[0]
            elif parts[0] == "mapa" and None not in args:
                result = args[0] + ((args[1] + 1) << 24)
            elif parts[0] in binary and len(args) == 2 and None not in args:
                result = binary[parts[0]](args[0], args[1])
                if parts[0] != "and" or parts[1] != "pred":
                    result &= 0xFFFFFFFF
            elif parts[0] == "mad" and None not in args:
                result = (args[0] * args[1] + args[2]) & 0xFFFFFFFF
            elif parts[0] == "setp" and None not in args:
                result = compare[parts[1]](args[0], args[1])
            elif parts[0] == "not" and parts[1] == "pred" and None not in args:
                result = not args[0]
            elif parts[0] == "selp" and None not in args:
                result = args[0] if args[2] else args[1]
            if guard is None:
                regs[dst] = result
            else:
                regs.pop(dst, None)  # a guarded definition: unknown from here on
    return out


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("kernel,signature,nbytes", [
    # A [2] pair held by every thread: one thread stores it.
    ("exchange_pairs", PAIRS_SIG.format(c=2, self_push=True), 8),
    # 64 fp32 over up to 256 threads: warps (and lanes) hold copies of each other's elements.
    ("push_tile", "x_ptr:*fp32:16, out_ptr:*fp32:16, R=2, K=32, C=2", 256),
    # fp16 stored in packed pairs.
    ("push_tile", "x_ptr:*fp16:16, out_ptr:*fp16:16, R=4, K=32, C=2", 256),
    # An [M, 1] column of row sums (TLX's pattern), in a 2-D buffer.
    ("push_tile", "x_ptr:*fp32:16, out_ptr:*fp32:16, R=16, K=1, C=2", 64),
])
def test_each_element_is_stored_exactly_once_per_peer(num_warps, rank, kernel, signature, nbytes):
    # The bytes count toward the peer's transaction count: each must be stored once per peer,
    # by one thread, whatever the layout replicates over lanes and warps.
    c = 2
    ptx = compile_here(kernel, signature, num_warps=num_warps, num_ctas=c, stage="ptx").ptx
    stores = stores_per_thread(ptx, num_warps * 32, rank=rank)
    assert stores, ptx
    slot = None
    for peer in range(c):
        written = np.zeros(1 << 14, np.int32)
        for _tid, p, offset, size in stores:
            if p == peer:
                written[offset:offset + size] += 1
        hit = np.nonzero(written)[0]
        assert len(hit) == nbytes and hit[-1] - hit[0] == nbytes - 1, (peer, hit, stores)
        assert (written[hit] == 1).all(), (peer, written[hit], stores)
        # The same slot (this CTA's: `rank`) of every peer.
        slot = hit[0] if slot is None else slot
        assert hit[0] == slot
    assert {p for _t, p, _o, _n in stores} == set(range(c))


def test_exactly_once_check_sees_a_replicated_store():
    # The checker itself: a PTX without the owner predicate stores the pair from every thread.
    c = 2
    ptx = compile_here("exchange_pairs", PAIRS_SIG.format(c=c, self_push=True), num_warps=4,
                       num_ctas=c, stage="ptx").ptx
    unguarded = re.sub(r"@%p\d+ (" + re.escape(ST_ASYNC) + ")", r"\1", ptx)
    stores = stores_per_thread(unguarded, 128)
    assert len(stores) > 2 * c * 2
