// warpweave._native: the Python face of the C++ compiler, interpreter and runtime (nanobind).
// The Python package builds signatures and collects sources; everything else happens here.
#include "FastLauncher.h"
#include "PyKernel.h"

#include "warpweave/runtime.h"
#include "warpweave/warpweave.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <structmember.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace nb = nanobind;
using namespace nb::literals;
using namespace wwpy;

nb::list wwpy::readBackParams(const ww::GpuKernel& k, const uint8_t* buffer) {
  nb::list out;
  for (const ww::ParamSlot& s : k.slots()) {
    const uint8_t* src = buffer + s.offset;
    switch (s.kind) {
    case ww::ParamSlot::Kind::Pointer:
    case ww::ParamSlot::Kind::Int: {
      uint64_t v = 0;
      std::memcpy(&v, src, static_cast<size_t>(s.size));
      const bool isSigned = s.kind == ww::ParamSlot::Kind::Int && s.type[0] == 'i' && s.size < 8;
      if (isSigned && s.type != "i1" && (v >> (8 * s.size - 1)) & 1)
        v |= ~uint64_t{0} << (8 * s.size); // sign-extend
      out.append(nb::steal(isSigned || (s.type[0] == 'i' && s.size == 8)
                               ? PyLong_FromLongLong(static_cast<long long>(v))
                               : PyLong_FromUnsignedLongLong(v)));
      break;
    }
    case ww::ParamSlot::Kind::Float: {
      float f;
      std::memcpy(&f, src, 4);
      out.append(nb::float_(static_cast<double>(f)));
      break;
    }
    case ww::ParamSlot::Kind::Double: {
      double d;
      std::memcpy(&d, src, 8);
      out.append(nb::float_(d));
      break;
    }
    case ww::ParamSlot::Kind::Tensor:
      out.append(nb::bytes(reinterpret_cast<const char*>(src), static_cast<size_t>(s.size)));
      break;
    }
  }
  return out;
}

namespace {

ww::Stage parseStage(const std::string& s) {
  if (s == "tile-ir" || s == "tileir") return ww::Stage::TileIR;
  if (s == "ptx") return ww::Stage::Ptx;
  if (s == "cubin") return ww::Stage::Cubin;
  throw std::invalid_argument("unknown stage '" + s + "': expected tile-ir, ptx or cubin");
}

/// One file's names as jit.collect_environment gives them: name -> (kind, target, file).
using PyNames = std::map<std::string, std::tuple<std::string, std::string, int>>;

std::map<std::string, ww::NameBinding> nameBindings(const PyNames& names) {
  using Kind = ww::NameBinding::Kind;
  static const std::map<std::string, Kind> kinds = {
      {"module", Kind::Module},     {"member", Kind::Member}, {"helper", Kind::Helper},
      {"function", Kind::Function}, {"value", Kind::Value},   {"opaque", Kind::Opaque}};
  std::map<std::string, ww::NameBinding> out;
  for (const auto& [name, binding] : names) {
    const auto& [kind, target, file] = binding;
    auto k = kinds.find(kind);
    if (k == kinds.end())
      throw std::invalid_argument("names: binding of '" + name + "' has kind '" + kind +
                                  "'; expected module, member, helper, function, value or opaque");
    out[name] = ww::NameBinding{k->second, target, file};
  }
  return out;
}

PyKernel* compileKernel(const std::vector<std::pair<std::string, std::string>>& files,
                        const std::string& kernel, const std::string& signature,
                        const std::map<std::string, std::string>& globals,
                        const std::string& target, int numWarps, int numStages, int numCtas,
                        const std::string& stage, bool lineInfo, int mbarrierTrapTries,
                        const std::optional<std::vector<std::optional<PyNames>>>& names,
                        const std::optional<std::vector<int>>& clusterDims, bool fpFusion,
                        bool reflectFtz, int maxRegisters) {
  ww::CompileRequest req;
  if (names && names->size() != files.size())
    throw std::invalid_argument("names: one entry (a dict or None) per file");
  for (size_t i = 0; i < files.size(); ++i) {
    req.files.push_back({files[i].first, files[i].second, std::nullopt});
    if (names && (*names)[i]) req.files.back().names = nameBindings(*(*names)[i]);
  }
  req.kernel = kernel;
  req.globals = globals;
  req.options.target = ww::parseTarget(target);
  req.options.numWarps = numWarps;
  req.options.numStages = numStages;
  req.options.numCtas = numCtas;
  if (clusterDims) {
    if (clusterDims->size() != 3)
      throw std::invalid_argument("cluster_dims: expected (x, y, z), got " +
                                  std::to_string(clusterDims->size()) + " sizes");
    req.options.clusterDims = {(*clusterDims)[0], (*clusterDims)[1], (*clusterDims)[2]};
  }
  req.options.lineInfo = lineInfo;
  if (mbarrierTrapTries < 0)
    throw std::invalid_argument("mbarrier_trap_tries must be >= 0 (0: waits never trap), got " +
                                std::to_string(mbarrierTrapTries));
  req.options.mbarrierTrapTries = mbarrierTrapTries;
  req.options.fpFusion = fpFusion;
  req.options.reflectFtz = reflectFtz;
  req.options.maxRegisters = maxRegisters;
  req.stage = parseStage(stage);
  auto k = std::make_unique<PyKernel>();
  {
    nb::gil_scoped_release release;
    req.signature = ww::parseSignature(signature);
    k->compiled = std::make_shared<const ww::CompiledKernel>(ww::compile(req));
  }
  return k.release();
}

PyKernel* kernelFromMetadata(const std::string& metaJson, nb::bytes cubin, const std::string& ptx,
                             const std::string& tileIR) {
  ww::CompiledKernel k = ww::parseKernelMetadata(metaJson);
  const auto* data = static_cast<const uint8_t*>(cubin.data());
  k.cubin.assign(data, data + cubin.size());
  k.ptx = ptx;
  k.tileIR = tileIR;
  auto out = std::make_unique<PyKernel>();
  out->compiled = std::make_shared<const ww::CompiledKernel>(std::move(k));
  return out.release();
}

/// A tuple of one launch value per slot, packed once (the benchmarks' helpers).
class PackedArgs {
public:
  PackedArgs(const ww::GpuKernel& k, nb::handle args, const char* what) : buffer_(k.paramBytes()) {
    PyObject* seq = args.ptr();
    if (!PyTuple_Check(seq) || static_cast<size_t>(PyTuple_GET_SIZE(seq)) != k.slots().size())
      throw nb::type_error((std::string(what) + ": one value per launch slot, as a tuple").c_str());
    for (size_t i = 0; i < k.slots().size(); ++i)
      packSlot(k.slots()[i], PyTuple_GET_ITEM(seq, static_cast<Py_ssize_t>(i)), buffer_.data());
  }
  uint8_t* data() { return buffer_.data(); }

private:
  ParamBuffer buffer_;
};

/// Kernel._packed_launch: one launchPacked per call of values packed in advance, so that a
/// benchmark can time the runtime's launch from a Python loop without any argument handling.
class PackedLaunch {
public:
  PackedLaunch(nb::handle owner, const ww::GpuKernel& k, unsigned gx, uintptr_t stream,
               nb::handle args)
      : owner_(nb::borrow(owner)), kernel_(&k), gx_(gx), stream_(stream),
        args_(std::make_shared<PackedArgs>(k, args, "_packed_launch")) {}
  void launch() const {
    kernel_->launchPacked({gx_, 1, 1}, reinterpret_cast<void*>(stream_), args_->data());
  }

private:
  nb::object owner_; // the Kernel, which owns kernel_
  const ww::GpuKernel* kernel_;
  unsigned gx_;
  uintptr_t stream_;
  std::shared_ptr<PackedArgs> args_;
};

/// Kernel.launch: Python ints/floats/128-byte descriptors straight into the parameter buffer,
/// with no intermediate LaunchArg objects (the general launch path; the fast one is in
/// FastLauncher.cpp).
void launch(PyKernel& self, unsigned gx, unsigned gy, unsigned gz, uintptr_t stream,
            nb::handle args, bool pdl) {
  const ww::GpuKernel& k = self.gpuKernel();
  const std::vector<ww::ParamSlot>& slots = k.slots();
  PyObject* seq = args.ptr();
  if (!PyTuple_Check(seq) && !PyList_Check(seq))
    throw nb::type_error("launch: args must be a tuple or list");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (static_cast<size_t>(n) != slots.size()) {
    std::string names;
    for (const auto& s : slots) names += (names.empty() ? "" : ", ") + s.name;
    throw ww::LaunchError("kernel '" + k.name() + "' expects " + std::to_string(slots.size()) +
                          " runtime arguments (" + names + "), got " + std::to_string(n));
  }
  PyObject** items = PySequence_Fast_ITEMS(seq);
  ParamBuffer buffer(k.paramBytes());
  for (Py_ssize_t i = 0; i < n; ++i)
    packSlot(slots[static_cast<size_t>(i)], items[i], buffer.data());
  launchOrRecord(k, {gx, gy, gz}, stream, buffer.data(), pdl);
}

/// Interpreter arguments: ints (i64, or u64 from 2^63 on, passed by their bits), floats,
/// (address, nbytes[, writable]) tuples for host buffers, and (address, nbytes, shape,
/// strides[, writable]) tuples for host tensor descriptors (strides in elements); a buffer
/// whose `writable` is False refuses the kernel's stores. `host_memory`, when not None, answers
/// for an address outside every argument with the (address, nbytes, writable) of the host
/// allocation that holds it, or None.
void interpretKernel(PyKernel& self, std::tuple<int, int, int> grid, nb::list args,
                     nb::object hostMemory) {
  std::vector<ww::InterpArg> converted;
  for (nb::handle a : args) {
    const size_t n = nb::isinstance<nb::tuple>(a) ? nb::len(a) : 0;
    if (PyBool_Check(a.ptr()) || PyLong_Check(a.ptr())) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(a.ptr(), &overflow);
      if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(a.ptr());
        if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
          PyErr_Clear();
          overflow = -1;
        }
        v = static_cast<long long>(u);
      }
      if (overflow < 0 || (v == -1 && PyErr_Occurred()))
        throw nb::value_error(("interpret: integer argument " + std::string(nb::str(a).c_str()) +
                               " does not fit in 64 bits")
                                  .c_str());
      converted.push_back(ww::InterpArg::integer(v));
    } else if (PyFloat_Check(a.ptr())) {
      converted.push_back(ww::InterpArg::real(nb::cast<double>(a)));
    } else if (n == 2 || n == 3) {
      auto t = nb::cast<std::tuple<uintptr_t, size_t>>(a[nb::slice(0, 2)]);
      converted.push_back(
          ww::InterpArg::buffer(reinterpret_cast<void*>(std::get<0>(t)), std::get<1>(t)));
      converted.back().readOnly = n == 3 && !nb::cast<bool>(a[2]);
    } else if (n == 4 || n == 5) {
      auto t = nb::cast<std::tuple<uintptr_t, size_t, std::vector<int64_t>, std::vector<int64_t>>>(
          a[nb::slice(0, 4)]);
      converted.push_back(ww::InterpArg::descriptor(reinterpret_cast<void*>(std::get<0>(t)),
                                                    std::get<1>(t), std::move(std::get<2>(t)),
                                                    std::move(std::get<3>(t))));
      converted.back().readOnly = n == 5 && !nb::cast<bool>(a[4]);
    } else {
      throw nb::type_error(("interpret: argument of type " +
                            std::string(Py_TYPE(a.ptr())->tp_name) +
                            " is not an int, a float, an (address, nbytes[, writable]) buffer or "
                            "an (address, nbytes, shape, strides[, writable]) descriptor")
                               .c_str());
    }
  }
  int g[3] = {std::get<0>(grid), std::get<1>(grid), std::get<2>(grid)};
  ww::HostMemoryLookup lookup;
  if (!hostMemory.is_none()) {
    // Copies of the lookup live and die without the GIL: they hold the callable borrowed, which
    // `hostMemory` keeps alive for the call.
    PyObject* fn = hostMemory.ptr();
    lookup = [fn](uint64_t address) -> std::optional<ww::HostSpan> {
      nb::gil_scoped_acquire acquire;
      try {
        nb::object r = nb::borrow(fn)(address);
        if (r.is_none()) return std::nullopt;
        auto t = nb::cast<std::tuple<uint64_t, uint64_t, bool>>(r);
        return ww::HostSpan{std::get<0>(t), std::get<1>(t), std::get<2>(t)};
      } catch (const std::exception&) {
        return std::nullopt;
      }
    };
  }
  nb::gil_scoped_release release;
  ww::interpret(*self.compiled, g, converted, lookup);
}

nb::bytes encodeTensorMap(const std::string& dtype, uint64_t address,
                          const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                          const std::vector<int32_t>& blockShape, int swizzle) {
  ww::TensorMap m = ww::encodeTensorMap(dtype, address, shape, strides, blockShape, swizzle);
  return nb::bytes(reinterpret_cast<const char*>(m.bytes.data()), m.bytes.size());
}

} // namespace

NB_MODULE(_native, m) {
  m.doc() = "warpweave's C++ compiler, interpreter and CUDA runtime";

  nb::exception<ww::CompileFailure>(m, "CompilationError");
  nb::exception<ww::InterpreterError>(m, "InterpreterError");
  PyObject* cudaError = nb::exception<ww::CudaError>(m, "CudaError", PyExc_RuntimeError).ptr();
  PyObject* launchError = nb::exception<ww::LaunchError>(m, "LaunchError", PyExc_ValueError).ptr();

  nb::class_<PackedLaunch>(m, "PackedLaunch").def("__call__", [](const PackedLaunch& p) {
    p.launch();
  });

  nb::class_<PyKernel>(m, "Kernel")
      .def_prop_ro("name", [](const PyKernel& k) { return k.compiled->name; })
      .def_prop_ro("target", [](const PyKernel& k) { return ww::targetName(k.compiled->target); })
      .def_prop_ro("tile_ir", [](const PyKernel& k) { return k.compiled->tileIR; })
      .def_prop_ro("ptx", [](const PyKernel& k) { return k.compiled->ptx; })
      .def_prop_ro("cubin",
                   [](const PyKernel& k) {
                     const auto& c = k.compiled->cubin;
                     return nb::bytes(reinterpret_cast<const char*>(c.data()), c.size());
                   })
      .def_prop_ro(
          "params",
          [](const PyKernel& k) {
            std::vector<std::tuple<std::string, std::string, int, int>> out;
            for (const auto& p : k.compiled->params)
              out.emplace_back(p.name, p.type, p.sizeBytes, p.divisibility);
            return out;
          },
          "(name, type, size in bytes, divisibility) of each runtime parameter")
      .def_prop_ro("folded_args", [](const PyKernel& k) { return k.compiled->foldedArgs; })
      .def_prop_ro(
          "written_params", [](const PyKernel& k) { return ww::writtenParams(*k.compiled); },
          "The pointer and descriptor params the kernel may store to (from its Tile IR; all of "
          "them without it)")
      .def_prop_ro("num_warps", [](const PyKernel& k) { return k.compiled->numWarps; })
      .def_prop_ro("num_ctas", [](const PyKernel& k) { return k.compiled->numCtas; })
      .def_prop_ro(
          "cluster_dims",
          [](const PyKernel& k) {
            const std::array<int, 3>& d = k.compiled->clusterDims;
            return std::make_tuple(d[0], d[1], d[2]);
          },
          "The cluster's shape (x, y, z) the kernel was compiled for: ctas_per_cga")
      .def_prop_ro("shared_bytes", [](const PyKernel& k) { return k.compiled->sharedBytes; })
      .def_prop_ro("global_scratch_size",
                   [](const PyKernel& k) { return k.compiled->globalScratchBytes; })
      .def_prop_ro("registers", [](const PyKernel& k) { return k.compiled->registers; })
      .def_prop_ro("spill_bytes", [](const PyKernel& k) { return k.compiled->spillBytes; })
      .def_prop_ro("ptxas_log", [](const PyKernel& k) { return k.compiled->ptxasLog; })
      .def_prop_ro("has_tile_ir",
                   [](const PyKernel& k) { return static_cast<bool>(k.compiled->module); })
      .def("metadata_json", [](const PyKernel& k) { return ww::kernelMetadataJson(*k.compiled); })
      .def(
          "prepare", [](PyKernel& k) { k.gpuKernel().prepare(); },
          "Loads the kernel into the current CUDA context.")
      .def(
          "max_active_clusters",
          [](PyKernel& self, int clusterSize) -> std::optional<int> {
            return self.gpuKernel().maxActiveClusters(clusterSize);
          },
          "cluster_size"_a,
          "Clusters of cluster_size CTAs that can be resident at once on the current context's "
          "device (cuOccupancyMaxActiveClusters with this kernel's warps and shared memory); "
          "None when the driver predates the query.")
      .def("launch", &launch, "gx"_a, "gy"_a, "gz"_a, "stream"_a, "args"_a, "pdl"_a = false,
           "Launches on the GPU; args follow `params` (ints for pointers, 128-byte descriptors); "
           "pdl: a programmatic dependent launch (Triton's launch_pdl).")
      .def(
          "_time_driver_launches",
          [](PyKernel& self, unsigned gx, uintptr_t stream, nb::handle args, int count,
             bool launchEx) {
            const ww::GpuKernel& k = self.gpuKernel();
            PackedArgs packed(k, args, "_time_driver_launches");
            nb::gil_scoped_release release;
            return k.timeDriverLaunches({gx, 1, 1}, reinterpret_cast<void*>(stream), packed.data(),
                                        count, launchEx);
          },
          "gx"_a, "stream"_a, "args"_a, "count"_a, "launch_ex"_a,
          "Benchmarks: host seconds of `count` bare driver launches (cuLaunchKernel or Ex).")
      .def(
          "_time_launches",
          [](PyKernel& self, unsigned gx, uintptr_t stream, nb::handle args, int count,
             const std::string& form, bool queryContext) {
            const ww::GpuKernel& k = self.gpuKernel();
            PackedArgs packed(k, args, "_time_launches");
            void* s = reinterpret_cast<void*>(stream);
            nb::gil_scoped_release release;
            if (form == "launcher") return k.timeLaunchPacked({gx, 1, 1}, s, packed.data(), count);
            return k.timeDriverLaunches({gx, 1, 1}, s, packed.data(), count,
                                        ww::parseLaunchForm(form), queryContext);
          },
          "gx"_a, "stream"_a, "args"_a, "count"_a, "form"_a, "query_context"_a = false,
          "Benchmarks: host seconds of `count` launches in a C++ loop: the bare driver call in "
          "`form` (params, ex, buffer; with query_context a cuCtxGetCurrent before each), or "
          "'launcher' (GpuKernel::launchPacked, the runtime's whole C++ path).")
      .def(
          "_packed_launch",
          [](nb::handle self, unsigned gx, uintptr_t stream, nb::handle args) {
            PyKernel& k = nb::cast<PyKernel&>(self);
            return PackedLaunch(self, k.gpuKernel(), gx, stream, args);
          },
          "gx"_a, "stream"_a, "args"_a,
          "Benchmarks: a callable that launches these values, packed once, through "
          "launchPacked (no argument handling per call).")
      .def("interpret", &interpretKernel, "grid"_a, "args"_a, "host_memory"_a = nb::none(),
           "Runs the Tile IR in the CPU interpreter; buffers are (address, nbytes) tuples; "
           "host_memory(address) names other host memory the kernel reaches, or None.");

  wwpy::defineFastLauncher(m, launchError, cudaError);
  m.def(
      "_set_launch_recorder",
      [](nb::object recorder) {
        Py_XDECREF(gLaunchRecorder);
        gLaunchRecorder = recorder.is_none() ? nullptr : recorder.release().ptr();
      },
      "recorder"_a.none(),
      "Tests: launches call recorder(name, grid, stream, values) instead of the driver.");
  m.def("compile", &compileKernel, "files"_a, "kernel"_a, "signature"_a, "globals"_a,
        "target"_a = "sm_90a", "num_warps"_a = 4, "num_stages"_a = 3, "num_ctas"_a = 1,
        "stage"_a = "cubin", "line_info"_a = true, "mbarrier_trap_tries"_a = 0,
        "names"_a = nb::none(), "cluster_dims"_a = nb::none(), "fp_fusion"_a = true,
        "reflect_ftz"_a = true, "maxnreg"_a = 0, nb::rv_policy::take_ownership,
        "Compiles `kernel` from `files` [(path, text), ...] for a signature string. `names`, one "
        "per file (None: its imports' text decides), maps module-level names to (kind, target, "
        "file index): module, member, helper, function, value or opaque (ww::NameBinding). "
        "fp_fusion=False: float adds and multiplies are not contracted into FMAs. "
        "reflect_ftz=False: fp32 approximations without .ftz (Triton's enable_reflect_ftz). "
        "maxnreg=N: the kernel declares .maxnreg N (Triton's maxnreg).");
  m.def("kernel_from_metadata", &kernelFromMetadata, "metadata_json"_a, "cubin"_a, "ptx"_a = "",
        "tile_ir"_a = "", nb::rv_policy::take_ownership,
        "Rebuilds a launchable kernel from `wwc --meta` JSON and its cubin (the disk cache), with "
        "its PTX and Tile IR text when given (what `asm` shows).");
  m.def("triton_dialect_text", &ww::tritonDialectText, "tile_ir"_a, "target"_a = "sm_90a",
        "with_layouts"_a = false,
        "Tile IR text printed in the vocabulary of Triton's dialects: asm[\"ttir\"], and with "
        "the layouts code generation assigns, asm[\"ttgir\"].");
  m.def("parse_signature", [](const std::string& sig) {
    std::vector<std::tuple<std::string, bool, std::string, std::string, int, bool>> out;
    for (const ww::SignatureEntry& e : ww::parseSignature(sig))
      out.emplace_back(e.name, e.isConstexpr, e.value, e.type, e.divisibility, e.equalsOne);
    return out;
  });
  m.def("run_cli", [](const std::vector<std::string>& args) {
    nb::gil_scoped_release release;
    return ww::runCli(args);
  });
  m.def("cuda_available", [] {
    std::string reason;
    bool ok = ww::cudaAvailable(&reason);
    return std::make_pair(ok, reason);
  });
  m.def("encode_tensor_map", &encodeTensorMap, "dtype"_a, "address"_a, "shape"_a, "strides"_a,
        "block_shape"_a, "swizzle"_a);
  m.def(
      "synchronize", [](uintptr_t stream) { ww::synchronize(reinterpret_cast<void*>(stream)); },
      "stream"_a = 0);
  m.def("compiler_version", [] { return std::string(ww::compilerVersion()); });
  m.def(
      "_set_launch_form",
      [](const std::string& form) { ww::setLaunchForm(ww::parseLaunchForm(form)); }, "form"_a,
      "Benchmarks: the driver call every launch uses from now on (params, ex or buffer).");
  m.def("_launch_form", [] { return std::string(ww::launchFormName(ww::launchForm())); });
}
