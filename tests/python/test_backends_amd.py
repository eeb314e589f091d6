"""`warpweave.backends.amd` imports (programs written for Triton import it unconditionally and
skip their AMD tests themselves), and using it says that warpweave has no AMD backend."""

import pytest


def test_amd_backend_module_imports_and_refuses_use():
    from warpweave.backends.amd import compiler as amd_compiler

    for cls in (amd_compiler.HIPBackend, amd_compiler.HIPOptions):
        with pytest.raises(NotImplementedError, match="NVIDIA GPUs only"):
            cls(arch="gfx950")


def test_hip_is_never_reported():
    from warpweave import _internal_testing as it

    assert not it.is_hip() and not it.is_hip_cdna4()
