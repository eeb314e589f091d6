// The C++ side of warpweave._native.Kernel and the packing of Python launch values into a kernel's
// parameter buffer, shared by module.cpp (Kernel.launch) and FastLauncher.cpp (kernel[grid](...)).
// Inline, so that the fast path's packing of each argument stays inlined there.
#pragma once

#include "warpweave/runtime.h"
#include "warpweave/warpweave.h"

#include <nanobind/nanobind.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wwpy {

namespace nb = nanobind;

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

[[noreturn]] inline void argError(const ww::ParamSlot& slot, const char* expected, PyObject* got) {
  std::string type = Py_TYPE(got)->tp_name;
  throw ww::LaunchError("argument '" + slot.name + "' (" + slot.type + ") expects " + expected +
                        ", got " + type);
}

/// Writes one Python launch value (int, float, or 128-byte descriptor) into its slot.
inline void packSlot(const ww::ParamSlot& s, PyObject* o, uint8_t* buffer) {
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

/// A 64-byte aligned parameter buffer on the stack, or on the heap for very large ones.
class ParamBuffer {
public:
  explicit ParamBuffer(int bytes) {
    if (bytes > static_cast<int>(sizeof small_)) {
      large_.resize(static_cast<size_t>(bytes) + 64);
      data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(large_.data()) + 63) &
                                         ~uintptr_t{63});
    }
  }
  uint8_t* data() { return data_; }

private:
  alignas(64) uint8_t small_[1024];
  std::vector<uint8_t> large_;
  uint8_t* data_ = small_;
};

/// Set by tests that run without a GPU: launches then call it with (kernel name, grid, stream,
/// [values read back from the packed parameter buffer]) instead of the driver. A raw reference,
/// never released at exit, when the interpreter may already be gone.
inline PyObject* gLaunchRecorder = nullptr;

/// The launch values read back from a packed parameter buffer, one Python value per slot.
nb::list readBackParams(const ww::GpuKernel& k, const uint8_t* buffer);

inline void launchOrRecord(const ww::GpuKernel& k, ww::Dim3 grid, uintptr_t stream,
                           const uint8_t* buffer, bool programmaticDependent = false) {
  if (gLaunchRecorder) {
    nb::list values = readBackParams(k, buffer);
    nb::object r = nb::steal(
        PyObject_CallFunction(gLaunchRecorder, "s(III)KO", k.name().c_str(), grid.x, grid.y, grid.z,
                              static_cast<unsigned long long>(stream), values.ptr()));
    if (!r) throw nb::python_error();
    return;
  }
  k.launchPacked(grid, reinterpret_cast<void*>(stream), buffer, programmaticDependent);
}

} // namespace wwpy
