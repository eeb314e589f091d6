"""`kernel.asm["sass"]` and `warpweave.tools.disasm.get_sass` (Triton's `triton.tools.disasm`):
the cubin disassembled by the CUDA toolkit's cuobjdump when asked for, not one of the listed
stages; a clear KeyError where there is no cuobjdump or no cubin."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.tools import disasm

pytest.importorskip("warpweave._native")
pytestmark = pytest.mark.usefixtures("requires_ptxas")


@ww.jit
def scale(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, tl.load(X + offs) * 3.0)


def compiled(target="sm_90a"):
    scale.cache.clear()  # a fresh `asm`, without the SASS an earlier test asked for
    x = np.zeros(256, np.float32)
    values = scale.bind((x, x), dict(N=256))
    return scale.compile_for(values, False, (4, 1, 1), target=target)


def test_sass_is_the_cubins_disassembly():
    if disasm.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (CUDA toolkit) on this machine")
    k = compiled()
    assert "sass" not in k.asm.keys()  # as in Triton: made when asked for
    sass = k.asm["sass"]
    assert "Function : scale" in sass
    assert "LDG.E" in sass and "STG.E" in sass and "FMUL" in sass
    assert sass == disasm.get_sass(k.asm["cubin"])
    assert "EXIT" in disasm.get_sass(k.asm["cubin"], fun="scale")


def test_missing_cuobjdump_is_a_key_error_that_says_so(monkeypatch):
    k = compiled()
    monkeypatch.setattr(disasm, "find_cuobjdump", lambda: None)
    with pytest.raises(KeyError, match="cuobjdump from the CUDA toolkit"):
        k.asm["sass"]
    monkeypatch.setattr(disasm, "find_cuobjdump", lambda: "/bin/true")
    with pytest.raises(RuntimeError, match="needs the kernel's cubin"):
        disasm.get_sass(b"")
