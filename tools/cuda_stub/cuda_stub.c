// A stand-in libcuda.so.1 (loaded with WARPWEAVE_LIBCUDA=/path/libcuda_stub.so) that lets tests and
// benchmarks drive warpweave's launch path end to end on machines without a GPU: every entry point
// the runtime resolves succeeds at once, launches are counted, and the last one is kept for checks.
#include <cuda.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WWSTUB_MAX_PARAMS 64
#define WWSTUB_MAP_BYTES 128 // a CUtensorMap: the largest parameter recorded
#define WWSTUB_EXPORT __attribute__((visibility("default")))

/// What tests read back (through ctypes): the last launch, and counts of the calls that matter.
struct wwstub_record {
  unsigned long long launches;        // cuLaunchKernel + cuLaunchKernelEx calls that succeeded
  unsigned long long launch_ex;       // of them, through cuLaunchKernelEx
  unsigned long long ctx_get_current; // cuCtxGetCurrent calls
  unsigned long long module_loads;
  unsigned long long module_unloads;
  unsigned long long function; // the CUfunction last launched
  unsigned long long stream;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  unsigned cluster[3]; // 0 0 0 when the launch named no cluster
  unsigned num_params; // values recorded in params (see wwstub_record_params)
  unsigned long long params[WWSTUB_MAX_PARAMS]; // each value's bytes, zero-extended
  unsigned long long launch_buffer; // launches that passed one parameter buffer (`extra`)
  unsigned long long ptx_loads;     // module loads of PTX text (the driver JIT), not cubins
  unsigned long long carveout_sets; // cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT) calls
  int carveout;                     // the value the last of them set
  // Each recorded value's bytes in full (tensor maps are WWSTUB_MAP_BYTES), zero-padded.
  unsigned char param_bytes[WWSTUB_MAX_PARAMS][WWSTUB_MAP_BYTES];
  // The last cuOccupancyMaxActiveClusters call (counted when it succeeded or failed).
  unsigned long long occupancy_queries;
  unsigned long long occupancy_function;
  unsigned occupancy_grid[3];
  unsigned occupancy_block[3];
  unsigned occupancy_shared;
  unsigned occupancy_cluster[3]; // 0 0 0 when the query named no cluster
};

static struct wwstub_record g_record;
static int g_param_sizes[WWSTUB_MAX_PARAMS];
static int g_num_param_sizes;
static CUresult g_launch_result = CUDA_SUCCESS;
static CUcontext g_current;
static unsigned long long g_next_module = 0x1000;
static int g_cc_major = 9, g_cc_minor = 0;
static int g_num_regs; // what cuFuncGetAttribute(NUM_REGS) reports for every function

// The attributes launches and occupancy depend on, per function (driver state: a record reset
// keeps them, as a real driver would keep a loaded function's attributes).
#define WWSTUB_MAX_FUNCTIONS 4096
static struct function_state {
  CUfunction function;
  int max_dynamic_shared; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int non_portable;       // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
} g_functions[WWSTUB_MAX_FUNCTIONS];
static int g_num_functions;

// The device modelled for occupancy: an H100/H200-class part (132 SMs, 228 KB of shared memory
// and 64K registers per SM; kGpcSms below).
#define WWSTUB_SHARED_PER_SM 233472
#define WWSTUB_SHARED_OPTIN 232448
#define WWSTUB_SHARED_RESERVED 1024 // per block, as on Hopper
#define WWSTUB_DEFAULT_SHARED 49152 // dynamic shared memory allowed without the attribute

WWSTUB_EXPORT const struct wwstub_record* wwstub_record(void) {
  return &g_record;
}

static struct function_state* function_state(CUfunction f, int create) {
  for (int i = 0; i < g_num_functions; ++i)
    if (g_functions[i].function == f) return &g_functions[i];
  if (!create || g_num_functions == WWSTUB_MAX_FUNCTIONS) return NULL;
  struct function_state* s = &g_functions[g_num_functions++];
  memset(s, 0, sizeof *s);
  s->function = f;
  return s;
}

/// Every function reports `regs` registers per thread from now on (0 until set: no limit).
WWSTUB_EXPORT void wwstub_set_num_regs(int regs) {
  g_num_regs = regs;
}

WWSTUB_EXPORT void wwstub_reset(void) {
  memset(&g_record, 0, sizeof g_record);
  g_num_param_sizes = 0;
  g_launch_result = CUDA_SUCCESS;
  g_cc_major = 9, g_cc_minor = 0;
  g_num_regs = 0;
}

/// The device's compute capability from now on (9.0 until set, and after a reset).
WWSTUB_EXPORT void wwstub_set_compute_capability(int major, int minor) {
  g_cc_major = major, g_cc_minor = minor;
}

/// Launches from now on copy `n` parameter values of these byte sizes (1 to 8, or 128 for a
/// CUtensorMap) into the record; n = 0 records none (the benchmark's setting: the driver's own
/// cost is then nil).
WWSTUB_EXPORT int wwstub_record_params(int n, const int* sizes) {
  if (n < 0 || n > WWSTUB_MAX_PARAMS) return -1;
  for (int i = 0; i < n; ++i) {
    if ((sizes[i] < 1 || sizes[i] > 8) && sizes[i] != WWSTUB_MAP_BYTES) return -1;
    g_param_sizes[i] = sizes[i];
  }
  g_num_param_sizes = n;
  return 0;
}

/// Launches from now on return `result` (CUDA_SUCCESS restores them), as a failing driver would.
WWSTUB_EXPORT void wwstub_fail_launches(int result) {
  g_launch_result = (CUresult)result;
}

/// The parameter buffer of a launch's `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER), or NULL; its
/// size (CU_LAUNCH_PARAM_BUFFER_SIZE) goes to *size.
static const unsigned char* extra_buffer(void** extra, size_t* size) {
  const unsigned char* buffer = NULL;
  *size = 0;
  for (int i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = (const unsigned char*)extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) *size = *(const size_t*)extra[i + 1];
  }
  return buffer;
}

static void record_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                          void** extra) {
  g_record.launches++;
  g_record.function = (unsigned long long)(uintptr_t)f;
  g_record.stream = (unsigned long long)(uintptr_t)stream;
  g_record.grid[0] = gx, g_record.grid[1] = gy, g_record.grid[2] = gz;
  g_record.block[0] = bx, g_record.block[1] = by, g_record.block[2] = bz;
  g_record.shared_bytes = shared;
  g_record.cluster[0] = g_record.cluster[1] = g_record.cluster[2] = 0;
  g_record.num_params = (unsigned)g_num_param_sizes;
  size_t size = 0;
  const unsigned char* buffer = params ? NULL : extra_buffer(extra, &size);
  if (buffer) g_record.launch_buffer++;
  size_t offset = 0; // in a packed buffer each value sits at its natural alignment (64 for maps)
  for (int i = 0; i < g_num_param_sizes; ++i) {
    const size_t n = (size_t)g_param_sizes[i];
    const size_t align = n > 64 ? 64 : n;
    unsigned char* bytes = g_record.param_bytes[i];
    memset(bytes, 0, WWSTUB_MAP_BYTES);
    if (buffer) {
      offset = (offset + align - 1) / align * align;
      if (offset + n <= size) memcpy(bytes, buffer + offset, n);
      offset += n;
    } else if (params) {
      memcpy(bytes, params[i], n);
    }
    g_record.params[i] = 0;
    memcpy(&g_record.params[i], bytes, n < 8 ? n : 8);
  }
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                void** params, void** extra) {
  if (g_launch_result != CUDA_SUCCESS) return g_launch_result;
  if (!params && !extra) return CUDA_ERROR_INVALID_VALUE;
  record_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params,
                                  void** extra) {
  if (g_launch_result != CUDA_SUCCESS) return g_launch_result;
  record_launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                c->sharedMemBytes, c->hStream, params, extra);
  g_record.launch_ex++;
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      g_record.cluster[0] = c->attrs[i].value.clusterDim.x;
      g_record.cluster[1] = c->attrs[i].value.clusterDim.y;
      g_record.cluster[2] = c->attrs[i].value.clusterDim.z;
    }
  return CUDA_SUCCESS;
}

// --- Initialisation, errors, devices and contexts: one sm_90 device, one context. ----------

CUresult CUDAAPI cuInit(unsigned flags) {
  (void)flags;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = 12080;
  return CUDA_SUCCESS;
}

static const struct {
  CUresult code;
  const char* name;
  const char* text;
} kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_INVALID_CLUSTER_SIZE, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
};

CUresult CUDAAPI cuGetErrorName(CUresult r, const char** out) {
  for (size_t i = 0; i < sizeof kErrors / sizeof kErrors[0]; ++i)
    if (kErrors[i].code == r) {
      *out = kErrors[i].name;
      return CUDA_SUCCESS;
    }
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult r, const char** out) {
  for (size_t i = 0; i < sizeof kErrors / sizeof kErrors[0]; ++i)
    if (kErrors[i].code == r) {
      *out = kErrors[i].text;
      return CUDA_SUCCESS;
    }
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* dev, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_VALUE;
  *dev = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  (void)dev;
  switch (attr) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = g_cc_major;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = g_cc_minor;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = 232448;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
    *value = 233472;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *value = 1024;
    break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
    *value = 32;
    break;
  default:
    *value = 0;
    break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  g_record.ctx_get_current++;
  *ctx = g_current;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  g_current = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* dev) {
  *dev = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  (void)dev;
  *ctx = (CUcontext)(uintptr_t)0xC0;
  return CUDA_SUCCESS;
}

// --- Modules and functions: any image loads; a function is its module's handle plus one. -----

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned n,
                                    CUjit_option* options, void** values) {
  (void)n, (void)options, (void)values;
  g_record.module_loads++;
  if (memcmp(image,
             "\x7f"
             "ELF",
             4) != 0)
    g_record.ptx_loads++; // a cubin is an ELF file
  *module = (CUmodule)(uintptr_t)g_next_module;
  g_next_module += 0x10;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  (void)module;
  g_record.module_unloads++;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  (void)name;
  *f = (CUfunction)((uintptr_t)module + 1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute attr, int value) {
  if (attr == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
    g_record.carveout_sets++;
    g_record.carveout = value;
  } else if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > WWSTUB_SHARED_OPTIN) return CUDA_ERROR_INVALID_VALUE;
    struct function_state* s = function_state(f, 1);
    if (s) s->max_dynamic_shared = value;
  } else if (attr == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) {
    struct function_state* s = function_state(f, 1);
    if (s) s->non_portable = value != 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int* value, CUfunction_attribute attr, CUfunction f) {
  (void)f;
  *value = attr == CU_FUNC_ATTRIBUTE_NUM_REGS ? g_num_regs : 0;
  return CUDA_SUCCESS;
}

#ifndef WWSTUB_NO_CLUSTER_OCCUPANCY // built without it, the stub is a driver older than CUDA 11.8
/// The modelled device's GPCs differ in size, as the H200's do, so clusters, which must fit in
/// one GPC, can leave SMs idle: 2 GPCs of 18 SMs and 6 of 16 (132 SMs).
static const int kGpcSms[] = {18, 18, 16, 16, 16, 16, 16, 16};

/// The clusters of `c` that fit at once: per GPC, the blocks its SMs hold (limited by threads,
/// registers and shared memory) divided by the cluster's CTAs, summed over the GPCs.
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int* clusters, CUfunction f,
                                              const CUlaunchConfig* c) {
  if (!clusters || !c) return CUDA_ERROR_INVALID_VALUE;
  g_record.occupancy_queries++;
  g_record.occupancy_function = (unsigned long long)(uintptr_t)f;
  g_record.occupancy_grid[0] = c->gridDimX, g_record.occupancy_grid[1] = c->gridDimY;
  g_record.occupancy_grid[2] = c->gridDimZ;
  g_record.occupancy_block[0] = c->blockDimX, g_record.occupancy_block[1] = c->blockDimY;
  g_record.occupancy_block[2] = c->blockDimZ;
  g_record.occupancy_shared = c->sharedMemBytes;
  unsigned dims[3] = {0, 0, 0};
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      dims[0] = c->attrs[i].value.clusterDim.x;
      dims[1] = c->attrs[i].value.clusterDim.y;
      dims[2] = c->attrs[i].value.clusterDim.z;
    }
  memcpy(g_record.occupancy_cluster, dims, sizeof dims);
  // Functions here declare no cluster shape, so the configuration must name one.
  const unsigned long long ctas = (unsigned long long)dims[0] * dims[1] * dims[2];
  if (ctas == 0) return CUDA_ERROR_INVALID_VALUE;
  if (c->gridDimX % dims[0] || c->gridDimY % dims[1] || c->gridDimZ % dims[2])
    return CUDA_ERROR_INVALID_VALUE;
  const struct function_state* s = function_state(f, 0);
  if (ctas > 16 || (ctas > 8 && !(s && s->non_portable))) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  const unsigned threads = c->blockDimX * c->blockDimY * c->blockDimZ;
  if (threads == 0 || threads > 1024) return CUDA_ERROR_INVALID_VALUE;
  const unsigned shared = c->sharedMemBytes;
  if (shared > WWSTUB_DEFAULT_SHARED && !(s && (unsigned)s->max_dynamic_shared >= shared))
    return CUDA_ERROR_INVALID_VALUE; // as a launch: more than the function was allowed
  const int warps = (int)((threads + 31) / 32);
  int blocks = 32;
  if (2048 / (int)threads < blocks) blocks = 2048 / (int)threads;
  if (g_num_regs > 0) {
    const int regs_per_warp = (g_num_regs * 32 + 255) / 256 * 256;
    const int by_regs = 65536 / regs_per_warp / warps;
    if (by_regs < blocks) blocks = by_regs;
  }
  const int by_shared = WWSTUB_SHARED_PER_SM / ((int)shared + WWSTUB_SHARED_RESERVED);
  if (by_shared < blocks) blocks = by_shared;
  int total = 0;
  for (size_t i = 0; i < sizeof kGpcSms / sizeof kGpcSms[0]; ++i)
    total += (int)((unsigned long long)kGpcSms[i] * (unsigned long long)blocks / ctas);
  *clusters = total;
  return CUDA_SUCCESS;
}
#endif

CUresult CUDAAPI cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                        void* address, const cuuint64_t* dims,
                                        const cuuint64_t* strides, const cuuint32_t* box,
                                        const cuuint32_t* elementStrides,
                                        CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill fill) {
  if (rank < 1 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  // Recognisable bytes, each input at a fixed place: address (0), rank (8), data type (12),
  // swizzle (16), OOB fill (20), dims (24, 8 bytes each), byte strides of the outer dims (64),
  // box (96, 4 bytes each), element strides (116, 1 byte each), interleave (121), L2 (122).
  unsigned char* out = (unsigned char*)map;
  memset(map, 0, sizeof *map);
  uint64_t a = (uint64_t)(uintptr_t)address;
  uint32_t words[4] = {rank, (uint32_t)type, (uint32_t)swizzle, (uint32_t)fill};
  memcpy(out, &a, 8);
  memcpy(out + 8, words, sizeof words);
  memcpy(out + 24, dims, rank * sizeof *dims);
  memcpy(out + 64, strides, (rank - 1) * sizeof *strides);
  memcpy(out + 96, box, rank * sizeof *box);
  for (cuuint32_t i = 0; elementStrides && i < rank; ++i)
    out[116 + i] = (unsigned char)elementStrides[i];
  out[121] = (unsigned char)interleave;
  out[122] = (unsigned char)l2;
  return CUDA_SUCCESS;
}

// --- Memory: host memory stands in for device memory. ---------------------------------------

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  void* m = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  free((void*)(uintptr_t)p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  memcpy((void*)(uintptr_t)dst, src, bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  memset((void*)(uintptr_t)dst, value, n);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  (void)data, (void)attr, (void)p;
  return CUDA_ERROR_INVALID_VALUE; // no pointer is the driver's
}
