"""CompiledKernel.max_active_clusters through the stand-in driver (tools/cuda_stub), whose
cuOccupancyMaxActiveClusters models an H200-like device (132 SMs in GPCs of 18 and 16, clusters
within one GPC): what the runtime asks the driver (threads, shared memory, cluster shape, after
the function attributes a launch sets), what it answers, and the errors and unknowns."""

import json
import textwrap

import pytest

from test_stub_driver import run_with_stub

import cuda_stub

pytest.importorskip("warpweave._native")

# The GPCs of the stub's device (tools/cuda_stub/cuda_stub.c, kGpcSms).
GPC_SMS = [18, 18, 16, 16, 16, 16, 16, 16]

# Kernels for the bodies below: one that holds 192 KB of shared memory (one CTA per SM), one
# that holds none.
KERNELS = '''
@ww.jit
def big_shared(x_ptr, BLOCK: tl.constexpr):
    bufs = tlx.local_alloc((64, 256), tl.float32, 3)
    offs = tl.arange(0, 64)[:, None] * 256 + tl.arange(0, 256)[None, :]
    tlx.local_store(tlx.local_view(bufs, 0), tl.load(x_ptr + offs))
    tl.store(x_ptr + offs, tlx.local_load(tlx.local_view(bufs, 0)) + 1)


def occupancy_record():
    r = stub.record
    return dict(queries=r.occupancy_queries, function=r.occupancy_function,
                grid=list(r.occupancy_grid), block=list(r.occupancy_block),
                shared=r.occupancy_shared, cluster=list(r.occupancy_cluster))
'''


def run(tmp_path, body, env_extra=None):
    return run_with_stub(tmp_path, KERNELS + textwrap.dedent(body), env_extra)


def expected_clusters(blocks_per_sm, ctas):
    return sum(sms * blocks_per_sm // ctas for sms in GPC_SMS)


def test_a_192kb_kernel_gets_the_clusters_that_fit_in_the_gpcs(tmp_path):
    res = run(tmp_path, '''
        result = {}
        for c in range(1, 9):
            ck = big_shared.warmup(x, BLOCK=64, grid=(c,), ctas_per_cga=(c, 1, 1))
            n = ck.max_active_clusters(c)
            rec = occupancy_record()
            # A launch after the query uses the function the query was answered for.
            big_shared[(c * n,)](x, BLOCK=64, ctas_per_cga=(c, 1, 1))
            result[c] = dict(n=n, default=ck.max_active_clusters(), record=rec,
                             queries_after=stub.record.occupancy_queries,
                             shared=ck.shared, launched=stub.record.function,
                             launch_cluster=list(stub.record.cluster),
                             grid=list(stub.record.grid), loads=stub.record.module_loads)
        print(json.dumps(result))
    ''')
    loads = 0
    for c, r in ((int(c), r) for c, r in res.items()):
        assert r["shared"] > 190 * 1024, r  # one CTA per SM in the stub's model (and on an H200)
        assert r["n"] == expected_clusters(1, c), (c, r)
        assert r["default"] == r["n"]  # cluster_size defaults to the kernel's ctas_per_cga
        # One driver query per kernel: later calls (a wrapper's, before every launch) reuse it.
        assert r["record"]["queries"] == r["queries_after"] == c, r
        assert r["n"] <= 132 // c
        rec = r["record"]
        assert rec["cluster"] == [c, 1, 1] and rec["grid"] == [c, 1, 1], (c, rec)
        assert rec["block"] == [128, 1, 1] and rec["shared"] == r["shared"], (c, rec)
        assert rec["function"] == r["launched"], (c, r)
        assert r["launch_cluster"] == ([c, 1, 1] if c > 1 else [0, 0, 0])
        assert r["grid"] == [c * r["n"], 1, 1]
        loads += 1
        assert r["loads"] == loads  # the query loaded the module; the launch reused it
    # Uneven GPCs: three-CTA clusters leave SMs idle, so num_sms // 3 would be a second wave.
    assert res["3"]["n"] == 42 < 132 // 3
    assert res["7"]["n"] == 16 < 132 // 7


def test_blocks_per_sm_come_from_threads_registers_and_shared_memory(tmp_path):
    res = run(tmp_path, '''
        rows = []
        # A new kernel each time (its warps differ), loaded while the stub reports `regs`.
        for warps, regs in ((4, 0), (2, 128), (8, 64), (1, 255)):
            stub.set_num_regs(regs)
            ck = add4.warmup(x, y, out, 1000, BLOCK=256, grid=(2,), num_warps=warps,
                             ctas_per_cga=(2, 1, 1))
            rows.append(dict(warps=warps, regs=regs, n=ck.max_active_clusters(2),
                             shared=stub.record.occupancy_shared,
                             block=list(stub.record.occupancy_block)))
        print(json.dumps(rows))
    ''')
    for r in res:
        threads = r["warps"] * 32
        blocks = min(32, 2048 // threads)
        if r["regs"]:
            per_warp = (r["regs"] * 32 + 255) // 256 * 256
            blocks = min(blocks, 65536 // per_warp // r["warps"])
        assert r["block"] == [threads, 1, 1] and r["shared"] == 0, r
        assert r["n"] == expected_clusters(blocks, 2), r
    assert [r["n"] for r in res] == [1056, 528, 264, 528]


def test_a_kernel_without_clusters_can_be_asked_about_any_size_up_to_16(tmp_path):
    res = run(tmp_path, '''
        ck = big_shared.warmup(x, BLOCK=64, grid=(1,))
        result = dict(by_size={c: ck.max_active_clusters(c) for c in (1, 2, 5, 9, 16)})
        try:
            ck.max_active_clusters(17)
        except ValueError as e:
            result["17"] = str(e)
        print(json.dumps(result))
    ''')
    # Above 8 CTAs the runtime first allows non-portable sizes, or the driver would refuse.
    assert res["by_size"] == {str(c): expected_clusters(1, c) for c in (1, 2, 5, 9, 16)}
    assert res["by_size"]["16"] == 8
    assert "kernel 'big_shared' cannot run in clusters of 17 CTAs on this device" in res["17"]
    assert "CUDA_ERROR_INVALID_CLUSTER_SIZE" in res["17"]


def test_wrong_cluster_sizes_are_refused_before_the_driver(tmp_path):
    res = run(tmp_path, '''
        ck = big_shared.warmup(x, BLOCK=64, grid=(4,), ctas_per_cga=(4, 1, 1))
        errors = {}
        for size in (2, 0, -1, "4", 4.0, True):
            try:
                ck.max_active_clusters(size)
                errors[repr(size)] = None
            except (ValueError, TypeError) as e:
                errors[repr(size)] = [type(e).__name__, str(e)]
        errors["queries"] = stub.record.occupancy_queries
        print(json.dumps(errors))
    ''')
    assert res["2"] == ["LaunchError", "max_active_clusters: kernel 'big_shared' is compiled for "
                        "clusters of 4 CTAs (ctas_per_cga), so it can be asked about clusters "
                        "of 4 only, not 2"]
    for size in ("0", "-1"):
        assert res[size][0] == "LaunchError", res
        assert f"a cluster has at least 1 CTA, got cluster size {size}" in res[size][1]
    for size in ("'4'", "4.0", "True"):
        assert res[size] == ["TypeError", "max_active_clusters: cluster_size must be an int (CTAs "
                             f"per cluster), got {size}"]
    assert res["queries"] == 0


def test_a_driver_without_the_query_answers_none(tmp_path):
    old = cuda_stub.build(defines=["WWSTUB_NO_CLUSTER_OCCUPANCY"])
    res = run(tmp_path, '''
        ck = big_shared.warmup(x, BLOCK=64, grid=(2,), ctas_per_cga=(2, 1, 1))
        n = ck.max_active_clusters()
        big_shared[(2,)](x, BLOCK=64, ctas_per_cga=(2, 1, 1))  # the rest of the driver works
        print(json.dumps(dict(n=n, launches=stub.record.launches,
                              cluster=list(stub.record.cluster))))
    ''', env_extra=dict(WARPWEAVE_LIBCUDA=old))
    assert res == dict(n=None, launches=1, cluster=[2, 1, 1])


def test_the_interpreter_answers_none(tmp_path):
    res = run(tmp_path, '''
        import numpy as np
        a = np.zeros(64 * 256, np.float32)
        ck = big_shared.warmup(a, BLOCK=64, grid=(2,), ctas_per_cga=(2, 1, 1))
        print(json.dumps(dict(interpret=ck.interpret, n=ck.max_active_clusters(),
                              queries=stub.record.occupancy_queries)))
    ''')
    assert res == dict(interpret=True, n=None, queries=0)


def test_an_aot_kernel_from_metadata_answers_the_same(tmp_path):
    res = run(tmp_path, '''
        ck = big_shared.warmup(x, BLOCK=64, grid=(3,), ctas_per_cga=(3, 1, 1))
        aot = _native.kernel_from_metadata(ck.kernel.metadata_json(), ck.kernel.cubin)
        print(json.dumps(dict(jit=ck.max_active_clusters(), aot=aot.max_active_clusters(3),
                              queries=stub.record.occupancy_queries,
                              shared=stub.record.occupancy_shared)))
    ''')
    # Two GpuKernels (one per object), one query each.
    assert res["jit"] == res["aot"] == expected_clusters(1, 3)
    assert res["queries"] == 2 and res["shared"] > 190 * 1024
