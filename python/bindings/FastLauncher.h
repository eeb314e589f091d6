// The fast launch path of warpweave._native: kernel[grid](...) as one native call.
//
// A FastLauncher belongs to one @jit function; bound to a grid (FastLauncher.bind) it is what
// kernel[grid] returns. A call binds the arguments, computes the specialization key from cheap
// checks (argument types, tensor dtypes and 16-byte alignment, int classes, TensorDescriptors'
// base dtypes and block shapes, constexpr values, launch options) and, for a key seen before,
// packs the parameter buffer and launches on the current torch stream. Everything else (a first
// launch, NumPy arrays, descriptors over anything but CUDA tensors, the interpreter, errors) goes
// to the Python general path, whose GPU kernels are remembered here under their key.
#pragma once

#include <nanobind/nanobind.h>

namespace wwpy {

/// Adds FastLauncher, BoundLaunch, Subscript and make_subscript to the module. The fast path
/// raises its launch and CUDA errors as launchErrorType and cudaErrorType (the module's
/// LaunchError and CudaError), whose references it keeps.
void defineFastLauncher(nanobind::module_& m, PyObject* launchErrorType, PyObject* cudaErrorType);

} // namespace wwpy
