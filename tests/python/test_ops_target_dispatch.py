"""The library picks its Hopper-only TLX kernels (wgmma, TMA) only when the kernels compile for
sm_90a: on a Hopper GPU with WARPWEAVE_TARGET=sm_80 it takes the tl kernels (found on the H200,
where ops.matmul compiled kernels/hopper/gemm_ws.py for sm_80 and failed on tlx.local_alloc)."""

import types

import pytest

from warpweave.ops import _common


@pytest.fixture
def hopper_place(monkeypatch):
    # A torch CUDA place on a device already known to be compute capability 9.0.
    monkeypatch.setitem(_common._sm90_devices, "cuda:7", True)
    return types.SimpleNamespace(on_gpu=True, kind="torch", torch_device="cuda:7")


@pytest.mark.parametrize("target, expected", [(None, True), ("", True), ("sm_90a", True),
                                              ("sm_80", False), ("sm_100a", False)])
def test_tlx_kernels_follow_the_compile_target(monkeypatch, hopper_place, target, expected):
    if target is None:
        monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)
    else:
        monkeypatch.setenv("WARPWEAVE_TARGET", target)
    assert _common._is_sm90(hopper_place) is expected


def test_not_hopper_device(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)
    monkeypatch.setitem(_common._sm90_devices, "cuda:6", False)
    place = types.SimpleNamespace(on_gpu=True, kind="torch", torch_device="cuda:6")
    assert _common._is_sm90(place) is False
    assert _common._is_sm90(types.SimpleNamespace(on_gpu=False, kind="numpy",
                                                  torch_device=None)) is False
