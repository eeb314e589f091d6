// Loads libcuda.so.1 once, resolves the entry points the runtime uses, and wraps driver errors.
#include "runtime/CudaDriver.h"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace ww::runtime {

namespace {

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

struct LoadState {
  CudaDriver driver;
  std::string error; // non-empty when loading or cuInit failed
};

/// Resolves `name` at the ABI of `version` (cuGetProcAddress picks e.g. cuMemAlloc_v2 for
/// "cuMemAlloc"), falling back to dlsym on `abiName` for drivers without cuGetProcAddress.
template <typename Fn>
bool resolve(void* lib, GetProcAddressV2 v2, GetProcAddressV1 v1, int version, const char* name,
             const char* abiName, Fn& out) {
  void* p = nullptr;
  if (v2) {
    CUdriverProcAddressQueryResult status;
    if (v2(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) p = nullptr;
  } else if (v1) {
    if (v1(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) p = nullptr;
  }
  if (!p) p = ::dlsym(lib, abiName);
  out = reinterpret_cast<Fn>(p);
  return p != nullptr;
}

LoadState loadDriver() {
  LoadState s;
  ::dlerror();
  // WARPWEAVE_LIBCUDA names another driver library: tests and benchmarks load a stub
  // (tools/cuda_stub) to drive the launch path on machines without a GPU.
  const char* requested = std::getenv("WARPWEAVE_LIBCUDA");
  const bool overridden = requested && *requested;
  const std::string path = overridden ? requested : "libcuda.so.1";
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    s.error = overridden ? "CUDA driver WARPWEAVE_LIBCUDA=" + path +
                               " cannot be loaded: " + (why ? why : "dlopen failed")
                         : std::string("CUDA driver not found (libcuda.so.1): ") +
                               (why ? why : "dlopen failed") +
                               "; install the NVIDIA driver, or run kernels in the interpreter "
                               "(WARPWEAVE_INTERPRET=1)";
    return s;
  }
  // The library stays loaded for the life of the process, like any linked driver would.
  CudaDriver& d = s.driver;
  auto driverGetVersion =
      reinterpret_cast<decltype(&::cuDriverGetVersion)>(::dlsym(lib, "cuDriverGetVersion"));
  int driverVersion = 0;
  if (!driverGetVersion || driverGetVersion(&driverVersion) != CUDA_SUCCESS) {
    s.error = "CUDA driver (" + path + ") is unusable: cuDriverGetVersion failed";
    return s;
  }
  d.driverVersion = driverVersion;
  // Ask for the CUDA 12.0 ABI of each entry point. Our function-pointer types come from the
  // header's declarations of the plain names, which newer drivers may have superseded at a newer
  // version with another signature (cuCtxGetDevice_v2 in CUDA 13 takes a context as well): asking
  // at CUDA_VERSION would hand back the new symbol under the old type.
  constexpr int kAbiVersion = 12000;
  const int version = std::min(driverVersion, kAbiVersion);
  auto v2 = reinterpret_cast<GetProcAddressV2>(::dlsym(lib, "cuGetProcAddress_v2"));
  auto v1 = v2 ? nullptr : reinterpret_cast<GetProcAddressV1>(::dlsym(lib, "cuGetProcAddress"));

  std::string missing;
#define WW_RESOLVE(member, name, abi)                                                              \
  if (!resolve(lib, v2, v1, version, name, abi, d.member)) missing += std::string(" ") + name;
  WW_RESOLVE(init, "cuInit", "cuInit")
  WW_RESOLVE(driverGetVersion, "cuDriverGetVersion", "cuDriverGetVersion")
  WW_RESOLVE(getErrorString, "cuGetErrorString", "cuGetErrorString")
  WW_RESOLVE(getErrorName, "cuGetErrorName", "cuGetErrorName")
  WW_RESOLVE(deviceGet, "cuDeviceGet", "cuDeviceGet")
  WW_RESOLVE(deviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount")
  WW_RESOLVE(deviceGetAttribute, "cuDeviceGetAttribute", "cuDeviceGetAttribute")
  WW_RESOLVE(ctxGetCurrent, "cuCtxGetCurrent", "cuCtxGetCurrent")
  WW_RESOLVE(ctxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent")
  WW_RESOLVE(ctxGetDevice, "cuCtxGetDevice", "cuCtxGetDevice")
  WW_RESOLVE(ctxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize")
  WW_RESOLVE(devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain")
  WW_RESOLVE(moduleLoadDataEx, "cuModuleLoadDataEx", "cuModuleLoadDataEx")
  WW_RESOLVE(moduleUnload, "cuModuleUnload", "cuModuleUnload")
  WW_RESOLVE(moduleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction")
  WW_RESOLVE(funcSetAttribute, "cuFuncSetAttribute", "cuFuncSetAttribute")
  WW_RESOLVE(funcGetAttribute, "cuFuncGetAttribute", "cuFuncGetAttribute")
  WW_RESOLVE(launchKernel, "cuLaunchKernel", "cuLaunchKernel")
  WW_RESOLVE(launchKernelEx, "cuLaunchKernelEx", "cuLaunchKernelEx")
  WW_RESOLVE(streamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize")
  WW_RESOLVE(tensorMapEncodeTiled, "cuTensorMapEncodeTiled", "cuTensorMapEncodeTiled")
  WW_RESOLVE(memAlloc, "cuMemAlloc", "cuMemAlloc_v2")
  WW_RESOLVE(memFree, "cuMemFree", "cuMemFree_v2")
  WW_RESOLVE(memcpyHtoD, "cuMemcpyHtoD", "cuMemcpyHtoD_v2")
  WW_RESOLVE(memcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2")
  WW_RESOLVE(memsetD8, "cuMemsetD8", "cuMemsetD8_v2")
  WW_RESOLVE(pointerGetAttribute, "cuPointerGetAttribute", "cuPointerGetAttribute")
#undef WW_RESOLVE
  resolve(lib, v2, v1, version, "cuOccupancyMaxActiveClusters", "cuOccupancyMaxActiveClusters",
          d.occupancyMaxActiveClusters);
  if (!missing.empty()) {
    s.error = "CUDA driver (" + path + ", version " + std::to_string(driverVersion) +
              ") lacks entry points:" + missing + "; warpweave needs a CUDA 12.0 or newer driver";
    return s;
  }
  CUresult r = d.init(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.getErrorName(r, &name);
    s.error = std::string("cuInit failed: ") + (name ? name : "unknown error") +
              " (is a GPU present and visible? check CUDA_VISIBLE_DEVICES)";
  }
  return s;
}

const LoadState& state() {
  static const LoadState s = loadDriver();
  return s;
}

} // namespace

const CudaDriver& driver() {
  const LoadState& s = state();
  if (!s.error.empty()) throw CudaError(s.error);
  return s.driver;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const CudaDriver& d = state().driver;
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.getErrorName) d.getErrorName(r, &name);
  if (d.getErrorString) d.getErrorString(r, &text);
  throw CudaError(std::string(what) + " failed: " + (name ? name : "CUDA error ") +
                  (name ? "" : std::to_string(static_cast<int>(r))) +
                  (text ? std::string(" (") + text + ")" : std::string()));
}

CUcontext ensureContext(int device) {
  const CudaDriver& d = driver();
  CUcontext ctx = nullptr;
  check(d.ctxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx) return ctx;
  CUdevice dev;
  check(d.deviceGet(&dev, device), "cuDeviceGet");
  // Retained for the life of the process: the primary context is shared with the CUDA runtime
  // (and PyTorch), so releasing it here could tear it down under them.
  check(d.devicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.ctxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

} // namespace ww::runtime

namespace ww {

bool cudaAvailable(std::string* reason) {
  try {
    const runtime::CudaDriver& d = runtime::driver();
    int count = 0;
    runtime::check(d.deviceGetCount(&count), "cuDeviceGetCount");
    if (count == 0) {
      if (reason) *reason = "the CUDA driver reports no devices";
      return false;
    }
    return true;
  } catch (const CudaError& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

void synchronize(void* stream) {
  const runtime::CudaDriver& d = runtime::driver();
  runtime::ensureContext();
  runtime::check(d.streamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  const runtime::CudaDriver& d = runtime::driver();
  runtime::ensureContext();
  CUdeviceptr p = 0;
  runtime::check(d.memAlloc(&p, bytes ? bytes : 1), "cuMemAlloc");
  address_ = p;
}

DeviceBuffer::~DeviceBuffer() {
  if (address_) runtime::driver().memFree(static_cast<CUdeviceptr>(address_));
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) throw LaunchError("DeviceBuffer::upload: more bytes than the buffer holds");
  runtime::check(runtime::driver().memcpyHtoD(address_, host, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_) throw LaunchError("DeviceBuffer::download: more bytes than the buffer holds");
  runtime::check(runtime::driver().memcpyDtoH(host, address_, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::fill(uint8_t byte) {
  runtime::check(runtime::driver().memsetD8(address_, byte, bytes_), "cuMemsetD8");
}

} // namespace ww
