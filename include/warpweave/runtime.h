// The warpweave CUDA runtime API: load a compiled kernel (or an AOT cubin + `wwc --meta` JSON)
// into the current CUDA context and launch it on a stream. libcuda is dlopen'ed on first use.
#pragma once

#include "warpweave/warpweave.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ww {

/// A CUDA driver failure (or a missing driver): what() names the call and the driver's error.
class CudaError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A launch the runtime refuses before reaching the driver: wrong argument count or kind, a grid
/// that does not fit the cluster shape, too much shared memory for the device.
class LaunchError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Throws LaunchError unless `grid` is a whole number of clusters of the shape `cluster` (x, y,
/// z) along every axis, as the driver requires; `kernel` names the kernel in the message.
void checkClusterGrid(const std::string& kernel, const std::array<unsigned, 3>& cluster,
                      const std::array<unsigned, 3>& grid);

/// True when libcuda.so.1 loads, cuInit succeeds and at least one device exists. Otherwise false,
/// with the reason in *reason (e.g. "CUDA driver not found (libcuda.so.1): ...").
bool cudaAvailable(std::string* reason = nullptr);

/// A 128-byte CUtensorMap (host TMA descriptor), passed by value as a kernel parameter.
struct TensorMap {
  alignas(64) std::array<uint8_t, 128> bytes{};
};

/// Element type names as in signatures: "fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5",
/// "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "i1". Returns the size in bytes;
/// throws LaunchError for an unknown name.
int elementSize(const std::string& dtype);

/// Encodes a tiled TMA descriptor (cuTensorMapEncodeTiled). `globalDims`/`boxDims` list the
/// innermost dimension LAST (row-major shapes as in PyTorch), `globalStrides` are in elements
/// for the same dimensions (the innermost must be 1). `swizzleBytes` is 0, 32, 64 or 128.
TensorMap encodeTensorMap(const std::string& dtype, uint64_t globalAddress,
                          const std::vector<int64_t>& globalDims,
                          const std::vector<int64_t>& globalStrides,
                          const std::vector<int32_t>& boxDims, int swizzleBytes);

/// One launch argument, in the order of the kernel's runtime params (CompiledKernel::params).
struct LaunchArg {
  enum class Kind { Pointer, Int, Float, Tensor } kind = Kind::Int;
  uint64_t bits = 0; // Pointer: the device address; Int: the value (two's complement)
  double real = 0;   // Float
  std::shared_ptr<const TensorMap> tensorMap; // Tensor descriptor
  static LaunchArg pointer(uint64_t p) { return {Kind::Pointer, p, 0, nullptr}; }
  static LaunchArg pointer(const void* p) { return pointer(reinterpret_cast<uintptr_t>(p)); }
  static LaunchArg integer(int64_t v) { return {Kind::Int, static_cast<uint64_t>(v), 0, nullptr}; }
  static LaunchArg floating(double v) { return {Kind::Float, 0, v, nullptr}; }
  static LaunchArg tensor(const TensorMap& m) {
    return {Kind::Tensor, 0, 0, std::make_shared<TensorMap>(m)};
  }
};

/// How each runtime param sits in the launch parameter buffer; precomputed once per kernel so a
/// launch only copies values.
struct ParamSlot {
  enum class Kind { Pointer, Int, Float, Double, Tensor } kind = Kind::Int;
  std::string name;
  std::string type;
  int offset = 0; // in the parameter buffer
  int size = 0;   // bytes
};

/// Lays out `params` (their types and sizes) into slots; throws LaunchError for a type the
/// runtime cannot pass.
std::vector<ParamSlot> layoutParams(const std::vector<KernelParam>& params, int* totalBytes);

/// Writes `args` into `buffer` (at least totalBytes, 64-byte aligned) following `slots`. Throws
/// LaunchError naming the parameter when an argument's kind does not fit its type.
void packArgs(const std::vector<ParamSlot>& slots, const std::vector<LaunchArg>& args,
              uint8_t* buffer);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// The driver call that launches a kernel without clusters (clusters always take
/// cuLaunchKernelEx with the cluster attribute): cuLaunchKernel with one pointer per param,
/// cuLaunchKernelEx with no attributes, or cuLaunchKernel with the packed parameter buffer
/// passed whole (CU_LAUNCH_PARAM_BUFFER_POINTER in `extra`).
enum class LaunchForm { KernelParams, LaunchEx, ParamBuffer };
/// The form every GpuKernel launch uses from now on (process-wide; benchmarks compare them).
/// KernelParams unless set.
void setLaunchForm(LaunchForm form);
LaunchForm launchForm();
/// "params", "ex", "buffer"; parseLaunchForm throws std::invalid_argument naming them.
const char* launchFormName(LaunchForm form);
LaunchForm parseLaunchForm(const std::string& name);

/// A kernel loaded into CUDA contexts, launchable from any thread. Its module is loaded lazily
/// into whichever context is current at launch (PyTorch's, or the primary context of device 0).
class GpuKernel {
public:
  /// Takes the cubin and the PTX. A context's device loads the cubin when it can run it, else
  /// the PTX through the driver's JIT (sm_80 PTX on a Hopper GPU), else the launch fails with a
  /// LaunchError naming the target the device needs.
  explicit GpuKernel(const CompiledKernel& kernel);
  /// AOT: a cubin written by `wwc --emit cubin` and its `wwc --meta` JSON.
  static GpuKernel fromFiles(const std::string& cubinPath, const std::string& metaJsonPath);
  ~GpuKernel();
  GpuKernel(GpuKernel&&) noexcept;
  GpuKernel& operator=(GpuKernel&&) noexcept;

  const std::string& name() const;
  const std::vector<KernelParam>& params() const;
  const std::vector<ParamSlot>& slots() const;
  int paramBytes() const;
  int numWarps() const;
  int numCtas() const;
  int sharedBytes() const;

  /// How many clusters of `clusterSize` CTAs of this kernel can be resident at once on the
  /// current context's device: cuOccupancyMaxActiveClusters for numWarps*32 threads and the
  /// kernel's shared memory, after the function attributes a launch sets. A persistent cluster
  /// kernel runs in one wave with at most that many clusters; it can be below
  /// numSMs / clusterSize, since a cluster must fit inside one GPC. 0: no cluster of this size
  /// fits. Kept per context and cluster size after the first driver call. std::nullopt when
  /// the driver predates the query (unknown). A kernel compiled for clusters (numCtas > 1)
  /// answers for its own cluster size only; other sizes, and sizes below 1, throw LaunchError.
  std::optional<int> maxActiveClusters(int clusterSize) const;

  /// Launches `grid` CTAs (grid.x counts CTAs, not clusters) of numWarps*32 threads on `stream`
  /// (a CUstream; nullptr = the legacy default stream). `programmaticDependent`: a programmatic
  /// dependent launch (Triton's launch_pdl): the kernel may start before the previous kernel on
  /// the stream has finished, and waits for it where it executes griddepcontrol.wait.
  void launch(Dim3 grid, void* stream, const std::vector<LaunchArg>& args,
              bool programmaticDependent = false) const;
  /// The fast path: `params` is a parameter buffer already packed with packArgs.
  void launchPacked(Dim3 grid, void* stream, const uint8_t* params,
                    bool programmaticDependent = false) const;
  /// Loads the module into the current context now (launch does it on first use).
  void prepare() const;
  /// Benchmarks the driver call alone: `count` launches of a packed buffer through
  /// cuLaunchKernel, or cuLaunchKernelEx with no attributes; returns the host seconds the loop
  /// took (the caller synchronizes). Kernels without clusters only.
  double timeDriverLaunches(Dim3 grid, void* stream, const uint8_t* params, int count,
                            bool launchEx) const;
  /// The same for any driver call form; with `queryContext` each launch first asks the driver
  /// for the current context (cuCtxGetCurrent), as launchPacked does.
  double timeDriverLaunches(Dim3 grid, void* stream, const uint8_t* params, int count,
                            LaunchForm form, bool queryContext) const;
  /// Host seconds of `count` launchPacked calls (the runtime's whole C++ launch path).
  double timeLaunchPacked(Dim3 grid, void* stream, const uint8_t* params, int count) const;

private:
  struct Impl;
  explicit GpuKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Parses `wwc --meta` JSON back into the launch-relevant fields of a CompiledKernel (name,
/// target, warps, CTAs, shared memory, params, folded args). Throws std::invalid_argument.
CompiledKernel parseKernelMetadata(const std::string& json);

/// Device memory for tests and AOT programs (cuMemAlloc in the current context).
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint64_t address() const { return address_; }
  size_t size() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void fill(uint8_t byte);

private:
  uint64_t address_ = 0;
  size_t bytes_ = 0;
};

/// cuStreamSynchronize(stream); throws CudaError with the failure (e.g. an illegal address).
void synchronize(void* stream = nullptr);

} // namespace ww
