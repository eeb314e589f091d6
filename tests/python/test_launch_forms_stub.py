"""The runtime's driver calls through the stand-in driver (tools/cuda_stub): every launch form
(cuLaunchKernel with a pointer per param, cuLaunchKernelEx, cuLaunchKernel with the packed
buffer in `extra`) hands the driver the same launch, and a kernel's target decides what a
device loads (the cubin, or the PTX through the driver's JIT, or a LaunchError)."""

import pytest

from test_stub_driver import run_with_stub

pytest.importorskip("warpweave._native")


def test_every_launch_form_passes_the_same_launch(tmp_path):
    res = run_with_stub(tmp_path, '''
        out_by_form = {}
        # ptr, fp32, i32, i64, i32: the buffer form must place each at its natural alignment.
        stub.record_params([8, 4, 4, 8, 4])
        for form in ("params", "ex", "buffer"):
            _native._set_launch_form(form)
            assert _native._launch_form() == form
            before = (stub.record.launches, stub.record.launch_ex, stub.record.launch_buffer)
            scale[(3, 2)](x, 2.5, 0, 1 << 40, 1000, BLOCK=256)  # general path the first time
            scale[(3, 2)](x, 2.5, 0, 1 << 40, 999, BLOCK=256)   # fast path
            r = stub.record
            out_by_form[form] = dict(
                last=last(), launches=r.launches - before[0], ex=r.launch_ex - before[1],
                buffer=r.launch_buffer - before[2])
        _native._set_launch_form("params")
        print(json.dumps(out_by_form))
    ''')
    expected_params = [0x7f0000010000, 0x40200000, 0, 1 << 40, 999]  # 2.5f is 0x40200000
    for form, r in res.items():
        assert r["launches"] == 2, form
        assert r["last"]["params"] == expected_params, form
        assert r["last"]["grid"] == [3, 2, 1] and r["last"]["stream"] == 0x5000, form
        assert r["last"]["block"] == [128, 1, 1], form
    assert (res["params"]["ex"], res["params"]["buffer"]) == (0, 0)
    assert (res["ex"]["ex"], res["ex"]["buffer"]) == (2, 0)
    assert (res["buffer"]["ex"], res["buffer"]["buffer"]) == (0, 2)


def test_every_launch_form_passes_descriptor_kernels_the_same_tensor_maps(tmp_path):
    res = run_with_stub(tmp_path, '''
        a, o = Tensor(0x7f0000100000, F16), Tensor(0x7f0000200000, F16)
        out_by_form = {}
        # fp32, then two maps: the buffer form must place the maps at 64-byte alignment.
        stub.record_params([4, 128, 128])
        for form in ("params", "ex", "buffer"):
            _native._set_launch_form(form)
            before = stub.record.launches
            for _ in range(2):  # the general path the first time (each form: a new kernel)
                c = tma_scale[(4,)](1.5, desc(a, [64, 128]), desc(o, [64, 128]), BLOCK_M=64,
                                    BLOCK_N=128, num_warps=4 << len(out_by_form))
            out_by_form[form] = dict(
                params=[b.hex() for b in stub.last_param_bytes()],
                kernels=tma_scale._launcher.num_kernels, launches=stub.record.launches - before)
        _native._set_launch_form("params")
        expected = [struct.pack("<f", 1.5).hex(),
                    desc(a, [64, 128]).encode(c.swizzles["in_desc"]).hex(),
                    desc(o, [64, 128]).encode(c.swizzles["out_desc"]).hex()]
        print(json.dumps(dict(forms=out_by_form, expected=expected)))
    ''')
    for kernels, (form, r) in enumerate(res["forms"].items(), 1):
        assert r == dict(params=res["expected"], kernels=kernels, launches=2), form


def test_clusters_take_cuLaunchKernelEx_in_every_form(tmp_path):
    res = run_with_stub(tmp_path, '''
        _native._set_launch_form("buffer")
        add4[(4,)](x, y, out, 1000, BLOCK=256, ctas_per_cga=(2, 1, 1))
        print(json.dumps(last()))
    ''')
    assert res["cluster"] == [2, 1, 1] and res["ex"] == 1


def test_an_unknown_launch_form_is_refused():
    from warpweave import _native

    with pytest.raises(ValueError, match="unknown launch form 'fast': expected params, ex or "
                                         "buffer"):
        _native._set_launch_form("fast")
    assert _native._launch_form() == "params"


def test_sm80_kernels_load_their_ptx_on_hopper_and_their_cubin_on_ampere(tmp_path):
    res = run_with_stub(tmp_path, '''
        stub.record_params([8, 8, 8, 4])
        add4[(1,)](x, y, out, 1000, BLOCK=256)  # the stub's device: compute capability 9.0
        r = stub.record
        hopper = dict(loads=r.module_loads, ptx=r.ptx_loads, params=list(stub.last_params()))
        stub.set_compute_capability(8, 6)  # a new kernel loads on an Ampere device
        add4[(1,)](x, y, out, 1000, BLOCK=128)
        ampere = dict(loads=r.module_loads, ptx=r.ptx_loads, params=list(stub.last_params()))
        print(json.dumps(dict(hopper=hopper, ampere=ampere,
                              targets=sorted({k.kernel.target for k in add4.cache.values()}))))
    ''', {"WARPWEAVE_TARGET": "sm_80"})
    assert res["targets"] == ["sm_80"]
    assert res["hopper"] == dict(loads=1, ptx=1, params=[0x7f0000010000, 0x7f0000020000,
                                                         0x7f0000030000, 1000])
    assert res["ampere"]["loads"] == 2 and res["ampere"]["ptx"] == 1  # the cubin this time


def test_a_kernel_no_image_of_which_runs_on_the_device_is_a_launch_error(tmp_path):
    res = run_with_stub(tmp_path, '''
        stub.set_compute_capability(8, 0)
        errors = []
        try:
            add4[(1,)](x, y, out, 1000, BLOCK=256)  # compiled for sm_90a
        except ww.LaunchError as e:
            errors.append(str(e))
        # An sm_80 cubin without its PTX (an AOT kernel) on a Hopper device.
        stub.set_compute_capability(9, 0)
        meta = json.dumps({"name": "k", "target": "sm_80", "num_warps": 4, "num_ctas": 1,
                           "params": [{"name": "n", "type": "i32", "size": 4}], "folded": []})
        k = _native.kernel_from_metadata(meta, b"\\x7fELF sm_80 cubin", "")
        try:
            k.launch(1, 1, 1, 0, (5,))
        except ww.LaunchError as e:
            errors.append(str(e))
        print(json.dumps(dict(errors=errors, loads=stub.record.module_loads,
                              launches=stub.record.launches)))
    ''')
    assert res["loads"] == 0 and res["launches"] == 0
    sm90_on_ampere, cubin_only = res["errors"]
    assert sm90_on_ampere.startswith("kernel 'add4") and \
        "was compiled for sm_90a, which cannot run on this device (compute capability 8.0); " \
        "compile it for sm_80 (WARPWEAVE_TARGET, wwc --target)" in sm90_on_ampere
    assert cubin_only == (
        "kernel 'k' was compiled for sm_80, which cannot run on this device (compute capability "
        "9.0): its cubin is for another architecture and no PTX came with it for the driver to "
        "compile; compile it for sm_90a (WARPWEAVE_TARGET, wwc --target)")


def test_kernels_that_use_shared_memory_ask_for_the_carveout_their_blocks_need(tmp_path):
    res = run_with_stub(tmp_path, '''
        @ww.jit
        def row_total(x_ptr, out_ptr, BLOCK: tl.constexpr):
            tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


        add4[(1,)](x, y, out, 1000, BLOCK=256)  # registers only
        plain = dict(sets=stub.record.carveout_sets, shared=stub.record.shared_bytes)
        row_total[(1,)](x, out, BLOCK=1024, num_warps=4)  # partial sums meet in shared memory
        r = stub.record
        print(json.dumps(dict(plain=plain, sets=r.carveout_sets, carveout=r.carveout,
                              shared=r.shared_bytes)))
    ''')
    assert res["plain"] == dict(sets=0, shared=0)
    # Enough for the blocks an SM can hold: 16 of 4 warps (the stub reports no registers), each
    # with its shared bytes and 1 KB reserved, as a percentage of the SM's 228 KB.
    expected = -(-16 * (res["shared"] + 1024) * 100 // 233472)
    assert res["shared"] > 0 and res["sets"] == 1 and res["carveout"] == expected < 100
