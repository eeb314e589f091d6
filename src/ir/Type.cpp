#include "ir/Type.h"

#include <cstdint>
#include <functional>
#include <iterator>
#include <sstream>

namespace ww::ir {

namespace {
struct DTypeInfo {
  DType type;
  int bits;
  bool isFloat;
  bool isSigned;
  std::string_view sig;
  std::string_view tl;
  int mantissa = 0; // floats: explicit mantissa bits
  int bias = 0;     // floats: exponent bias
};
constexpr DTypeInfo kDTypes[] = {
    {DType::I1, 1, false, true, "i1", "int1"},
    {DType::I8, 8, false, true, "i8", "int8"},
    {DType::I16, 16, false, true, "i16", "int16"},
    {DType::I32, 32, false, true, "i32", "int32"},
    {DType::I64, 64, false, true, "i64", "int64"},
    {DType::U8, 8, false, false, "u8", "uint8"},
    {DType::U16, 16, false, false, "u16", "uint16"},
    {DType::U32, 32, false, false, "u32", "uint32"},
    {DType::U64, 64, false, false, "u64", "uint64"},
    {DType::F8E4M3, 8, true, true, "fp8e4nv", "float8e4nv", 3, 7},
    {DType::F8E5M2, 8, true, true, "fp8e5", "float8e5", 2, 15},
    {DType::F16, 16, true, true, "fp16", "float16", 10, 15},
    {DType::BF16, 16, true, true, "bf16", "bfloat16", 7, 127},
    {DType::F32, 32, true, true, "fp32", "float32", 23, 127},
    {DType::F64, 64, true, true, "fp64", "float64", 52, 1023},
    {DType::F8E4B15, 8, true, true, "fp8e4b15", "float8e4b15", 3, 15},
    {DType::F8E4B8, 8, true, true, "fp8e4b8", "float8e4b8", 3, 8},
    {DType::F8E5B16, 8, true, true, "fp8e5b16", "float8e5b16", 2, 16},
};
constexpr bool tableFollowsEnum() {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<size_t>(kDTypes[i].type) != i) return false;
  return std::size(kDTypes) == static_cast<size_t>(DType::F8E5B16) + 1;
}
static_assert(tableFollowsEnum(), "kDTypes must list every DType in enum order");
const DTypeInfo& info(DType t) {
  return kDTypes[static_cast<int>(t)];
}
} // namespace

int bitWidth(DType t) {
  return info(t).bits;
}
bool isFloat(DType t) {
  return info(t).isFloat;
}
bool isSigned(DType t) {
  return info(t).isSigned;
}
bool isFp8(DType t) {
  return t == DType::F8E4M3 || t == DType::F8E5M2 || t == DType::F8E4B15 || t == DType::F8E4B8 ||
         t == DType::F8E5B16;
}
int mantissaBits(DType t) {
  return info(t).mantissa;
}
int exponentBias(DType t) {
  return info(t).bias;
}
std::string_view sigName(DType t) {
  return info(t).sig;
}
std::string_view tlName(DType t) {
  return info(t).tl;
}

std::optional<DType> parseSigDType(std::string_view s) {
  for (const auto& d : kDTypes)
    if (d.sig == s) return d.type;
  // Accepted aliases, as Triton signatures spell them.
  if (s == "f16") return DType::F16;
  if (s == "f32") return DType::F32;
  if (s == "f64") return DType::F64;
  if (s == "fp8e4m3") return DType::F8E4M3;
  if (s == "fp8e5m2") return DType::F8E5M2;
  return std::nullopt;
}

std::optional<DType> parseTlDType(std::string_view s) {
  for (const auto& d : kDTypes)
    if (d.tl == s) return d.type;
  if (s == "float8e4m3fn") return DType::F8E4M3;
  if (s == "float8e5m2") return DType::F8E5M2;
  if (s == "float8e4m3fnuz") return DType::F8E4B8;
  if (s == "float8e5m2fnuz") return DType::F8E5B16;
  return std::nullopt;
}

bool sameTmaTile(const std::vector<int64_t>& block, const std::vector<int64_t>& tile) {
  auto trimmed = [](const std::vector<int64_t>& s) {
    size_t first = 0;
    while (first + 1 < s.size() && s[first] == 1) ++first;
    return std::vector<int64_t>(s.begin() + std::ptrdiff_t(first), s.end());
  };
  return trimmed(block) == trimmed(tile);
}

bool isTmemScaleTile(const Type& t) {
  return (t.elem == DType::U8 || t.elem == DType::I8) && t.shape.size() == 2 &&
         (t.shape[0] == 64 || (t.shape[0] > 0 && t.shape[0] % 128 == 0)) && t.shape[1] > 0 &&
         t.shape[1] % 4 == 0;
}

int64_t tmemColumns(const Type& t) {
  if (isTmemScaleTile(t)) return t.shape[0] * t.shape[1] / 128;
  return t.shape.size() == 2 ? t.shape[1] * byteWidth(t.elem) / 4 : 0;
}

int64_t Type::numElements() const {
  // Saturates: an absurd shape (2**40 x 2**40) must compare as too large, never wrap.
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) return 0;
    if (n > INT64_MAX / d) return INT64_MAX;
    n *= d;
  }
  return n;
}

Type Type::withShape(std::vector<int64_t> s) const {
  Type t = *this;
  t.shape = std::move(s);
  return t;
}

Type Type::withElem(DType e) const {
  Type t = *this;
  t.elem = e;
  t.pointer = false;
  return t;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(shape[i]);
  }
  return r + "]";
}

std::string shapeDims(const std::vector<int64_t>& shape) {
  std::string r;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) r += 'x';
    r += std::to_string(shape[i]);
  }
  return r;
}

static void printShape(std::ostringstream& os, const std::vector<int64_t>& shape) {
  os << shapeDims(shape);
}

std::string Type::str() const {
  std::ostringstream os;
  auto elemStr = [&]() {
    if (pointer)
      os << "ptr<" << sigName(elem) << ">";
    else
      os << sigName(elem);
  };
  switch (kind) {
  case TypeKind::None:
    return "none";
  case TypeKind::Value:
    if (shape.empty()) {
      elemStr();
    } else {
      os << "tensor<";
      printShape(os, shape);
      os << "x";
      elemStr();
      os << ">";
    }
    break;
  case TypeKind::Buffer:
    os << "buffer<" << count << "x";
    printShape(os, shape);
    os << "x" << sigName(elem) << (space == MemorySpace::Tmem ? ", tmem>" : ", smem>");
    break;
  case TypeKind::Barrier:
    os << "barrier<" << count << ">";
    break;
  case TypeKind::Descriptor:
    os << "desc<" << sigName(elem) << ", ";
    printShape(os, shape);
    os << ", rank=" << rank << ">";
    break;
  case TypeKind::Token:
    return "token";
  }
  return os.str();
}

size_t Type::hash() const {
  // The binding names every field: a field added to Type stops this compiling until it is hashed.
  const auto& [k, e, p, sh, n, sp, r] = *this;
  size_t h = std::hash<int>()(static_cast<int>(k));
  h = hashCombine(h, static_cast<size_t>(e));
  h = hashCombine(h, p);
  h = hashCombine(h, sh.size());
  for (int64_t d : sh) h = hashCombine(h, std::hash<int64_t>()(d));
  h = hashCombine(h, std::hash<int64_t>()(n));
  h = hashCombine(h, static_cast<size_t>(sp));
  return hashCombine(h, std::hash<int>()(r));
}

} // namespace ww::ir
