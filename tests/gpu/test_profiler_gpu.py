"""warpweave.profiler on the GPU: every launch made while a session is active is timed with CUDA
events (the native fast path steps aside for the hooks, and serves launches again afterwards),
torch work inside a scope is timed as the scope, and the viewer derives rates from the file."""

import json
import math

import pytest

from gpu_requirements import require_cuda

import warpweave as ww
import warpweave.language as tl
import warpweave.profiler as proton
import warpweave.profiler.viewer as viewer

torch = require_cuda()


def _metadata(grid, kernel, args):
    n = args["n"]
    return {"name": f"{kernel.name} [n={n}]", "flops32": float(n),
            "bytes": 3 * args["x_ptr"].element_size() * n}


@ww.jit(launch_metadata=_metadata)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def _child(node, name):
    names = [c["frame"]["name"] for c in node["children"]]
    assert name in names, names
    return node["children"][names.index(name)]


def test_gpu_launches_and_torch_scopes_are_timed(tmp_path):
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid = (ww.cdiv(n, 1024),)
    add_kernel[grid](x, x, out, n, BLOCK=1024)  # compiled, and known to the fast path
    add_kernel[grid](x, x, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    path = str(tmp_path / "gpu")
    proton.start(path, hook="triton")
    with proton.scope("ww"):
        for _ in range(5):
            add_kernel[grid](x, x, out, n, BLOCK=1024)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    with proton.scope("torch mm", {"flops16": 3 * 2.0 * 1024 ** 3, "bytes": 3 * 2 * 1024 ** 2}):
        for _ in range(3):
            torch.mm(a, a)
    proton.deactivate()
    add_kernel[grid](x, x, out, n, BLOCK=1024)  # not recorded
    proton.finalize()
    torch.cuda.synchronize()
    assert torch.equal(out, x + x)

    root, devices = json.loads(open(path + ".hatchet").read())
    dev = torch.cuda.current_device()
    assert devices["CUDA"][str(dev)]["num_sms"] == torch.cuda.get_device_properties(
        dev).multi_processor_count
    k = _child(_child(root, "ww"), f"add_kernel [n={n}]")["metrics"]
    assert k["count"] == 5 and k["device_type"] == "CUDA" and k["device_id"] == str(dev)
    assert k["time (ns)"] > 0 and k["flops32"] == 5.0 * n and k["bytes"] == 5 * 12 * n
    mm = _child(root, "torch mm")["metrics"]
    assert mm["count"] == 1 and mm["time (ns)"] > 0 and mm["flops16"] == 3 * 2.0 * 1024 ** 3

    tree, metrics = viewer.parse(["tflop16/s", "gbyte/s", "time/ms"], path + ".hatchet")
    values = {f.name: f.values for f in tree.nodes()}
    assert math.isfinite(values["torch mm"]["tflop16/s (inc)"])
    assert values["torch mm"]["tflop16/s (inc)"] > 0
    assert values[f"add_kernel [n={n}]"]["gbyte/s (inc)"] > 0


def test_fast_path_serves_launches_again_after_finalize(tmp_path):
    n = 4096
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    add_kernel[(4,)](x, x, out, n, BLOCK=1024)
    calls = []
    real = add_kernel._launch_general

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    add_kernel._launch_general = counting
    try:
        proton.start(str(tmp_path / "fast"))
        add_kernel[(4,)](x, x, out, n, BLOCK=1024)
        add_kernel[(4,)](x, x, out, n, BLOCK=1024)
        assert len(calls) == 2  # hooked: both through the general path
        proton.finalize()
        add_kernel[(4,)](x, x, out, n, BLOCK=1024)
        assert len(calls) == 2  # the fast path again
    finally:
        del add_kernel._launch_general
    root, _ = json.loads(open(tmp_path / "fast.hatchet").read())
    assert _child(root, "add_kernel")["metrics"]["count"] == 2
