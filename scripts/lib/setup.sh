# Shared set-up for scripts/demo, scripts/test and scripts/gpu-test: installs what the project needs
# on a fresh machine (apt and pip packages), then builds and installs the package into python3.
# Sourced, not run.

WW_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WW_PY="${WW_PYTHON:-python3}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

ww_log() { printf '[warpweave] %s\n' "$*" >&2; }

# System packages: a C++20 compiler, CMake, Ninja, GoogleTest, FileCheck. Installed only when
# missing, so a machine without network (the GPU machine) or without root passes through when they are there.
ww_apt_deps() {
  local missing=()
  command -v g++ >/dev/null || missing+=(g++)
  command -v cmake >/dev/null || missing+=(cmake)
  command -v ninja >/dev/null || missing+=(ninja-build)
  [ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      ww_log "installing system packages: ${missing[*]}"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      ww_log "missing system packages (${missing[*]}); install them or the build may fail"
    fi
  fi
  # LLVM's FileCheck for the lit tests (tests/lit); on its own so that a missing package skips
  # only those tests.
  if ! command -v FileCheck >/dev/null && ! ls /usr/lib/llvm-*/bin/FileCheck >/dev/null 2>&1; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      ww_log "installing FileCheck (llvm-14-tools)"
      { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq llvm-14-tools >/dev/null; } ||
        ww_log "llvm-14-tools could not be installed: the lit tests will be skipped"
    else
      ww_log "FileCheck not found (llvm-14-tools): the lit tests will be skipped"
    fi
  fi
  # clang-format for scripts/test's format check (the repository's .clang-format).
  if ! command -v clang-format >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      ww_log "installing clang-format"
      { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-format >/dev/null; } ||
        ww_log "clang-format could not be installed: the format check will fail"
    else
      ww_log "clang-format not found: the format check will fail"
    fi
  fi
  if ! command -v ptxas >/dev/null && [ ! -x /usr/local/cuda/bin/ptxas ] && [ -z "${CUDA_HOME:-}" ]; then
    ww_log "no CUDA toolkit found (ptxas): PTX is still emitted, cubins and ptxas checks are skipped"
  fi
}

# Python packages for building (nanobind, scikit-build-core) and testing (numpy, pytest, ml-dtypes,
# lit, and cuobjdump where the CUDA toolkit has none).
ww_pip_deps() {
  local need=()
  "$WW_PY" -c 'import nanobind' 2>/dev/null || need+=(nanobind)
  "$WW_PY" -c 'import scikit_build_core' 2>/dev/null || need+=(scikit-build-core)
  "$WW_PY" -c 'import numpy' 2>/dev/null || need+=(numpy)
  "$WW_PY" -c 'import pytest' 2>/dev/null || need+=(pytest)
  "$WW_PY" -c 'import ml_dtypes' 2>/dev/null || need+=(ml-dtypes) # bf16/fp8 NumPy arrays
  "$WW_PY" -c 'import lit' 2>/dev/null || need+=(lit)                 # tests/lit
  if [ ${#need[@]} -gt 0 ]; then
    ww_log "installing Python packages: ${need[*]}"
    "$WW_PY" -m pip install -q --disable-pip-version-check "${need[@]}"
  fi
  # cuobjdump and the nvdisasm it runs, for the tests that read SASS, where the CUDA toolkit
  # lacks them (NVIDIA's wheels put them in site-packages/nvidia/cu13/bin). Optional: without
  # them those tests skip, so a failed install does not stop the set-up.
  if ! command -v cuobjdump >/dev/null && [ ! -x /usr/local/cuda/bin/cuobjdump ] &&
    ! "$WW_PY" -c 'import glob, nvidia; assert any(glob.glob(p + "/cu*/bin/nvdisasm") for p in nvidia.__path__)' 2>/dev/null; then
    ww_log "installing cuobjdump and nvdisasm (NVIDIA's wheels) for the SASS checks"
    "$WW_PY" -m pip install -q --disable-pip-version-check nvidia-cuda-cuobjdump \
      nvidia-cuda-nvdisasm || ww_log "cuobjdump could not be installed: the SASS checks will skip"
  fi
}

# Builds the C++ library, wwc, the C++ tests and the extension in one CMake build (build/py, kept
# between runs so rebuilds are incremental), and installs the package into python3.
ww_build_install() {
  ww_log "building and installing warpweave (build dir: build/py)"
  (cd "$WW_ROOT" && "$WW_PY" -m pip install -q --disable-pip-version-check --no-build-isolation \
    --no-deps -Cbuild-dir=build/py -Ccmake.define.WW_BUILD_TESTS=ON "$@" .) || return 1
  # pyenv only exposes newly installed scripts (wwc) on PATH after a rehash.
  if command -v pyenv >/dev/null; then pyenv rehash || true; fi
}

ww_setup() {
  ww_apt_deps
  ww_pip_deps
  ww_build_install "$@"
}
