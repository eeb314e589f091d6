"""Finds the tools the lit tests run: FileCheck (LLVM's, any version) and ww-opt."""
import glob
import os
import re
import shutil


def find_filecheck():
    """FileCheck on PATH, else the newest /usr/lib/llvm-N/bin/FileCheck (Debian's llvm-N-tools)."""
    found = shutil.which("FileCheck")
    if found:
        return found
    versions = glob.glob("/usr/lib/llvm-*/bin/FileCheck")
    versions.sort(key=lambda p: int(re.search(r"llvm-(\d+)", p).group(1)))
    return versions[-1] if versions else None
