"""SASS of a compiled kernel (Triton's `triton.tools.disasm`): `get_sass(cubin)` runs the CUDA
toolkit's cuobjdump on the cubin's bytes; `kernel.asm["sass"]` is the same text. The toolkit is
found as the compiler finds ptxas: $WARPWEAVE_PTXAS's folder, $CUDA_HOME/bin, $CUDA_PATH/bin,
/usr/local/cuda/bin, then PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


def find_cuobjdump() -> str | None:
    """The cuobjdump to run, or None where the CUDA toolkit is not installed."""
    dirs = []
    ptxas = os.environ.get("WARPWEAVE_PTXAS")
    if ptxas:
        dirs.append(os.path.dirname(ptxas))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(os.path.join(os.environ[var], "bin"))
    dirs.append("/usr/local/cuda/bin")
    for d in dirs:
        tool = os.path.join(d, "cuobjdump")
        if os.path.isfile(tool) and os.access(tool, os.X_OK):
            return tool
    return shutil.which("cuobjdump")


def get_sass(cubin: bytes, fun: str | None = None) -> str:
    """cuobjdump -sass of `cubin` (of function `fun` alone when given). Raises RuntimeError
    naming what is missing when there is no cuobjdump, or with its message when it fails."""
    tool = find_cuobjdump()
    if tool is None:
        raise RuntimeError("SASS needs cuobjdump from the CUDA toolkit, which was not found "
                           "(looked in $WARPWEAVE_PTXAS's folder, $CUDA_HOME/bin, $CUDA_PATH/bin, "
                           "/usr/local/cuda/bin and PATH)")
    if not cubin:
        raise RuntimeError("SASS needs the kernel's cubin; this kernel has none (an interpreted "
                           "kernel, or a compile that stopped at PTX)")
    with tempfile.TemporaryDirectory(prefix="ww-sass-") as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(bytes(cubin))
        cmd = [tool, "-sass"] + (["-fun", fun] if fun else []) + [path]
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout
