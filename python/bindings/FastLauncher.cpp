// The fast launch path of warpweave._native: kernel[grid](...) as one native call.
//
// A FastLauncher belongs to one @jit function; bound to a grid (FastLauncher.bind) it is what
// kernel[grid] returns. A call binds the arguments, computes the specialization key from cheap
// checks (argument types, tensor dtypes and 16-byte alignment, int classes, TensorDescriptors'
// base dtypes and block shapes, constexpr values, launch options) and, for a key seen before,
// packs the parameter buffer and launches on the current torch stream. Everything else (a first
// launch, NumPy arrays, descriptors over anything but CUDA tensors, the interpreter, errors) goes
// to the Python general path, whose GPU kernels are remembered here under their key.
#include "FastLauncher.h"
#include "PyKernel.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <structmember.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;
using namespace wwpy;

namespace {

PyObject* gLaunchErrorType = nullptr;
PyObject* gCudaErrorType = nullptr;
// Set while launch hooks are installed (knobs.runtime.launch_enter_hook / launch_exit_hook, e.g.
// by warpweave.profiler): every launch then takes the general path, which calls them.
bool gLaunchHooks = false;

constexpr int kMaxFastParams = 64;
constexpr size_t kMaxEntries = 1024;
constexpr int kNumOptions = 4;     // num_warps, num_stages, ctas_per_cga, num_ctas
constexpr size_t kMaxKeyedEnv = 2; // environment variables whose values are keyed
const char* const kOptionNames[kNumOptions] = {"num_warps", "num_stages", "ctas_per_cga",
                                               "num_ctas"};

/// The first word each value adds to a key; a second word or a compared object follows.
enum KeyTag : uint64_t {
  kTagTensor = 1, // + the dtype's address (the entry pins it); bit 8: address divisible by 16
  kTagInt,        // + class: == 1, i32/i64/u64, divisible by 16
  kTagFloat,
  kTagBool,
  kTagIntValue,   // + the value (constexprs, options)
  kTagSingleton,  // + the address of None, True or False
  kTagObject,     // + the type's address, and the object, compared with ==
  kTagNoOptions,  // no launch option given (instead of one constant per option)
  kTagEnvValue,   // + the index of a keyed environment variable that is set, then its value
  kTagDescriptor, // bits 8+: the rank; + the base's dtype address (pinned), then each block dim
  kTagTuple,      // bits 8+: the size; then each item as a constant
};

/// Tuples nested deeper than this are keyed as objects (by == only); a call's tuples may add at
/// most kMaxTupleWords words to its key (more: the general path takes the call).
constexpr int kMaxTupleDepth = 4;
constexpr int kMaxTupleWords = 256;

/// What one call computed: the bound values, the key, and the launch values of runtime params.
struct CallState {
  PyObject* values[kMaxFastParams]; // borrowed
  PyObject* options[kNumOptions];   // borrowed; nullptr when not given
  // Room for every param (a descriptor's takes 2 + its rank, at most 5) and option, the keyed
  // environment variables and the device, and for what tuples add beyond that.
  uint64_t words[7 * (kMaxFastParams + kNumOptions + kMaxKeyedEnv + 1) + kMaxTupleWords];
  static constexpr int kMaxObjects = kMaxFastParams + kNumOptions + kMaxKeyedEnv + 1;
  PyObject* objects[kMaxObjects]; // borrowed
  uint64_t bits[kMaxFastParams];  // addresses, ints, bools
  double reals[kMaxFastParams];   // floats
  uint8_t tags[kMaxFastParams];   // KeyTag of each runtime param
  PyObject* held[kMaxFastParams]; // owned: tensor and descriptor base dtypes, keyed by address
  int numHeld = 0;
  PyObject* device = nullptr; // owned: torch's current device index
  int numWords = 0;
  int numObjects = 0;
  int tupleWords = 0; // an upper bound of the words tuples added
  uint64_t hash = 1469598103934665603ull;

  CallState() = default;
  CallState(const CallState&) = delete;
  CallState& operator=(const CallState&) = delete;
  ~CallState() {
    for (int i = 0; i < numHeld; ++i) Py_DECREF(held[i]);
    Py_XDECREF(device);
  }

  void add(uint64_t w) {
    words[numWords++] = w;
    hash = (hash ^ w) * 1099511628211ull;
  }
  /// False (with no Python error left set) for an unhashable value, or when there is no room.
  bool addObject(PyObject* o) {
    if (numObjects == kMaxObjects) return false; // tuples of many objects: the general path
    Py_hash_t h = PyObject_Hash(o);
    if (h == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    add(kTagObject);
    add(reinterpret_cast<uintptr_t>(Py_TYPE(o)));
    hash = (hash ^ static_cast<uint64_t>(h)) * 1099511628211ull;
    objects[numObjects++] = o;
    return true;
  }
  /// A compile-time value: ints by value, None/True/False by identity, tuples item by item (so
  /// that (1, 2) and (True, 2.0), equal under ==, are told apart as their literals are),
  /// anything else by ==.
  bool addConstant(PyObject* o) {
    if (o == Py_None || o == Py_True || o == Py_False) {
      add(kTagSingleton);
      add(reinterpret_cast<uintptr_t>(o));
      return true;
    }
    if (PyLong_CheckExact(o)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (!overflow && !(v == -1 && PyErr_Occurred())) {
        add(kTagIntValue);
        add(static_cast<uint64_t>(v));
        return true;
      }
      PyErr_Clear();
    }
    if (PyTuple_CheckExact(o)) return addTuple(o, 1);
    return addObject(o);
  }
  /// Out of line, so that addConstant stays small enough to inline where every launch calls it.
  [[gnu::noinline]] bool addTuple(PyObject* t, int depth) {
    // At most 2 words an item (an item that is a tuple counts its own words on top).
    const Py_ssize_t n = PyTuple_GET_SIZE(t);
    tupleWords += 1 + 2 * (n > kMaxTupleWords ? kMaxTupleWords : static_cast<int>(n));
    if (tupleWords > kMaxTupleWords) return false;
    add(kTagTuple | static_cast<uint64_t>(n) << 8);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PyTuple_GET_ITEM(t, i);
      const bool ok = !PyTuple_CheckExact(item) ? addConstant(item)
                      : depth < kMaxTupleDepth  ? addTuple(item, depth + 1)
                                                : addObject(item);
      if (!ok) return false;
    }
    return true;
  }
};

/// The specialization class of a runtime int, as the signature spells it (`i32:16`, `i64`, `:1`
/// ...); false for ints beyond 64 bits (the general path reports them).
bool intClass(PyObject* o, bool specialize, uint64_t& bits, uint64_t& cls) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  uint64_t width; // 0: i32, 1: i64, 2: u64
  if (overflow == 0) {
    bits = static_cast<uint64_t>(v);
    width = v >= INT32_MIN && v <= INT32_MAX ? 0 : 1;
  } else {
    if (overflow < 0) return false;
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    bits = u;
    width = 2;
  }
  if (!specialize)
    cls = 16 + width;
  else if (overflow == 0 && v == 1)
    cls = 1;
  else
    cls = 2 + 2 * width + ((overflow == 0 ? v % 16 == 0 : bits % 16 == 0) ? 0 : 1);
  return true;
}

/// grid as (x, y, z): an int or a tuple/list of 1 to 3 ints within CUDA's limits (2^31 - 1,
/// 65535, 65535, as jit._GRID_LIMITS); false otherwise, for the general path to report.
bool parseGrid(PyObject* g, unsigned dims[3]) {
  static constexpr long long kLimits[3] = {0x7FFFFFFF, 0xFFFF, 0xFFFF};
  dims[0] = dims[1] = dims[2] = 1;
  auto dim = [](PyObject* o, int axis, unsigned& out) {
    if (!PyLong_Check(o) && !PyIndex_Check(o)) return false;
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) {
      PyErr_Clear();
      return false;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow || v < 0 || v > kLimits[axis]) return false;
    out = static_cast<unsigned>(v);
    return true;
  };
  if (PyTuple_Check(g) || PyList_Check(g)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(g);
    if (n < 1 || n > 3) return false;
    PyObject** items = PySequence_Fast_ITEMS(g);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!dim(items[i], static_cast<int>(i), dims[i])) return false;
    return true;
  }
  if (PyCallable_Check(g)) return false;
  return dim(g, 0, dims[0]);
}

/// Reads a tensor's is_cuda, dtype and data_ptr() as Python would, minus the lookups: the
/// tensor type's data descriptors (torch's getsets) are called directly and its data_ptr method
/// descriptor unbound, while the type is unchanged since they were found (its version tag) and
/// no instance dict could hold a data_ptr of its own. Anything else takes the generic lookup.
class TensorReader {
public:
  void reset(PyObject* type, PyObject* isCudaName, PyObject* dtypeName, PyObject* dataPtrName) {
    type_ = PyType_Check(type) ? reinterpret_cast<PyTypeObject*>(type) : nullptr;
    names_[0] = isCudaName, names_[1] = dtypeName, names_[2] = dataPtrName;
    tag_ = 0;
    direct_ = false;
  }

  /// Checks the descriptors against the type as it is now: once per launch, before its reads.
  void refresh() { direct_ = current(); }
  PyObject* isCuda(PyObject* v) { return get(v, 0); }
  PyObject* dtype(PyObject* v) { return get(v, 1); }
  PyObject* dataPtr(PyObject* v) {
    if (!direct_ || !method_.is_valid() || mayShadow(v))
      return PyObject_CallMethodNoArgs(v, names_[2]);
    return PyObject_Vectorcall(method_.ptr(), &v, 1, nullptr);
  }
  int traverse(visitproc visit, void* arg) const {
    for (const nb::object& d : getters_) Py_VISIT(d.ptr());
    Py_VISIT(method_.ptr());
    return 0;
  }
  void clear() {
    for (nb::object& d : getters_) d = nb::object();
    method_ = nb::object();
    type_ = nullptr;
    tag_ = 0;
    direct_ = false;
  }

private:
  /// The descriptors match the type as it is now (looked up again after any change to it).
  bool current() {
    if (!type_) return false;
    if (tag_ != 0 && type_->tp_version_tag == tag_) return true;
    for (int i = 0; i < 2; ++i) {
      PyObject* d = _PyType_Lookup(type_, names_[i]);
      getters_[i] =
          d && Py_TYPE(d)->tp_descr_get && Py_TYPE(d)->tp_descr_set ? nb::borrow(d) : nb::object();
    }
    PyObject* m = _PyType_Lookup(type_, names_[2]);
    method_ = m && PyType_HasFeature(Py_TYPE(m), Py_TPFLAGS_METHOD_DESCRIPTOR) ? nb::borrow(m)
                                                                               : nb::object();
    tag_ = type_->tp_version_tag; // 0 when the type has none: the generic lookup every time
    return tag_ != 0;
  }
  PyObject* get(PyObject* v, int i) {
    PyObject* d = getters_[i].ptr();
    if (!direct_ || !d) return PyObject_GetAttr(v, names_[i]);
    return Py_TYPE(d)->tp_descr_get(d, v, reinterpret_cast<PyObject*>(type_));
  }
  /// An instance dict (which Python searches before a method descriptor) may exist.
  bool mayShadow(PyObject* v) const {
    if (PyType_HasFeature(type_, Py_TPFLAGS_MANAGED_DICT)) return true;
    if (type_->tp_dictoffset == 0) return false;
    PyObject** dict = _PyObject_GetDictPtr(v);
    return dict && *dict && PyDict_GET_SIZE(*dict) != 0;
  }

  PyTypeObject* type_ = nullptr; // borrowed: the launcher holds the type
  unsigned int tag_ = 0;
  bool direct_ = false;     // the last refresh() found the descriptors current
  PyObject* names_[3] = {}; // borrowed from the launcher
  nb::object getters_[2];   // is_cuda, dtype
  nb::object method_;       // data_ptr
};

/// A GPU kernel remembered under a key: what a launch needs, with strong references.
struct FastEntry {
  std::vector<uint64_t> words;
  std::vector<PyObject*> objects;
  std::vector<PyObject*> pinned; // tensor dtypes, whose addresses are in words
  /// A weak reference to the Python CompiledKernel that every launch returns: the @jit
  /// function's cache owns it, and a strong one would close a cycle through the function.
  PyObject* compiledRef = nullptr;

  PyObject* options = nullptr;           // (num_warps, num_stages, num_ctas, ...): grid functions
  const ww::GpuKernel* kernel = nullptr; // owned by compiled.kernel
  std::vector<uint16_t> slotParam;       // the parameter passed in each launch slot
  /// Per slot: the swizzle (an int or None) a descriptor slot's encode() is given, as the
  /// general launch gives CompiledKernel.swizzles; nullptr for other slots.
  std::vector<PyObject*> swizzles;
  bool encodes = false; // some slot is a descriptor: launches run TensorDescriptor.encode
  /// The global values the kernel was compiled with (CompiledKernel.used_globals): per value,
  /// its module dict and name, or its closure cell and nullptr, then the value; all strong.
  std::vector<std::array<PyObject*, 3>> guards;

  FastEntry() = default;
  FastEntry(const FastEntry&) = delete;
  FastEntry& operator=(const FastEntry&) = delete;
  ~FastEntry() { // entries are dropped only from calls into the extension, with the GIL held
    for (PyObject* o : objects) Py_DECREF(o);
    for (PyObject* o : pinned) Py_DECREF(o);
    for (PyObject* o : swizzles) Py_XDECREF(o);
    for (const auto& g : guards)
      for (PyObject* o : g) Py_XDECREF(o);
    Py_XDECREF(compiledRef);
    Py_XDECREF(options);
  }

  /// The current value of guard `g` (borrowed; nullptr when gone).
  static PyObject* guardedNow(const std::array<PyObject*, 3>& g) {
    PyObject* now = g[1] ? PyDict_GetItemWithError(g[0], g[1]) : PyCell_GET(g[0]);
    if (!now) PyErr_Clear();
    return now;
  }
  /// Every guarded global still holds the very object it held (the usual case: no Python code
  /// runs to say so).
  bool guardsIdentical() const {
    for (const auto& g : guards)
      if (guardedNow(g) != g[2]) return false;
    return true;
  }
  /// Every guarded global holds its value: the same object, or one of the same type that
  /// compares equal (JITFunction._check_environment's test). False sends the launch to the
  /// general path, which recompiles. The comparison may run Python code.
  bool guardsHold() const {
    for (const auto& g : guards) {
      PyObject* now = guardedNow(g);
      if (now == g[2]) continue;
      if (!now || Py_TYPE(now) != Py_TYPE(g[2])) return false;
      int eq = PyObject_RichCompareBool(now, g[2], Py_EQ);
      if (eq < 0) PyErr_Clear();
      if (eq != 1) return false;
    }
    return true;
  }

  bool matches(const CallState& st) const {
    if (words.size() != static_cast<size_t>(st.numWords) ||
        std::memcmp(words.data(), st.words, words.size() * sizeof(uint64_t)) != 0)
      return false;
    for (size_t i = 0; i < objects.size(); ++i) {
      if (objects[i] == st.objects[i]) continue;
      int eq = PyObject_RichCompareBool(objects[i], st.objects[i], Py_EQ);
      if (eq < 0) PyErr_Clear();
      if (eq != 1) return false;
    }
    return true;
  }
};

class FastLauncher {
public:
  /// `owner` is a weak reference to the @jit function, which owns this launcher.
  FastLauncher(const std::string& name, const std::vector<std::string>& names,
               std::vector<int> constexprs, std::vector<int> specialize,
               std::vector<nb::object> defaults, nb::object missing, nb::object owner,
               nb::object normalizeGrid, nb::object envData, std::vector<nb::bytes> envKeys,
               std::vector<nb::bytes> envKeyed)
      : name_(name), constexprs_(std::move(constexprs)), specialize_(std::move(specialize)),
        owner_(std::move(owner)), normalizeGrid_(std::move(normalizeGrid)),
        envData_(std::move(envData)), envKeys_(std::move(envKeys)), envKeyed_(std::move(envKeyed)) {
    // Interned, as Python's keyword names are: kwargs are found by address.
    for (const std::string& n : names)
      names_.push_back(nb::steal<nb::str>(PyUnicode_InternFromString(n.c_str())));
    const size_t n = names_.size();
    if (constexprs_.size() != n || specialize_.size() != n || defaults.size() != n)
      throw std::invalid_argument("FastLauncher: one name, constexpr flag, specialize flag and "
                                  "default per parameter");
    for (nb::object& d : defaults) defaults_.push_back(d.is(missing) ? nb::object() : d);
    for (const char* o : kOptionNames) {
      optionNames_.push_back(nb::steal<nb::str>(PyUnicode_InternFromString(o)));
      // A parameter named like an option receives the option too: the general path binds both.
      for (const std::string& n : names) paramIsOption_ = paramIsOption_ || n == o;
    }
    for (const char* o : {"num_warps", "num_stages", "num_ctas"})
      metaNames_.push_back(nb::steal<nb::str>(PyUnicode_InternFromString(o)));
    dtypeName_ = nb::steal<nb::str>(PyUnicode_InternFromString("dtype"));
    isCudaName_ = nb::steal<nb::str>(PyUnicode_InternFromString("is_cuda"));
    dataPtrName_ = nb::steal<nb::str>(PyUnicode_InternFromString("data_ptr"));
    generalName_ = nb::steal<nb::str>(PyUnicode_InternFromString("_launch_general"));
    baseName_ = nb::steal<nb::str>(PyUnicode_InternFromString("base"));
    blockShapeName_ = nb::steal<nb::str>(PyUnicode_InternFromString("block_shape"));
    encodeName_ = nb::steal<nb::str>(PyUnicode_InternFromString("encode"));
    if (envKeyed_.size() > kMaxKeyedEnv)
      throw std::invalid_argument("FastLauncher: at most " + std::to_string(kMaxKeyedEnv) +
                                  " keyed environment variables");
    if (!PyWeakref_CheckRef(owner_.ptr()))
      throw std::invalid_argument("FastLauncher: owner must be a weakref.ref to the @jit function");
  }

  /// torch.Tensor and torch's current-device and raw-stream functions (tests give fakes), and
  /// the TensorDescriptor class (None: descriptors take the general path).
  void configure(nb::object tensorType, nb::object getDevice, nb::object getRawStream,
                 nb::object descriptorType) {
    tensorType_ = std::move(tensorType);
    descriptorType_ = descriptorType.is_none() ? nb::object() : std::move(descriptorType);
    tensors_.reset(tensorType_.ptr(), isCudaName_.ptr(), dtypeName_.ptr(), dataPtrName_.ptr());
    getDevice_ = std::move(getDevice);
    getRawStream_ = std::move(getRawStream);
  }
  bool configured() const { return getRawStream_.is_valid(); }
  void clear() {
    entries_.clear();
    numEntries_ = 0;
    recent_ = nullptr;
  }

  /// The cyclic GC's view: a grid or stream function may reach back to the @jit function.
  int traverse(visitproc visit, void* arg) const {
    for (const nb::object* o : {&owner_, &normalizeGrid_, &envData_, &tensorType_, &descriptorType_,
                                &getDevice_, &getRawStream_})
      Py_VISIT(o->ptr());
    for (const nb::object& d : defaults_) Py_VISIT(d.ptr());
    if (int r = tensors_.traverse(visit, arg)) return r;
    for (const auto& [hash, bucket] : entries_)
      for (const auto& e : bucket) {
        for (PyObject* o : e->objects) Py_VISIT(o);
        for (PyObject* o : e->pinned) Py_VISIT(o);
        for (PyObject* o : e->swizzles) Py_VISIT(o);
        Py_VISIT(e->options);
        Py_VISIT(e->compiledRef);
        for (const auto& g : e->guards)
          for (PyObject* o : g) Py_VISIT(o);
      }
    return 0;
  }
  void dropReferences() {
    clear();
    tensors_.clear();
    for (nb::object* o :
         {&normalizeGrid_, &envData_, &tensorType_, &descriptorType_, &getDevice_, &getRawStream_})
      *o = nb::object();
    defaults_.assign(defaults_.size(), nb::object());
  }
  size_t size() const { return numEntries_; }

  /// kernel[grid](*args, **kwargs); `dims` is the grid already parsed, or nullptr.
  PyObject* call(PyObject* grid, const unsigned* dims, PyObject* const* args, size_t nargsf,
                 PyObject* kwnames) {
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (gLaunchHooks) return general(grid, args, nargs, kwnames, nullptr);
    CallState st;
    if (!computeKey(args, nargs, kwnames, st)) {
      if (configured()) return general(grid, args, nargs, kwnames, nullptr);
      // The first general launch gives the launcher torch's tensor type: key it again then.
      nb::object compiled = nb::steal(general(grid, args, nargs, kwnames, nullptr));
      CallState again;
      if (configured() && computeKey(args, nargs, kwnames, again)) remember(again, compiled);
      return compiled.release().ptr();
    }
    // The stream comes first: from here to the driver call no Python code runs for a fixed
    // grid and no descriptors, so the entry found below cannot be dropped under us (else it
    // is kept alive below).
    uintptr_t stream;
    if (!currentStream(st, stream)) return general(grid, args, nargs, kwnames, nullptr);
    const std::shared_ptr<FastEntry>* found = find(st);
    if (!found) return general(grid, args, nargs, kwnames, &st);
    const FastEntry* entry = found->get();
    // A grid function, a descriptor's encode or a guard's == may run anything, even clear().
    std::shared_ptr<FastEntry> kept;
    if (!entry->guards.empty() && !entry->guardsIdentical()) {
      kept = *found;
      if (!entry->guardsHold()) return general(grid, args, nargs, kwnames, &st);
    }
    nb::object compiled = nb::borrow(PyWeakref_GetObject(entry->compiledRef));
    unsigned g[3];
    if (!kept && (!dims || entry->encodes)) kept = *found;
    if (dims) {
      g[0] = dims[0], g[1] = dims[1], g[2] = dims[2];
    } else {
      if (!gridFromFunction(grid, st, *entry, g))
        return general(grid, args, nargs, kwnames, nullptr);
    }
    const ww::GpuKernel& k = *entry->kernel;
    ParamBuffer buffer(k.paramBytes());
    const std::vector<ww::ParamSlot>& slots = k.slots();
    for (size_t i = 0; i < slots.size(); ++i) {
      const ww::ParamSlot& s = slots[i];
      const uint16_t p = entry->slotParam[i];
      uint8_t* dst = buffer.data() + s.offset;
      if (s.kind == ww::ParamSlot::Kind::Tensor) {
        // The general launch's bytes: encode(swizzle) caches the maps, so this is a lookup.
        PyObject* encodeArgs[2] = {st.values[p], entry->swizzles[i]};
        nb::object map =
            nb::steal(PyObject_VectorcallMethod(encodeName_.ptr(), encodeArgs, 2, nullptr));
        if (!map.is_valid()) throw nb::python_error();
        packSlot(s, map.ptr(), buffer.data());
      } else if (s.kind == ww::ParamSlot::Kind::Float) {
        float f = static_cast<float>(st.reals[p]);
        std::memcpy(dst, &f, 4);
      } else if (s.kind == ww::ParamSlot::Kind::Double) {
        std::memcpy(dst, &st.reals[p], 8);
      } else {
        std::memcpy(dst, &st.bits[p], static_cast<size_t>(s.size));
      }
    }
    launchOrRecord(k, {g[0], g[1], g[2]}, stream, buffer.data());
    return compiled.release().ptr();
  }

private:
  /// Binds the call and computes its key; false when the general path must take it.
  bool computeKey(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, CallState& st) {
    const size_t n = names_.size();
    if (n > kMaxFastParams || static_cast<size_t>(nargs) > n) return false;
    if (paramIsOption_ && kwnames) return false;
    for (size_t i = 0; i < n; ++i)
      st.values[i] = i < static_cast<size_t>(nargs) ? args[i] : nullptr;
    for (PyObject*& o : st.options) o = nullptr;
    if (kwnames) {
      const Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
      for (Py_ssize_t j = 0; j < nk; ++j) {
        PyObject* key = PyTuple_GET_ITEM(kwnames, j);
        PyObject* value = args[nargs + j];
        // Keyword names are interned strings, almost always the very objects held here.
        int at = findByAddress(names_, key);
        int option = at < 0 ? findByAddress(optionNames_, key) : -1;
        if (at < 0 && option < 0) {
          at = findByValue(names_, key);
          option = at < 0 ? findByValue(optionNames_, key) : -1;
        }
        if (at >= 0) {
          if (st.values[at]) return false; // given twice: the general path says so
          st.values[at] = value;
        } else if (option >= 0) {
          st.options[option] = value;
        } else {
          return false;
        }
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (!st.values[i]) {
        if (!defaults_[i].is_valid()) return false;
        st.values[i] = defaults_[i].ptr();
      }
    if (!envAllowsFastPath()) return false;
    // Variables that choose the kernel (WARPWEAVE_TARGET): those set are keyed with their
    // values; the usual case, none set, adds nothing to the key.
    for (size_t i = 0; i < envKeyed_.size(); ++i) {
      PyObject* v = PyDict_GetItemWithError(envData_.ptr(), envKeyed_[i].ptr());
      if (!v) {
        if (PyErr_Occurred()) return clearAndRefuse();
        continue;
      }
      st.add(kTagEnvValue);
      st.add(i);
      if (!st.addConstant(v)) return false;
    }
    if (!st.options[0] && !st.options[1] && !st.options[2] && !st.options[3]) {
      st.add(kTagNoOptions);
    } else {
      for (PyObject* o : st.options)
        if (!st.addConstant(o ? o : Py_None)) return false;
    }
    PyObject* tensorType = tensorType_.ptr();
    if (tensorType) tensors_.refresh();
    for (size_t i = 0; i < n; ++i) {
      PyObject* v = st.values[i];
      if (constexprs_[i] || v == Py_None) {
        if (!st.addConstant(v)) return false;
        st.tags[i] = 0;
        continue;
      }
      PyTypeObject* t = Py_TYPE(v);
      if (tensorType && reinterpret_cast<PyObject*>(t) == tensorType) {
        // Raw references: this runs for every tensor of every launch.
        PyObject* isCuda = tensors_.isCuda(v);
        if (!isCuda) return clearAndRefuse();
        Py_DECREF(isCuda); // True and False are immortal singletons
        if (isCuda != Py_True) return false;
        PyObject* ptr = tensors_.dataPtr(v);
        if (!ptr) return clearAndRefuse();
        st.bits[i] = PyLong_Check(ptr) ? PyLong_AsUnsignedLongLongMask(ptr) : ~uint64_t{0};
        Py_DECREF(ptr);
        if (st.bits[i] == ~uint64_t{0}) return clearAndRefuse();
        PyObject* dtype = tensors_.dtype(v);
        if (!dtype) return clearAndRefuse();
        // By identity (torch's dtypes are singletons): no hash, no == on a hit.
        st.held[st.numHeld++] = dtype;
        st.add(kTagTensor | (specialize_[i] && st.bits[i] % 16 == 0 ? 0x100 : 0));
        st.add(reinterpret_cast<uintptr_t>(dtype));
        st.tags[i] = kTagTensor;
      } else if (t == &PyLong_Type) {
        uint64_t cls;
        if (!intClass(v, specialize_[i], st.bits[i], cls)) return false;
        st.add(kTagInt);
        st.add(cls);
        st.tags[i] = kTagInt;
      } else if (t == &PyFloat_Type) {
        st.reals[i] = PyFloat_AS_DOUBLE(v);
        st.add(kTagFloat);
        st.tags[i] = kTagFloat;
      } else if (t == &PyBool_Type) {
        st.bits[i] = v == Py_True ? 1 : 0;
        st.add(kTagBool);
        st.tags[i] = kTagBool;
      } else if (tensorType && reinterpret_cast<PyObject*>(t) == descriptorType_.ptr()) {
        if (!addDescriptor(v, st)) return false;
        st.tags[i] = kTagDescriptor;
      } else {
        return false; // NumPy arrays, subclasses: the general path
      }
    }
    // The current device (torch's): its stream is the launch's, and its architecture chose the
    // kernel, so it is part of the key (a process may drive GPUs of several architectures).
    if (!configured()) return false;
    st.device = PyObject_CallNoArgs(getDevice_.ptr());
    if (!st.device) return clearAndRefuse(); // the general path reports it
    return st.addConstant(st.device);
  }

  /// A TensorDescriptor over a CUDA torch tensor, keyed as _scan keys it: by its signature
  /// `desc<dtype,BxC>`, i.e. the base's dtype and the block shape. False for the general path
  /// (NumPy or CPU bases, which it runs or reports; block shapes that are not lists of ints).
  bool addDescriptor(PyObject* v, CallState& st) {
    nb::object base = nb::steal(PyObject_GetAttr(v, baseName_.ptr()));
    if (!base.is_valid()) return clearAndRefuse();
    if (reinterpret_cast<PyObject*>(Py_TYPE(base.ptr())) != tensorType_.ptr()) return false;
    PyObject* isCuda = tensors_.isCuda(base.ptr());
    if (!isCuda) return clearAndRefuse();
    Py_DECREF(isCuda);
    if (isCuda != Py_True) return false;
    nb::object block = nb::steal(PyObject_GetAttr(v, blockShapeName_.ptr()));
    if (!block.is_valid()) return clearAndRefuse();
    if (!PyList_CheckExact(block.ptr()) && !PyTuple_CheckExact(block.ptr())) return false;
    const Py_ssize_t rank = PySequence_Fast_GET_SIZE(block.ptr());
    if (rank < 1 || rank > 5) return false;
    PyObject** items = PySequence_Fast_ITEMS(block.ptr());
    uint64_t dims[5];
    for (Py_ssize_t d = 0; d < rank; ++d) {
      if (!PyLong_CheckExact(items[d])) return false;
      int overflow = 0;
      long long b = PyLong_AsLongLongAndOverflow(items[d], &overflow);
      if (overflow) return false;
      if (b == -1 && PyErr_Occurred()) return clearAndRefuse();
      dims[d] = static_cast<uint64_t>(b);
    }
    PyObject* dtype = tensors_.dtype(base.ptr());
    if (!dtype) return clearAndRefuse();
    st.held[st.numHeld++] = dtype; // by identity, as for tensors
    st.add(kTagDescriptor | static_cast<uint64_t>(rank) << 8);
    st.add(reinterpret_cast<uintptr_t>(dtype));
    for (Py_ssize_t d = 0; d < rank; ++d) st.add(dims[d]);
    return true;
  }

  static bool clearAndRefuse() {
    PyErr_Clear();
    return false;
  }

  static int findByAddress(const std::vector<nb::str>& names, PyObject* key) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i].ptr() == key) return static_cast<int>(i);
    return -1;
  }
  static int findByValue(const std::vector<nb::str>& names, PyObject* key) {
    for (size_t i = 0; i < names.size(); ++i)
      if (PyUnicode_Compare(names[i].ptr(), key) == 0) return static_cast<int>(i);
    if (PyErr_Occurred()) PyErr_Clear();
    return -1;
  }

  /// Neither the interpreter nor trapping barrier waits are asked for (os.environ's dict holds
  /// neither key): the fast path does not key on them.
  bool envAllowsFastPath() const {
    PyObject* env = envData_.ptr();
    if (!env || !PyDict_Check(env)) return false;
    for (const nb::bytes& k : envKeys_) {
      int has = PyDict_Contains(env, k.ptr());
      if (has != 0) {
        if (has < 0) PyErr_Clear();
        return false;
      }
    }
    return true;
  }

  /// The live entry for st's key (valid until the entries change); entries whose
  /// CompiledKernel is gone are dropped here.
  const std::shared_ptr<FastEntry>* find(const CallState& st) {
    // Launches mostly repeat the last key: that entry first, without the map.
    if (recent_ && recentHash_ == st.hash && (*recent_)->matches(st) &&
        PyWeakref_GetObject((*recent_)->compiledRef) != Py_None)
      return recent_;
    auto it = entries_.find(st.hash);
    if (it == entries_.end()) return nullptr;
    std::vector<std::shared_ptr<FastEntry>>& bucket = it->second;
    for (size_t i = 0; i < bucket.size(); ++i) {
      if (!bucket[i]->matches(st)) continue;
      if (PyWeakref_GetObject(bucket[i]->compiledRef) != Py_None) {
        recent_ = &bucket[i];
        recentHash_ = st.hash;
        return recent_;
      }
      bucket.erase(bucket.begin() + static_cast<std::ptrdiff_t>(i));
      --numEntries_;
      recent_ = nullptr;
      return nullptr;
    }
    return nullptr;
  }

  bool gridFromFunction(PyObject* grid, const CallState& st, const FastEntry& e, unsigned g[3]) {
    if (!PyCallable_Check(grid)) return false;
      // Sized up front: the dict never grows while it is filled.
#if PY_VERSION_HEX < 0x030D0000
    nb::object meta = nb::steal(_PyDict_NewPresized(static_cast<Py_ssize_t>(names_.size()) + 3));
#else
    nb::object meta = nb::steal(PyDict_New());
#endif
    if (!meta.is_valid()) throw nb::python_error();
    for (size_t i = 0; i < names_.size(); ++i)
      if (PyDict_SetItem(meta.ptr(), names_[i].ptr(), st.values[i]) < 0) throw nb::python_error();
    for (int i = 0; i < 3; ++i)
      if (PyDict_SetItem(meta.ptr(), metaNames_[i].ptr(), PyTuple_GET_ITEM(e.options, i)) < 0)
        throw nb::python_error();
    nb::object r = nb::steal(PyObject_CallOneArg(grid, meta.ptr()));
    if (!r.is_valid()) throw nb::python_error();
    if (parseGrid(r.ptr(), g)) return true;
    nb::object normalized = normalizeGrid_(r, name_); // raises the general path's errors
    if (parseGrid(normalized.ptr(), g)) return true;
    throw nb::value_error(
        (std::string(name_) + ": grid " + nb::repr(r).c_str() + " is outside CUDA's grid limits")
            .c_str());
  }

  /// torch's current raw stream on st's device; false (no error set) when that fails, for the
  /// general path to report.
  bool currentStream(const CallState& st, uintptr_t& stream) const {
    PyObject* s = PyObject_CallOneArg(getRawStream_.ptr(), st.device);
    if (!s) return clearAndRefuse();
    if (!PyLong_Check(s)) {
      Py_DECREF(s);
      return false;
    }
    uint64_t v = PyLong_AsUnsignedLongLongMask(s);
    Py_DECREF(s);
    if (v == ~uint64_t{0} && PyErr_Occurred()) return clearAndRefuse();
    stream = static_cast<uintptr_t>(v);
    return true;
  }

  /// The Python general path; with `st`, its GPU kernel is remembered under st's key.
  PyObject* general(PyObject* grid, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                    const CallState* st) {
    nb::object positional = nb::steal(PyTuple_New(nargs));
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(positional.ptr(), i, args[i]);
    }
    nb::dict keywords;
    if (kwnames)
      for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(kwnames); ++j)
        if (PyDict_SetItem(keywords.ptr(), PyTuple_GET_ITEM(kwnames, j), args[nargs + j]) < 0)
          throw nb::python_error();
    PyObject* owner = PyWeakref_GetObject(owner_.ptr());
    if (owner == Py_None) throw std::runtime_error(name_ + ": the @jit function is gone");
    nb::object compiled = nb::steal(PyObject_CallMethodObjArgs(
        owner, generalName_.ptr(), grid, positional.ptr(), keywords.ptr(), nullptr));
    if (!compiled.is_valid()) throw nb::python_error();
    if (st && configured()) remember(*st, compiled);
    return compiled.release().ptr();
  }

  void remember(const CallState& st, nb::handle compiled) {
    if (find(st)) return;
    nb::object interpret = nb::getattr(compiled, "interpret", nb::none());
    if (!interpret.is(nb::handle(Py_False))) return;
    PyKernel* pk = nullptr;
    if (!nb::try_cast<PyKernel*>(nb::getattr(compiled, "kernel", nb::none()), pk) || !pk) return;
    nb::object options = nb::getattr(compiled, "options", nb::none());
    // (num_warps, num_stages, num_ctas, cluster shape): a grid function sees the first three.
    if (!PyTuple_Check(options.ptr()) || PyTuple_GET_SIZE(options.ptr()) < 3) return;
    std::vector<int> index;
    if (!nb::try_cast(nb::getattr(compiled, "gpu_index", nb::none()), index)) return;
    const ww::GpuKernel* kernel = nullptr;
    try { // a kernel the runtime cannot take fails its launches on the general path
      kernel = &pk->gpuKernel();
    } catch (const std::exception&) {
      return;
    }
    const ww::GpuKernel& k = *kernel;
    if (index.size() != k.slots().size()) return;
    nb::object swizzles = nb::getattr(compiled, "swizzles", nb::none());
    auto e = std::make_shared<FastEntry>();
    for (size_t i = 0; i < index.size(); ++i) {
      const int p = index[i];
      if (p < 0 || static_cast<size_t>(p) >= names_.size()) return;
      const uint8_t tag = st.tags[p];
      switch (k.slots()[i].kind) { // only values the key pins to the slot's kind
      case ww::ParamSlot::Kind::Pointer:
        if (tag != kTagTensor) return;
        break;
      case ww::ParamSlot::Kind::Int:
        if (tag != kTagInt && tag != kTagBool) return;
        break;
      case ww::ParamSlot::Kind::Float:
      case ww::ParamSlot::Kind::Double:
        if (tag != kTagFloat) return;
        break;
      case ww::ParamSlot::Kind::Tensor: {
        if (tag != kTagDescriptor || !PyDict_Check(swizzles.ptr())) return;
        PyObject* swizzle = PyDict_GetItemString(swizzles.ptr(), k.slots()[i].name.c_str());
        if (!swizzle) {
          if (PyErr_Occurred()) PyErr_Clear();
          swizzle = Py_None;
        }
        e->swizzles.resize(index.size(), nullptr);
        Py_INCREF(swizzle);
        e->swizzles[i] = swizzle;
        e->encodes = true;
        break;
      }
      }
      e->slotParam.push_back(static_cast<uint16_t>(p));
    }
    e->words.assign(st.words, st.words + st.numWords);
    for (int i = 0; i < st.numObjects; ++i) {
      Py_INCREF(st.objects[i]);
      e->objects.push_back(st.objects[i]);
    }
    for (int i = 0; i < st.numHeld; ++i) {
      Py_INCREF(st.held[i]);
      e->pinned.push_back(st.held[i]);
    }
    e->compiledRef = PyWeakref_NewRef(compiled.ptr(), nullptr);
    if (!e->compiledRef) {
      PyErr_Clear();
      return;
    }
    e->options = options.release().ptr();
    e->kernel = &k;
    // Guards come as ((dict, name, value) or (cell, None, value), ...); anything else leaves
    // the kernel to the general path, which checks them itself.
    nb::object used = nb::getattr(compiled, "used_globals", nb::none());
    if (!used.is_none()) {
      if (!PyTuple_Check(used.ptr())) return;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(used.ptr()); ++i) {
        PyObject* g = PyTuple_GET_ITEM(used.ptr(), i);
        if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 3) return;
        PyObject* holder = PyTuple_GET_ITEM(g, 0);
        PyObject* name = PyTuple_GET_ITEM(g, 1);
        bool cell = PyCell_Check(holder) && name == Py_None;
        if (!cell && !(PyDict_Check(holder) && PyUnicode_Check(name))) return;
        std::array<PyObject*, 3> guard = {holder, cell ? nullptr : name, PyTuple_GET_ITEM(g, 2)};
        for (PyObject* o : guard) Py_XINCREF(o);
        e->guards.push_back(guard);
      }
    }
    // Bounded, should keys never match again (constexpr objects equal only to themselves).
    if (numEntries_ >= kMaxEntries) clear();
    entries_[st.hash].push_back(std::move(e));
    ++numEntries_;
    recent_ = nullptr; // the bucket's vector may have moved
  }

  std::string name_;
  std::vector<nb::str> names_;
  std::vector<int> constexprs_, specialize_;
  std::vector<nb::object> defaults_; // invalid for required params
  nb::object owner_, normalizeGrid_, envData_;
  std::vector<nb::bytes> envKeys_;  // set: the general path
  std::vector<nb::bytes> envKeyed_; // values in every key
  std::vector<nb::str> optionNames_;
  bool paramIsOption_ = false;     // a parameter shares an option's name: keyword calls go general
  std::vector<nb::str> metaNames_; // the options a grid function sees in its dict
  nb::str dtypeName_, isCudaName_, dataPtrName_, generalName_;
  nb::str baseName_, blockShapeName_, encodeName_; // TensorDescriptor's
  nb::object tensorType_, getDevice_, getRawStream_;
  nb::object descriptorType_; // TensorDescriptor; invalid: descriptors take the general path
  TensorReader tensors_;
  std::unordered_map<uint64_t, std::vector<std::shared_ptr<FastEntry>>> entries_;
  size_t numEntries_ = 0;
  /// The entry the last find() returned, inside entries_ (reset whenever they change).
  const std::shared_ptr<FastEntry>* recent_ = nullptr;
  uint64_t recentHash_ = 0;
};

/// kernel[grid]: a FastLauncher bound to one grid, called through vectorcall.
struct BoundLaunch {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* launcher; // the FastLauncher's Python object
  FastLauncher* impl;
  PyObject* grid;
  bool fixed; // dims holds the parsed grid
  unsigned dims[3];
};

PyObject* boundLaunchCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* b = reinterpret_cast<BoundLaunch*>(self);
  if (!b->impl) {
    PyErr_SetString(PyExc_RuntimeError, "this kernel[grid] was cleared by the garbage collector");
    return nullptr;
  }
  try {
    return b->impl->call(b->grid, b->fixed ? b->dims : nullptr, args, nargsf, kwnames);
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    PyErr_SetString(
        e.type() == nb::exception_type::value_error ? PyExc_ValueError : PyExc_TypeError, e.what());
  } catch (const ww::LaunchError& e) {
    PyErr_SetString(gLaunchErrorType, e.what());
  } catch (const ww::CudaError& e) {
    PyErr_SetString(gCudaErrorType, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

int boundLaunchTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* b = reinterpret_cast<BoundLaunch*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(b->launcher);
  Py_VISIT(b->grid);
  return 0;
}

int boundLaunchClear(PyObject* self) {
  auto* b = reinterpret_cast<BoundLaunch*>(self);
  b->impl = nullptr;
  Py_CLEAR(b->launcher);
  Py_CLEAR(b->grid);
  return 0;
}

void boundLaunchDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  boundLaunchClear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

int fastLauncherTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  return nb::inst_ptr<FastLauncher>(self)->traverse(visit, arg);
}

int fastLauncherClear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<FastLauncher>(self)->dropReferences();
  return 0;
}

PyType_Slot fastLauncherSlots[] = {{Py_tp_traverse, reinterpret_cast<void*>(fastLauncherTraverse)},
                                   {Py_tp_clear, reinterpret_cast<void*>(fastLauncherClear)},
                                   {0, nullptr}};

PyMemberDef boundLaunchMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(BoundLaunch, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot boundLaunchSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(boundLaunchDealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(boundLaunchTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(boundLaunchClear)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_members, boundLaunchMembers},
    {Py_tp_doc, const_cast<char*>("kernel[grid]: call it with the kernel's arguments")},
    {0, nullptr}};

PyType_Spec boundLaunchSpec = {"warpweave._native.BoundLaunch", sizeof(BoundLaunch), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
                               boundLaunchSlots};

PyTypeObject* gBoundLaunchType = nullptr;

/// A new kernel[grid] of `launcher` (the Python object of `impl`); nullptr with an error set.
PyObject* newBoundLaunch(PyObject* launcher, FastLauncher* impl, PyObject* grid) {
  auto* b = reinterpret_cast<BoundLaunch*>(PyType_GenericAlloc(gBoundLaunchType, 0));
  if (!b) return nullptr;
  b->vectorcall = boundLaunchCall;
  b->launcher = Py_NewRef(launcher);
  b->impl = impl;
  b->grid = Py_NewRef(grid);
  b->fixed = parseGrid(grid, b->dims);
  return reinterpret_cast<PyObject*>(b);
}

nb::object bindLaunch(FastLauncher& launcher, nb::handle grid) {
  nb::object self = nb::find(&launcher);
  PyObject* b = newBoundLaunch(self.ptr(), &launcher, grid.ptr());
  if (!b) throw nb::python_error();
  return nb::steal(b);
}

// ---------------------------------------------------------------------------------------------
// kernel[grid] in C
// ---------------------------------------------------------------------------------------------
//
// JITFunction.__getitem__ once the extension is loaded: a method descriptor, which Python calls
// unbound as (kernel, grid) without making a bound method. It returns the kernel[grid] already
// in the kernel's _bound dict, binds grid functions with closures (never cached: they may hold
// tensors) directly, and hands everything else to the Python method it stands in for.

struct Subscript {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fallback; // JITFunction._subscript
};

PyTypeObject* gFastLauncherType = nullptr;
PyObject* gBoundAttr = nullptr;    // "_bound"
PyObject* gLauncherAttr = nullptr; // "_launcher"

PyObject* subscriptCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* s = reinterpret_cast<Subscript*>(self);
  if (PyVectorcall_NARGS(nargsf) == 2 && !kwnames) {
    PyObject* kernel = args[0];
    PyObject* grid = args[1];
    PyObject* bound = PyObject_GetAttr(kernel, gBoundAttr);
    PyObject* hit = nullptr;
    if (bound && PyDict_CheckExact(bound)) {
      hit = PyDict_GetItemWithError(bound, grid); // an unhashable grid (a list) fails
      Py_XINCREF(hit);
    }
    Py_XDECREF(bound);
    if (hit) return hit;
    PyErr_Clear();
    if (PyFunction_Check(grid) && PyFunction_GET_CLOSURE(grid)) {
      PyObject* launcher = PyObject_GetAttr(kernel, gLauncherAttr);
      if (launcher && Py_TYPE(launcher) == gFastLauncherType && nb::inst_ready(launcher)) {
        PyObject* r = newBoundLaunch(launcher, nb::inst_ptr<FastLauncher>(launcher), grid);
        Py_DECREF(launcher);
        return r;
      }
      Py_XDECREF(launcher);
      PyErr_Clear();
    }
  }
  return PyObject_Vectorcall(s->fallback, args, nargsf, kwnames);
}

/// As a method descriptor must: kernel.__getitem__ is a bound method, the class's is itself.
PyObject* subscriptGet(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

int subscriptTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(reinterpret_cast<Subscript*>(self)->fallback);
  return 0;
}

int subscriptClear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<Subscript*>(self)->fallback);
  return 0;
}

void subscriptDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  subscriptClear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef subscriptMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Subscript, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot subscriptSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(subscriptDealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(subscriptTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(subscriptClear)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(subscriptGet)},
    {Py_tp_members, subscriptMembers},
    {Py_tp_doc, const_cast<char*>("kernel[grid]: the kernel bound to a launch grid")},
    {0, nullptr}};

PyType_Spec subscriptSpec = {"warpweave._native.Subscript", sizeof(Subscript), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC |
                                 Py_TPFLAGS_METHOD_DESCRIPTOR,
                             subscriptSlots};

PyTypeObject* gSubscriptType = nullptr;

/// The C __getitem__ standing in for `fallback` (a function of (kernel, grid)).
nb::object makeSubscript(nb::handle fallback) {
  if (!PyCallable_Check(fallback.ptr())) throw nb::type_error("make_subscript: not callable");
  auto* s = reinterpret_cast<Subscript*>(PyType_GenericAlloc(gSubscriptType, 0));
  if (!s) throw nb::python_error();
  s->vectorcall = subscriptCall;
  s->fallback = fallback.inc_ref().ptr();
  return nb::steal(reinterpret_cast<PyObject*>(s));
}

} // namespace

void wwpy::defineFastLauncher(nb::module_& m, PyObject* launchErrorType, PyObject* cudaErrorType) {
  gCudaErrorType = cudaErrorType;
  gLaunchErrorType = launchErrorType;
  Py_INCREF(gCudaErrorType); // kept for the fast path's own error translation
  Py_INCREF(gLaunchErrorType);

  gBoundLaunchType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&boundLaunchSpec));
  if (!gBoundLaunchType) throw nb::python_error();
  m.attr("BoundLaunch") = nb::handle(reinterpret_cast<PyObject*>(gBoundLaunchType));
  gSubscriptType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&subscriptSpec));
  if (!gSubscriptType) throw nb::python_error();
  m.attr("Subscript") = nb::handle(reinterpret_cast<PyObject*>(gSubscriptType));
  gBoundAttr = PyUnicode_InternFromString("_bound");
  gLauncherAttr = PyUnicode_InternFromString("_launcher");

  auto fastLauncher = nb::class_<FastLauncher>(
      m, "FastLauncher", "The native kernel[grid](...) path of one @jit function",
      nb::type_slots(fastLauncherSlots));
  gFastLauncherType = reinterpret_cast<PyTypeObject*>(fastLauncher.ptr());
  fastLauncher
      .def(nb::init<const std::string&, const std::vector<std::string>&, std::vector<int>,
                    std::vector<int>, std::vector<nb::object>, nb::object, nb::object, nb::object,
                    nb::object, std::vector<nb::bytes>, std::vector<nb::bytes>>(),
           "name"_a, "names"_a, "constexprs"_a, "specialize"_a, "defaults"_a, "missing"_a,
           "owner"_a, "normalize_grid"_a, "env_data"_a, "env_keys"_a,
           "env_keyed"_a = std::vector<nb::bytes>())
      .def("bind", &bindLaunch, "grid"_a.none(),
           "kernel[grid]: a callable launching on that grid (whose calls report a bad grid)")
      .def("configure", &FastLauncher::configure, "tensor_type"_a, "get_device"_a,
           "get_raw_stream"_a, "descriptor_type"_a = nb::none(),
           "descriptor_type: warpweave.TensorDescriptor, whose instances over CUDA tensors the "
           "fast path then serves")
      .def_prop_ro("configured", &FastLauncher::configured)
      .def("clear", &FastLauncher::clear, "Forgets every remembered kernel.")
      .def_prop_ro("num_kernels", &FastLauncher::size, "Kernels remembered under their keys.");

  m.def(
      "set_launch_hooks", [](bool on) { gLaunchHooks = on; }, "on"_a,
      "While on, every launch takes the Python general path (which calls the launch hooks).");
  m.def("make_subscript", &makeSubscript, "fallback"_a,
        "JITFunction.__getitem__ in C, falling back to `fallback(kernel, grid)`.");
}
