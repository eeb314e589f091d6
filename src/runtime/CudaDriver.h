// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") (or $WARPWEAVE_LIBCUDA, a
// stub for GPU-less tests) so that the library links and its CPU tests run without a GPU driver.
#pragma once

#include "warpweave/runtime.h"

#include <cuda.h>

#include <string>

namespace ww::runtime {

/// Driver entry points, resolved through cuGetProcAddress at the ABI version we were written
/// against (so that e.g. memAlloc is cuMemAlloc_v2), falling back to dlsym.
struct CudaDriver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) ctxGetDevice = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) devicePrimaryCtxRetain = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) funcGetAttribute = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuLaunchKernelEx) launchKernelEx = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) memcpyDtoH = nullptr;
  decltype(&::cuMemsetD8) memsetD8 = nullptr;
  decltype(&::cuPointerGetAttribute) pointerGetAttribute = nullptr;
  /// Optional (CUDA 11.8+): nullptr when the driver lacks it, and only the cluster occupancy
  /// query then answers "unknown"; every other use of the driver goes on.
  decltype(&::cuOccupancyMaxActiveClusters) occupancyMaxActiveClusters = nullptr;

  int driverVersion = 0; // e.g. 13000
};

/// The loaded and initialised driver (cuInit done). Throws CudaError when libcuda.so.1 is missing
/// or cuInit fails; the reason is remembered, so later calls fail fast with the same message.
const CudaDriver& driver();

/// Throws CudaError "<what>: CUDA_ERROR_X (description)" unless `r` is CUDA_SUCCESS.
void check(CUresult r, const char* what);

/// Makes sure a context is current on this thread: keeps the current one (PyTorch's) or retains
/// and sets device `device`'s primary context. Returns the current context.
CUcontext ensureContext(int device = 0);

} // namespace ww::runtime
