// warpweave._native: the Python face of the C++ compiler, interpreter and runtime (nanobind).
// The Python package builds signatures and collects sources; everything else happens here.
#include "warpweave/runtime.h"
#include "warpweave/warpweave.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <mutex>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// A compiled kernel as Python sees it: the compile result, plus the CUDA-side kernel created on
/// the first launch (creating it needs no driver; loading happens in the current context).
struct PyKernel {
  std::shared_ptr<const ww::CompiledKernel> compiled;
  std::once_flag gpuOnce;
  std::unique_ptr<ww::GpuKernel> gpu;

  const ww::GpuKernel& gpuKernel() {
    std::call_once(gpuOnce, [&] { gpu = std::make_unique<ww::GpuKernel>(*compiled); });
    return *gpu;
  }
};

ww::Stage parseStage(const std::string& s) {
  if (s == "tile-ir" || s == "tileir") return ww::Stage::TileIR;
  if (s == "ptx") return ww::Stage::Ptx;
  if (s == "cubin") return ww::Stage::Cubin;
  throw std::invalid_argument("unknown stage '" + s + "': expected tile-ir, ptx or cubin");
}

PyKernel* compileKernel(const std::vector<std::pair<std::string, std::string>>& files,
                        const std::string& kernel, const std::string& signature,
                        const std::map<std::string, std::string>& globals,
                        const std::string& target, int numWarps, int numStages, int numCtas,
                        const std::string& stage, bool lineInfo, int mbarrierTrapTries) {
  ww::CompileRequest req;
  for (const auto& [path, text] : files) req.files.push_back({path, text});
  req.kernel = kernel;
  req.globals = globals;
  req.options.target = ww::parseTarget(target);
  req.options.numWarps = numWarps;
  req.options.numStages = numStages;
  req.options.numCtas = numCtas;
  req.options.lineInfo = lineInfo;
  if (mbarrierTrapTries < 0)
    throw std::invalid_argument("mbarrier_trap_tries must be >= 0 (0: waits never trap), got " +
                                std::to_string(mbarrierTrapTries));
  req.options.mbarrierTrapTries = mbarrierTrapTries;
  req.stage = parseStage(stage);
  auto k = std::make_unique<PyKernel>();
  {
    nb::gil_scoped_release release;
    req.signature = ww::parseSignature(signature);
    k->compiled = std::make_shared<const ww::CompiledKernel>(ww::compile(req));
  }
  return k.release();
}

PyKernel* kernelFromMetadata(const std::string& metaJson, nb::bytes cubin, const std::string& ptx) {
  ww::CompiledKernel k = ww::parseKernelMetadata(metaJson);
  const auto* data = static_cast<const uint8_t*>(cubin.data());
  k.cubin.assign(data, data + cubin.size());
  k.ptx = ptx;
  auto out = std::make_unique<PyKernel>();
  out->compiled = std::make_shared<const ww::CompiledKernel>(std::move(k));
  return out.release();
}

[[noreturn]] void argError(const ww::ParamSlot& slot, const char* expected, PyObject* got) {
  std::string type = Py_TYPE(got)->tp_name;
  throw ww::LaunchError("argument '" + slot.name + "' (" + slot.type + ") expects " + expected +
                        ", got " + type);
}

/// The fast path of a launch: Python ints/floats/128-byte descriptors straight into the
/// parameter buffer, with no intermediate LaunchArg objects.
void launch(PyKernel& self, unsigned gx, unsigned gy, unsigned gz, uintptr_t stream,
            nb::handle args) {
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
  alignas(64) uint8_t small[1024];
  std::vector<uint8_t> large;
  uint8_t* buffer = small;
  if (k.paramBytes() > static_cast<int>(sizeof small)) {
    large.resize(static_cast<size_t>(k.paramBytes()) + 64);
    buffer = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(large.data()) + 63) & ~63ull);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    const ww::ParamSlot& s = slots[static_cast<size_t>(i)];
    PyObject* o = items[i];
    uint8_t* dst = buffer + s.offset;
    switch (s.kind) {
    case ww::ParamSlot::Kind::Pointer:
    case ww::ParamSlot::Kind::Int: {
      if (!PyLong_Check(o)) argError(s, "an integer", o);
      uint64_t v = PyLong_AsUnsignedLongLongMask(o);
      if (v == static_cast<uint64_t>(-1) && PyErr_Occurred()) throw nb::python_error();
      std::memcpy(dst, &v, static_cast<size_t>(s.size)); // little-endian truncation
      break;
    }
    case ww::ParamSlot::Kind::Float:
    case ww::ParamSlot::Kind::Double: {
      if (!PyFloat_Check(o) && !PyLong_Check(o)) argError(s, "a number", o);
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
      if (s.kind == ww::ParamSlot::Kind::Float) {
        float f = static_cast<float>(d);
        std::memcpy(dst, &f, 4);
      } else {
        std::memcpy(dst, &d, 8);
      }
      break;
    }
    case ww::ParamSlot::Kind::Tensor: {
      if (!PyBytes_Check(o) || PyBytes_GET_SIZE(o) != s.size)
        argError(s, "a 128-byte tensor descriptor (TensorDescriptor)", o);
      std::memcpy(dst, PyBytes_AS_STRING(o), static_cast<size_t>(s.size));
      break;
    }
    }
  }
  k.launchPacked({gx, gy, gz}, reinterpret_cast<void*>(stream), buffer);
}

/// Interpreter arguments: ints, floats, and (address, nbytes) tuples for host buffers.
void interpretKernel(PyKernel& self, std::tuple<int, int, int> grid, nb::list args) {
  std::vector<ww::InterpArg> converted;
  for (nb::handle a : args) {
    if (PyBool_Check(a.ptr()) || PyLong_Check(a.ptr())) {
      converted.push_back(ww::InterpArg::integer(nb::cast<int64_t>(a)));
    } else if (PyFloat_Check(a.ptr())) {
      converted.push_back(ww::InterpArg::real(nb::cast<double>(a)));
    } else if (nb::isinstance<nb::tuple>(a) && nb::len(a) == 2) {
      auto t = nb::cast<std::tuple<uintptr_t, size_t>>(a);
      converted.push_back(
          ww::InterpArg::buffer(reinterpret_cast<void*>(std::get<0>(t)), std::get<1>(t)));
    } else {
      throw nb::type_error(("interpret: argument of type " +
                            std::string(Py_TYPE(a.ptr())->tp_name) +
                            " is not an int, a float or an (address, nbytes) buffer")
                               .c_str());
    }
  }
  int g[3] = {std::get<0>(grid), std::get<1>(grid), std::get<2>(grid)};
  nb::gil_scoped_release release;
  ww::interpret(*self.compiled, g, converted);
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
  nb::exception<ww::CudaError>(m, "CudaError", PyExc_RuntimeError);
  nb::exception<ww::LaunchError>(m, "LaunchError", PyExc_ValueError);

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
      .def_prop_ro("num_warps", [](const PyKernel& k) { return k.compiled->numWarps; })
      .def_prop_ro("num_ctas", [](const PyKernel& k) { return k.compiled->numCtas; })
      .def_prop_ro("shared_bytes", [](const PyKernel& k) { return k.compiled->sharedBytes; })
      .def_prop_ro("registers", [](const PyKernel& k) { return k.compiled->registers; })
      .def_prop_ro("spill_bytes", [](const PyKernel& k) { return k.compiled->spillBytes; })
      .def_prop_ro("ptxas_log", [](const PyKernel& k) { return k.compiled->ptxasLog; })
      .def_prop_ro("has_tile_ir",
                   [](const PyKernel& k) { return static_cast<bool>(k.compiled->module); })
      .def("metadata_json", [](const PyKernel& k) { return ww::kernelMetadataJson(*k.compiled); })
      .def(
          "prepare", [](PyKernel& k) { k.gpuKernel().prepare(); },
          "Loads the kernel into the current CUDA context.")
      .def("launch", &launch, "gx"_a, "gy"_a, "gz"_a, "stream"_a, "args"_a,
           "Launches on the GPU; args follow `params` (ints for pointers, 128-byte descriptors).")
      .def("interpret", &interpretKernel, "grid"_a, "args"_a,
           "Runs the Tile IR in the CPU interpreter; buffers are (address, nbytes) tuples.");

  m.def("compile", &compileKernel, "files"_a, "kernel"_a, "signature"_a, "globals"_a,
        "target"_a = "sm_90a", "num_warps"_a = 4, "num_stages"_a = 3, "num_ctas"_a = 1,
        "stage"_a = "cubin", "line_info"_a = true, "mbarrier_trap_tries"_a = 0,
        nb::rv_policy::take_ownership,
        "Compiles `kernel` from `files` [(path, text), ...] for a signature string.");
  m.def("kernel_from_metadata", &kernelFromMetadata, "metadata_json"_a, "cubin"_a, "ptx"_a = "",
        nb::rv_policy::take_ownership,
        "Rebuilds a launchable kernel from `wwc --meta` JSON and its cubin (the disk cache).");
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
}
