// Loading compiled kernels into CUDA contexts and launching them: parameter layout and packing,
// dynamic shared memory above 48 KB, clusters through cuLaunchKernelEx, host TMA descriptors.
#include "runtime/CudaDriver.h"
#include "runtime/Process.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

namespace ww {

void checkClusterGrid(const std::string& kernel, const std::array<unsigned, 3>& cluster,
                      const std::array<unsigned, 3>& grid) {
  const unsigned ctas = cluster[0] * cluster[1] * cluster[2];
  const bool oneD = cluster[1] == 1 && cluster[2] == 1;
  for (size_t axis = 0; axis < 3; ++axis) {
    if (cluster[axis] == 0 || grid[axis] % cluster[axis] == 0) continue;
    std::string shape = oneD ? ""
                             : "=(" + std::to_string(cluster[0]) + ", " +
                                   std::to_string(cluster[1]) + ", " + std::to_string(cluster[2]) +
                                   ")";
    throw LaunchError("kernel '" + kernel + "' runs in clusters of " + std::to_string(ctas) +
                      " CTAs (ctas_per_cga" + shape + "): grid[" + std::to_string(axis) +
                      "] = " + std::to_string(grid[axis]) + " must be a multiple of " +
                      std::to_string(cluster[axis]));
  }
}

namespace {

constexpr int kDefaultSharedLimit = 48 * 1024;

bool startsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

/// A scalar param type's kind and size from its name ("i32", "fp32", "i1", ...); false when the
/// name is not a scalar the launcher can pass.
bool scalarSlot(const std::string& type, ParamSlot::Kind& kind, int& size) {
  static const struct {
    const char* name;
    ParamSlot::Kind kind;
    int size;
  } kScalars[] = {
      {"i1", ParamSlot::Kind::Int, 1},      {"i8", ParamSlot::Kind::Int, 1},
      {"u8", ParamSlot::Kind::Int, 1},      {"i16", ParamSlot::Kind::Int, 2},
      {"u16", ParamSlot::Kind::Int, 2},     {"i32", ParamSlot::Kind::Int, 4},
      {"u32", ParamSlot::Kind::Int, 4},     {"i64", ParamSlot::Kind::Int, 8},
      {"u64", ParamSlot::Kind::Int, 8},     {"fp32", ParamSlot::Kind::Float, 4},
      {"fp64", ParamSlot::Kind::Double, 8},
  };
  for (const auto& s : kScalars)
    if (type == s.name) {
      kind = s.kind;
      size = s.size;
      return true;
    }
  return false;
}

} // namespace

int elementSize(const std::string& dtype) {
  if (dtype == "fp8e4nv" || dtype == "fp8e5" || dtype == "fp8e4b15" || dtype == "fp8e4b8" ||
      dtype == "fp8e5b16" || dtype == "i8" || dtype == "u8" || dtype == "i1")
    return 1;
  if (dtype == "fp16" || dtype == "bf16" || dtype == "i16" || dtype == "u16") return 2;
  if (dtype == "fp32" || dtype == "i32" || dtype == "u32") return 4;
  if (dtype == "fp64" || dtype == "i64" || dtype == "u64") return 8;
  throw LaunchError(
      "unknown element type '" + dtype +
      "': expected fp16, bf16, fp32, fp64, fp8e4nv, fp8e5, fp8e4b15, fp8e4b8, fp8e5b16, i1, "
      "i8..i64 or u8..u64");
}

std::vector<ParamSlot> layoutParams(const std::vector<KernelParam>& params, int* totalBytes) {
  std::vector<ParamSlot> slots;
  int offset = 0;
  for (const KernelParam& p : params) {
    ParamSlot s;
    s.name = p.name;
    s.type = p.type;
    int align = 1;
    if (startsWith(p.type, "ptr<") || startsWith(p.type, "*")) {
      s.kind = ParamSlot::Kind::Pointer;
      s.size = 8;
      align = 8;
    } else if (startsWith(p.type, "desc<")) {
      s.kind = ParamSlot::Kind::Tensor;
      s.size = static_cast<int>(sizeof(TensorMap::bytes));
      align = 64;
    } else if (scalarSlot(p.type, s.kind, s.size)) {
      align = s.size;
    } else {
      throw LaunchError("kernel parameter '" + p.name + "' has type '" + p.type +
                        "', which the launcher cannot pass (expected ptr<T>, i1..i64, u8..u64, "
                        "fp32, fp64 or desc<...>)");
    }
    if (p.sizeBytes != 0 && p.sizeBytes != s.size)
      throw std::logic_error("kernel parameter '" + p.name + "' of type '" + p.type + "' is " +
                             std::to_string(p.sizeBytes) + " bytes; the launcher expected " +
                             std::to_string(s.size));
    offset = static_cast<int>(alignTo(offset, align));
    s.offset = offset;
    offset += s.size;
    slots.push_back(std::move(s));
  }
  if (totalBytes) *totalBytes = offset;
  return slots;
}

void packArgs(const std::vector<ParamSlot>& slots, const std::vector<LaunchArg>& args,
              uint8_t* buffer) {
  if (args.size() != slots.size()) {
    std::string names;
    for (const ParamSlot& s : slots) names += (names.empty() ? "" : ", ") + s.name;
    throw LaunchError("kernel expects " + std::to_string(slots.size()) + " runtime arguments (" +
                      names + "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const ParamSlot& s = slots[i];
    const LaunchArg& a = args[i];
    uint8_t* dst = buffer + s.offset;
    auto wrongKind = [&](const char* expected) {
      static const char* kKindNames[] = {"a pointer", "an integer", "a float", "a tensor map"};
      throw LaunchError("argument '" + s.name + "' (" + s.type + ") expects " + expected +
                        ", got " + kKindNames[static_cast<int>(a.kind)]);
    };
    switch (s.kind) {
    case ParamSlot::Kind::Pointer:
      if (a.kind != LaunchArg::Kind::Pointer && a.kind != LaunchArg::Kind::Int)
        wrongKind("a device pointer");
      std::memcpy(dst, &a.bits, 8);
      break;
    case ParamSlot::Kind::Int:
      if (a.kind != LaunchArg::Kind::Int) wrongKind("an integer");
      // Little-endian: the low `size` bytes are the truncated value.
      std::memcpy(dst, &a.bits, static_cast<size_t>(s.size));
      break;
    case ParamSlot::Kind::Float: {
      if (a.kind != LaunchArg::Kind::Float && a.kind != LaunchArg::Kind::Int) wrongKind("a number");
      float v = a.kind == LaunchArg::Kind::Float ? static_cast<float>(a.real)
                                                 : static_cast<float>(static_cast<int64_t>(a.bits));
      std::memcpy(dst, &v, 4);
      break;
    }
    case ParamSlot::Kind::Double: {
      if (a.kind != LaunchArg::Kind::Float && a.kind != LaunchArg::Kind::Int) wrongKind("a number");
      double v = a.kind == LaunchArg::Kind::Float
                     ? a.real
                     : static_cast<double>(static_cast<int64_t>(a.bits));
      std::memcpy(dst, &v, 8);
      break;
    }
    case ParamSlot::Kind::Tensor:
      if (a.kind != LaunchArg::Kind::Tensor || !a.tensorMap) wrongKind("a tensor descriptor");
      std::memcpy(dst, a.tensorMap->bytes.data(), a.tensorMap->bytes.size());
      break;
    }
  }
}

TensorMap encodeTensorMap(const std::string& dtype, uint64_t globalAddress,
                          const std::vector<int64_t>& globalDims,
                          const std::vector<int64_t>& globalStrides,
                          const std::vector<int32_t>& boxDims, int swizzleBytes) {
  const size_t rank = globalDims.size();
  if (rank < 1 || rank > 5)
    throw LaunchError("tensor descriptor: rank " + std::to_string(rank) + " is not 1..5");
  if (globalStrides.size() != rank || boxDims.size() != rank)
    throw LaunchError(
        "tensor descriptor: shape, strides and block_shape must have the same rank (" +
        std::to_string(rank) + ", " + std::to_string(globalStrides.size()) + ", " +
        std::to_string(boxDims.size()) + ")");
  CUtensorMapDataType type;
  // "fp4_padded": packed e2m1 (uint8 bytes of two values) that TMA writes to shared memory 16
  // values to 16 bytes, for a mixed block-scaled MMA (tcgen05.mma .kind::mxf8f6f4). Dimensions
  // and the box count 4-bit values; strides are in bytes.
  const bool fp4Padded = dtype == "fp4_padded";
  if (fp4Padded)
    type = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B;
  else if (dtype == "fp16")
    type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else if (dtype == "bf16")
    type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  else if (dtype == "fp32")
    type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if (dtype == "fp64")
    type = CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
  else if (dtype == "i32")
    type = CU_TENSOR_MAP_DATA_TYPE_INT32;
  else if (dtype == "u32")
    type = CU_TENSOR_MAP_DATA_TYPE_UINT32;
  else if (dtype == "i64")
    type = CU_TENSOR_MAP_DATA_TYPE_INT64;
  else if (dtype == "u64")
    type = CU_TENSOR_MAP_DATA_TYPE_UINT64;
  else if (dtype == "i16" || dtype == "u16")
    type = CU_TENSOR_MAP_DATA_TYPE_UINT16;
  else if (elementSize(dtype) == 1 && dtype != "i1")
    type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  else
    throw LaunchError("tensor descriptor: element type '" + dtype + "' cannot be loaded by TMA");
  const int64_t elem = fp4Padded ? 1 : elementSize(dtype);
  if (globalAddress % 16 != 0)
    throw LaunchError("tensor descriptor: the base address must be 16-byte aligned");
  if (fp4Padded) {
    // cuTensorMapEncodeTiled's rules for CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B.
    std::string problem;
    if (globalAddress % 32 != 0)
      problem = "the base address must be 32-byte aligned";
    else if (globalDims[rank - 1] % 128 != 0)
      problem = "the innermost dimension must be a multiple of 128 values (64 bytes)";
    else if (boxDims[rank - 1] != 128)
      problem = "the innermost block dimension must be 128 values (64 bytes)";
    else if (swizzleBytes != 0 && swizzleBytes != 128)
      problem = "the swizzle must be none or 128 bytes";
    for (size_t d = 0; problem.empty() && d + 1 < rank; ++d)
      if (globalStrides[d] % 32 != 0)
        problem = "stride of dimension " + std::to_string(d) + " is " +
                  std::to_string(globalStrides[d]) + " bytes, not a multiple of 32";
    if (!problem.empty())
      throw LaunchError("tensor descriptor of packed e2m1 loaded padded (the e2m1 operand of a "
                        "mixed tlx.async_dot_scaled): " +
                        problem);
  }
  if (globalStrides[rank - 1] != 1)
    throw LaunchError("tensor descriptor: the innermost (last) dimension must have stride 1, got " +
                      std::to_string(globalStrides[rank - 1]));
  CUtensorMapSwizzle swizzle;
  switch (swizzleBytes) {
  case 0:
    swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
    break;
  case 32:
    swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    break;
  case 64:
    swizzle = CU_TENSOR_MAP_SWIZZLE_64B;
    break;
  case 128:
    swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    break;
  default:
    throw LaunchError("tensor descriptor: swizzle of " + std::to_string(swizzleBytes) +
                      " bytes is not 0, 32, 64 or 128");
  }
  // The driver lists dimensions innermost first; shapes here are row-major (innermost last).
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], elementStrides[5];
  for (size_t i = 0; i < rank; ++i) {
    size_t src = rank - 1 - i;
    if (globalDims[src] <= 0)
      throw LaunchError("tensor descriptor: dimension " + std::to_string(src) + " has size " +
                        std::to_string(globalDims[src]));
    if (boxDims[src] <= 0 || boxDims[src] > 256)
      throw LaunchError("tensor descriptor: block_shape[" + std::to_string(src) +
                        "] = " + std::to_string(boxDims[src]) + " is not in 1..256");
    dims[i] = static_cast<cuuint64_t>(globalDims[src]);
    box[i] = static_cast<cuuint32_t>(boxDims[src]);
    elementStrides[i] = 1;
    if (i > 0) {
      int64_t bytes = globalStrides[src] * elem;
      if (bytes <= 0 || bytes % 16 != 0)
        throw LaunchError("tensor descriptor: stride of dimension " + std::to_string(src) + " is " +
                          std::to_string(bytes) + " bytes; TMA needs a positive multiple of 16");
      strides[i - 1] = static_cast<cuuint64_t>(bytes);
    }
  }
  if (swizzleBytes != 0 && box[0] * elem > swizzleBytes)
    throw LaunchError("tensor descriptor: the innermost block dimension is " +
                      std::to_string(box[0] * elem) + " bytes, more than the " +
                      std::to_string(swizzleBytes) + "-byte swizzle span");
  const runtime::CudaDriver& d = runtime::driver();
  TensorMap map;
  static_assert(sizeof(CUtensorMap) == sizeof(TensorMap::bytes));
  runtime::check(d.tensorMapEncodeTiled(
                     reinterpret_cast<CUtensorMap*>(map.bytes.data()), type,
                     static_cast<cuuint32_t>(rank), reinterpret_cast<void*>(globalAddress), dims,
                     strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                 "cuTensorMapEncodeTiled");
  return map;
}

// ---------------------------------------------------------------------------------------------
// GpuKernel
// ---------------------------------------------------------------------------------------------

namespace {

// cuLaunchKernel with a pointer per param. On the H200 cuLaunchKernelEx and the packed buffer in
// `extra` each cost the driver 0.07 us less per bare launch (3.57 against 3.64 us in C++ loops,
// bench/launch_bench.py), within the noise of whole kernel[grid] calls (4.9 to 5.2 us in every
// form): benchmarks switch forms with setLaunchForm.
std::atomic<LaunchForm> gLaunchForm{LaunchForm::KernelParams};

/// The compute capability a target's code is built for; `exact`: 'a' targets use
/// architecture-specific instructions and run on that capability alone.
struct TargetArch {
  int major, minor;
  bool exact;
};

TargetArch targetArch(Target t) {
  switch (t) {
  case Target::SM80:
    return {8, 0, false};
  case Target::SM90a:
    return {9, 0, true};
  case Target::SM100a:
    return {10, 0, true};
  }
  return {9, 0, true};
}

/// Machine code runs within its major revision, from its minor up.
bool cubinRunsOn(TargetArch a, int major, int minor) {
  return major == a.major && (a.exact ? minor == a.minor : minor >= a.minor);
}

/// The driver compiles PTX for its own device or any later one.
bool ptxRunsOn(TargetArch a, int major, int minor) {
  if (a.exact) return major == a.major && minor == a.minor;
  return major > a.major || (major == a.major && minor >= a.minor);
}

/// The target warpweave compiles for on a device of this capability, or nullptr.
const char* targetFor(int major) {
  if (major == 8) return "sm_80";
  if (major == 9) return "sm_90a";
  if (major == 10) return "sm_100a";
  return nullptr;
}

} // namespace

void setLaunchForm(LaunchForm form) {
  gLaunchForm.store(form, std::memory_order_relaxed);
}

LaunchForm launchForm() {
  return gLaunchForm.load(std::memory_order_relaxed);
}

const char* launchFormName(LaunchForm form) {
  switch (form) {
  case LaunchForm::KernelParams:
    return "params";
  case LaunchForm::LaunchEx:
    return "ex";
  case LaunchForm::ParamBuffer:
    return "buffer";
  }
  return "params";
}

LaunchForm parseLaunchForm(const std::string& name) {
  for (LaunchForm f : {LaunchForm::KernelParams, LaunchForm::LaunchEx, LaunchForm::ParamBuffer})
    if (name == launchFormName(f)) return f;
  throw std::invalid_argument("unknown launch form '" + name + "': expected params, ex or buffer");
}

struct GpuKernel::Impl {
  std::string name;
  std::vector<KernelParam> params;
  std::vector<ParamSlot> slots;
  int paramBytes = 0;
  int numWarps = 4;
  int numCtas = 1;
  std::array<unsigned, 3> clusterDims = {1, 1, 1}; // product: numCtas
  int sharedBytes = 0;
  Target target = Target::SM90a;
  std::vector<uint8_t> cubin;
  std::string ptx; // c_str() gives the NUL terminator the JIT needs

  struct Loaded {
    CUcontext context;
    CUmodule module;
    CUfunction function;
  };
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<const Loaded>> loaded; // one per context launched in
  /// The last context's record, checked without the mutex (records are never freed before
  /// the kernel, so a stale pointer still names a valid pair).
  mutable std::atomic<const Loaded*> last{nullptr};
  /// maxActiveClusters' answers by context and cluster size (under `mutex`): they hold for the
  /// life of the context, and persistent kernels' wrappers ask before every launch.
  struct ClusterCount {
    CUcontext context;
    int clusterSize;
    int clusters;
  };
  mutable std::vector<ClusterCount> clusterCounts;

  ~Impl() {
    // Best effort: at process exit the driver may already have torn the contexts down.
    try {
      const runtime::CudaDriver& d = runtime::driver();
      for (const auto& l : loaded) d.moduleUnload(l->module);
    } catch (...) {
    }
  }

  /// True to load the cubin, false for the PTX, on the current context's device; a
  /// LaunchError when neither runs there.
  bool chooseCubin() const {
    const runtime::CudaDriver& d = runtime::driver();
    CUdevice dev;
    runtime::check(d.ctxGetDevice(&dev), "cuCtxGetDevice");
    int major = 0, minor = 0;
    runtime::check(d.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                   "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
    runtime::check(d.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                   "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
    const TargetArch arch = targetArch(target);
    if (!cubin.empty() && cubinRunsOn(arch, major, minor)) return true;
    if (!ptx.empty() && ptxRunsOn(arch, major, minor)) return false;
    std::string why = "kernel '" + name + "' was compiled for " + targetName(target) +
                      ", which cannot run on this device (compute capability " +
                      std::to_string(major) + "." + std::to_string(minor) + ")";
    if (ptx.empty() && ptxRunsOn(arch, major, minor))
      why += ": its cubin is for another architecture and no PTX came with it for the driver to "
             "compile";
    if (const char* wanted = targetFor(major))
      why += std::string("; compile it for ") + wanted + " (WARPWEAVE_TARGET, wwc --target)";
    throw LaunchError(why);
  }

  CUfunction load(CUcontext ctx) const {
    const runtime::CudaDriver& d = runtime::driver();
    CUmodule module = nullptr;
    if (!chooseCubin()) {
      // The driver JIT reports PTX errors only into a log buffer we hand it.
      char errorLog[8192] = {0};
      CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void* values[] = {errorLog, reinterpret_cast<void*>(sizeof errorLog)};
      CUresult r = d.moduleLoadDataEx(&module, ptx.c_str(), 2, opts, values);
      if (r != CUDA_SUCCESS) {
        try {
          runtime::check(r, "cuModuleLoadDataEx (PTX JIT)");
        } catch (const CudaError& e) {
          throw CudaError(std::string(e.what()) + " for kernel '" + name + "':\n" + errorLog);
        }
      }
    } else {
      runtime::check(d.moduleLoadDataEx(&module, cubin.data(), 0, nullptr, nullptr),
                     "cuModuleLoadDataEx");
    }
    CUfunction fn = nullptr;
    CUresult r = d.moduleGetFunction(&fn, module, name.c_str());
    if (r != CUDA_SUCCESS) {
      d.moduleUnload(module);
      runtime::check(r, ("cuModuleGetFunction('" + name + "')").c_str());
    }
    try {
      configure(fn);
    } catch (...) {
      d.moduleUnload(module);
      throw;
    }
    loaded.push_back(std::make_unique<const Loaded>(Loaded{ctx, module, fn}));
    last.store(loaded.back().get(), std::memory_order_release);
    return fn;
  }

  /// Asks for the shared-memory carveout that fits as many blocks per SM as registers and threads
  /// allow. Left to itself the driver sized shared memory for fewer blocks than that after an
  /// L2-flushing memset (persistent TMA softmax then ran at 0.7x the speed), while
  /// the largest carveout took L1 from register kernels that reread small vectors (layernorm
  /// forward 0.81x -> 0.75x of copy on the H200): so, exactly what the resident blocks need.
  void setSharedCarveout(CUfunction fn, int blockShared) const {
    const runtime::CudaDriver& d = runtime::driver();
    CUdevice dev;
    runtime::check(d.ctxGetDevice(&dev), "cuCtxGetDevice");
    int smPerSm = 0, regs = 0;
    runtime::check(d.deviceGetAttribute(
                       &smPerSm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev),
                   "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)");
    runtime::check(d.funcGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn),
                   "cuFuncGetAttribute(NUM_REGS)");
    if (smPerSm <= 0) return;
    // Hopper and Ampere SMs: 2048 threads, 32 blocks, 64K registers allocated per warp in
    // units of 256; each block also holds 1 KB of shared memory the system reserves.
    int blocks = std::min(32, 64 / std::max(1, numWarps));
    int regsPerWarp = (regs * 32 + 255) / 256 * 256;
    if (regsPerWarp > 0) blocks = std::min(blocks, 65536 / (regsPerWarp * std::max(1, numWarps)));
    int64_t needed = int64_t(std::max(1, blocks)) * (blockShared + 1024);
    int percent = static_cast<int>(std::min<int64_t>(100, (needed * 100 + smPerSm - 1) / smPerSm));
    runtime::check(
        d.funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent),
        "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)");
  }

  void configure(CUfunction fn) const {
    const runtime::CudaDriver& d = runtime::driver();
    int staticShared = 0;
    runtime::check(d.funcGetAttribute(&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
                   "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
    if (staticShared + sharedBytes > kDefaultSharedLimit) {
      CUdevice dev;
      runtime::check(d.ctxGetDevice(&dev), "cuCtxGetDevice");
      int optin = 0;
      runtime::check(
          d.deviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
          "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)");
      if (staticShared + sharedBytes > optin)
        throw LaunchError(
            "kernel '" + name + "' needs " + std::to_string(staticShared + sharedBytes) +
            " bytes of shared memory; the device allows " + std::to_string(optin) + " per block");
      runtime::check(
          d.funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, sharedBytes),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    }
    if (staticShared + sharedBytes > 0) setSharedCarveout(fn, staticShared + sharedBytes);
    if (numCtas > 8)
      runtime::check(d.funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                     "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
  }

  CUfunction function() const {
    CUcontext ctx = runtime::ensureContext();
    const Loaded* recent = last.load(std::memory_order_acquire);
    if (recent && recent->context == ctx) return recent->function;
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& l : loaded)
      if (l->context == ctx) {
        last.store(l.get(), std::memory_order_release);
        return l->function;
      }
    return load(ctx);
  }
};

GpuKernel::GpuKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GpuKernel::GpuKernel(const CompiledKernel& k) : impl_(std::make_unique<Impl>()) {
  if (k.name.empty()) throw std::invalid_argument("GpuKernel: the kernel has no entry name");
  if (k.cubin.empty() && k.ptx.empty())
    throw std::invalid_argument("GpuKernel: kernel '" + k.name +
                                "' has neither a cubin nor PTX (compile to Stage::Cubin or "
                                "Stage::Ptx)");
  impl_->name = k.name;
  impl_->params = k.params;
  impl_->slots = layoutParams(k.params, &impl_->paramBytes);
  impl_->numWarps = k.numWarps;
  impl_->numCtas = k.numCtas < 1 ? 1 : k.numCtas;
  // A kernel from older metadata (or a caller that set numCtas alone) clusters along x.
  const std::array<int, 3>& dims = k.clusterDims;
  if (int64_t(dims[0]) * dims[1] * dims[2] == impl_->numCtas && dims[0] >= 1 && dims[1] >= 1 &&
      dims[2] >= 1)
    impl_->clusterDims = {unsigned(dims[0]), unsigned(dims[1]), unsigned(dims[2])};
  else
    impl_->clusterDims = {unsigned(impl_->numCtas), 1, 1};
  impl_->sharedBytes = k.sharedBytes;
  impl_->target = k.target;
  impl_->cubin = k.cubin;
  impl_->ptx = k.ptx;
}

GpuKernel GpuKernel::fromFiles(const std::string& cubinPath, const std::string& metaJsonPath) {
  std::string meta, cubin;
  if (!runtime::readFile(metaJsonPath, meta))
    throw std::invalid_argument("cannot read kernel metadata '" + metaJsonPath + "'");
  if (!runtime::readFile(cubinPath, cubin) || cubin.empty())
    throw std::invalid_argument("cannot read cubin '" + cubinPath + "'");
  CompiledKernel k = parseKernelMetadata(meta);
  k.cubin.assign(cubin.begin(), cubin.end());
  return GpuKernel(k);
}

GpuKernel::~GpuKernel() = default;
GpuKernel::GpuKernel(GpuKernel&&) noexcept = default;
GpuKernel& GpuKernel::operator=(GpuKernel&&) noexcept = default;

const std::string& GpuKernel::name() const {
  return impl_->name;
}
const std::vector<KernelParam>& GpuKernel::params() const {
  return impl_->params;
}
const std::vector<ParamSlot>& GpuKernel::slots() const {
  return impl_->slots;
}
int GpuKernel::paramBytes() const {
  return impl_->paramBytes;
}
int GpuKernel::numWarps() const {
  return impl_->numWarps;
}
int GpuKernel::numCtas() const {
  return impl_->numCtas;
}
int GpuKernel::sharedBytes() const {
  return impl_->sharedBytes;
}

void GpuKernel::prepare() const {
  impl_->function();
}

void GpuKernel::launch(Dim3 grid, void* stream, const std::vector<LaunchArg>& args,
                       bool programmaticDependent) const {
  // 64-byte alignment keeps tensor maps at their natural alignment inside the buffer.
  alignas(64) uint8_t small[1024];
  std::vector<uint8_t> large;
  uint8_t* buffer = small;
  if (impl_->paramBytes > static_cast<int>(sizeof small)) {
    large.resize(static_cast<size_t>(impl_->paramBytes) + 64);
    buffer = reinterpret_cast<uint8_t*>(alignTo(reinterpret_cast<intptr_t>(large.data()), 64));
  }
  packArgs(impl_->slots, args, buffer);
  launchPacked(grid, stream, buffer, programmaticDependent);
}

namespace {

/// cuLaunchKernelEx's configuration for a 1-D block of `threads` (no attributes yet).
CUlaunchConfig launchConfig(Dim3 grid, unsigned threads, int64_t sharedBytes, CUstream stream) {
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof config);
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = threads;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(sharedBytes);
  config.hStream = stream;
  return config;
}

/// The launch attribute that makes clusters of the shape `dims` (x, y, z).
CUlaunchAttribute clusterDimension(const std::array<unsigned, 3>& dims) {
  CUlaunchAttribute cluster;
  std::memset(&cluster, 0, sizeof cluster);
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = dims[0];
  cluster.value.clusterDim.y = dims[1];
  cluster.value.clusterDim.z = dims[2];
  return cluster;
}

/// The launch attribute of a programmatic dependent launch (PDL).
CUlaunchAttribute programmaticSerialization() {
  CUlaunchAttribute pdl;
  std::memset(&pdl, 0, sizeof pdl);
  pdl.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  pdl.value.programmaticStreamSerializationAllowed = 1;
  return pdl;
}

} // namespace

namespace {

/// The per-param pointers cuLaunchKernel(Ex) reads the values through.
class ParamPointers {
public:
  ParamPointers(const std::vector<ParamSlot>& slots, const uint8_t* params) {
    if (slots.size() > sizeof small_ / sizeof small_[0]) {
      large_.resize(slots.size());
      data_ = large_.data();
    }
    for (size_t i = 0; i < slots.size(); ++i)
      data_[i] = const_cast<uint8_t*>(params + slots[i].offset);
  }
  void** data() { return data_; }

private:
  void* small_[64];
  std::vector<void*> large_;
  void** data_ = small_;
};

/// One launch of a kernel without clusters in `form`; `pointers` is needed by the forms that
/// pass one pointer per param, `extra` (the buffer and its size) by ParamBuffer.
CUresult driverLaunch(const runtime::CudaDriver& d, LaunchForm form, CUfunction fn, Dim3 grid,
                      unsigned threads, unsigned sharedBytes, CUstream stream, void** pointers,
                      void** extra) {
  switch (form) {
  case LaunchForm::KernelParams:
    return d.launchKernel(fn, grid.x, grid.y, grid.z, threads, 1, 1, sharedBytes, stream, pointers,
                          nullptr);
  case LaunchForm::LaunchEx: {
    CUlaunchConfig config = launchConfig(grid, threads, sharedBytes, stream);
    return d.launchKernelEx(&config, fn, pointers, nullptr);
  }
  case LaunchForm::ParamBuffer:
    return d.launchKernel(fn, grid.x, grid.y, grid.z, threads, 1, 1, sharedBytes, stream, nullptr,
                          extra);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

const char* driverCallName(LaunchForm form) {
  return form == LaunchForm::LaunchEx ? "cuLaunchKernelEx" : "cuLaunchKernel";
}

} // namespace

void GpuKernel::launchPacked(Dim3 grid, void* stream, const uint8_t* params,
                             bool programmaticDependent) const {
  const Impl& k = *impl_;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return; // nothing to run, as in Triton
  if (k.numCtas > 1) checkClusterGrid(k.name, k.clusterDims, {grid.x, grid.y, grid.z});
  CUfunction fn = k.function();
  const runtime::CudaDriver& d = runtime::driver();
  const unsigned threads = static_cast<unsigned>(k.numWarps) * 32;
  const unsigned sharedBytes = static_cast<unsigned>(k.sharedBytes);
  CUstream s = static_cast<CUstream>(stream);
  if (k.numCtas == 1 && !programmaticDependent) {
    const LaunchForm form = launchForm();
    if (form == LaunchForm::ParamBuffer) {
      size_t size = static_cast<size_t>(k.paramBytes);
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<uint8_t*>(params),
                       CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
      runtime::check(driverLaunch(d, form, fn, grid, threads, sharedBytes, s, nullptr, extra),
                     driverCallName(form));
      return;
    }
    ParamPointers pointers(k.slots, params);
    runtime::check(
        driverLaunch(d, form, fn, grid, threads, sharedBytes, s, pointers.data(), nullptr),
        driverCallName(form));
    return;
  }
  // Clusters and programmatic dependent launches need cuLaunchKernelEx's attributes.
  ParamPointers pointers(k.slots, params);
  CUlaunchAttribute attrs[2];
  unsigned numAttrs = 0;
  if (k.numCtas > 1) attrs[numAttrs++] = clusterDimension(k.clusterDims);
  if (programmaticDependent) attrs[numAttrs++] = programmaticSerialization();
  CUlaunchConfig config = launchConfig(grid, threads, k.sharedBytes, s);
  config.attrs = attrs;
  config.numAttrs = numAttrs;
  runtime::check(d.launchKernelEx(&config, fn, pointers.data(), nullptr), "cuLaunchKernelEx");
}

std::optional<int> GpuKernel::maxActiveClusters(int clusterSize) const {
  const Impl& k = *impl_;
  if (clusterSize < 1)
    throw LaunchError("max_active_clusters: a cluster has at least 1 CTA, got cluster size " +
                      std::to_string(clusterSize));
  // The PTX declares a cluster kernel's shape (.reqnctapercluster), and the driver answers
  // for that shape alone.
  if (k.numCtas > 1 && clusterSize != k.numCtas)
    throw LaunchError("max_active_clusters: kernel '" + k.name + "' is compiled for clusters of " +
                      std::to_string(k.numCtas) +
                      " CTAs (ctas_per_cga), so it can be asked about clusters of " +
                      std::to_string(k.numCtas) + " only, not " + std::to_string(clusterSize));
  // Loading configures the function as for a launch (dynamic shared memory above 48 KB, the
  // carveout, non-portable cluster sizes), which is what the occupancy depends on.
  CUfunction fn = k.function();
  const runtime::CudaDriver& d = runtime::driver();
  if (!d.occupancyMaxActiveClusters) return std::nullopt;
  const CUcontext ctx = runtime::ensureContext();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (const Impl::ClusterCount& c : k.clusterCounts)
    if (c.context == ctx && c.clusterSize == clusterSize) return c.clusters;
  // A kernel without a declared cluster shape may be asked about any size; above 8 CTAs the
  // driver counts only functions that allow non-portable sizes (launches in clusters do already).
  if (clusterSize > 8 && k.numCtas <= 8)
    runtime::check(d.funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                   "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)");
  // A cluster kernel is asked about its own shape (the .reqnctapercluster it declares).
  const std::array<unsigned, 3> dims =
      k.numCtas > 1 ? k.clusterDims : std::array<unsigned, 3>{unsigned(clusterSize), 1, 1};
  CUlaunchAttribute cluster = clusterDimension(dims);
  // One cluster's grid: the driver wants a grid that the cluster shape divides.
  CUlaunchConfig config = launchConfig(
      {dims[0], dims[1], dims[2]}, static_cast<unsigned>(k.numWarps) * 32, k.sharedBytes, nullptr);
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  CUresult r = d.occupancyMaxActiveClusters(&clusters, fn, &config);
  if (r == CUDA_ERROR_INVALID_CLUSTER_SIZE)
    throw LaunchError("max_active_clusters: kernel '" + k.name + "' cannot run in clusters of " +
                      std::to_string(clusterSize) +
                      " CTAs on this device (cuOccupancyMaxActiveClusters: "
                      "CUDA_ERROR_INVALID_CLUSTER_SIZE; Hopper allows up to 8, or 16 "
                      "non-portably)");
  runtime::check(r, "cuOccupancyMaxActiveClusters");
  k.clusterCounts.push_back({ctx, clusterSize, clusters});
  return clusters;
}

double GpuKernel::timeDriverLaunches(Dim3 grid, void* stream, const uint8_t* params, int count,
                                     bool launchEx) const {
  return timeDriverLaunches(grid, stream, params, count,
                            launchEx ? LaunchForm::LaunchEx : LaunchForm::KernelParams, false);
}

double GpuKernel::timeDriverLaunches(Dim3 grid, void* stream, const uint8_t* params, int count,
                                     LaunchForm form, bool queryContext) const {
  const Impl& k = *impl_;
  if (k.numCtas != 1)
    throw LaunchError("timeDriverLaunches: kernel '" + k.name + "' runs in clusters");
  CUfunction fn = k.function();
  const runtime::CudaDriver& d = runtime::driver();
  ParamPointers pointers(k.slots, params);
  size_t size = static_cast<size_t>(k.paramBytes);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<uint8_t*>(params),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  const unsigned threads = static_cast<unsigned>(k.numWarps) * 32;
  const unsigned sharedBytes = static_cast<unsigned>(k.sharedBytes);
  CUstream s = static_cast<CUstream>(stream);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    if (queryContext) {
      CUcontext ctx = nullptr;
      runtime::check(d.ctxGetCurrent(&ctx), "cuCtxGetCurrent");
    }
    runtime::check(driverLaunch(d, form, fn, grid, threads, sharedBytes, s, pointers.data(), extra),
                   driverCallName(form));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double GpuKernel::timeLaunchPacked(Dim3 grid, void* stream, const uint8_t* params,
                                   int count) const {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) launchPacked(grid, stream, params);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace ww
