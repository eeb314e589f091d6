# lit configuration of the Tile IR pass tests: each .tir file's RUN lines feed it to ww-opt and
# check the printed IR with FileCheck. ww-opt comes from $WW_OPT (run_lit.py, ctest) or PATH.
import os
import shutil
import subprocess
import sys

import lit.formats

sys.path.insert(0, os.path.dirname(__file__))
from lit_tools import find_filecheck  # noqa: E402

config.name = "warpweave"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".tir"]
config.excludes = ["Output"]
config.test_source_root = os.path.dirname(__file__)
# Keep lit's Output folders out of the source tree.
config.test_exec_root = os.environ.get("WW_LIT_EXEC_ROOT") or os.path.join(
    os.environ.get("TMPDIR", "/tmp"), "warpweave-lit")

ww_opt = os.environ.get("WW_OPT") or shutil.which("ww-opt")
if not ww_opt:
    lit_config.fatal("ww-opt not found: set WW_OPT or put the build directory on PATH")
filecheck = find_filecheck()
if not filecheck:
    lit_config.fatal("FileCheck not found (apt-get install llvm-14-tools)")

# `REQUIRES: pass-NAME` marks a test of a pass this ww-opt may not have registered yet.
help_text = subprocess.run([ww_opt, "--help"], capture_output=True, text=True).stdout
for line in help_text.split("passes:", 1)[-1].splitlines():
    if line.strip():
        config.available_features.add("pass-" + line.split()[0])

path = [os.path.dirname(os.path.abspath(ww_opt)), os.path.dirname(filecheck),
        config.environment.get("PATH", os.environ.get("PATH", ""))]
config.environment["PATH"] = os.pathsep.join(path)
