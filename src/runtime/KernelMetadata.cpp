// Reads `wwc --meta` JSON back into a CompiledKernel for AOT launches and the disk cache. The
// project has no JSON dependency and the metadata is small and written by kernelMetadataJson, so
// a compact recursive-descent reader of standard JSON suffices here; since a cache file can hold
// anything, its nesting is bounded (kMaxJsonDepth) and its numbers range-checked, so no input
// can exhaust the stack or convert out of range.
#include "warpweave/runtime.h"

#include <cctype>
#include <climits>
#include <cstdlib>
#include <map>
#include <variant>

namespace ww {

namespace {

struct JsonValue;
using JsonObject = std::map<std::string, JsonValue>;
using JsonArray = std::vector<JsonValue>;

struct JsonValue {
  std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> v;
};

/// Metadata nests three levels (document, params, param); far deeper input is not metadata.
constexpr int kMaxJsonDepth = 64;

class JsonReader {
public:
  explicit JsonReader(const std::string& text) : s_(text) {}

  JsonValue document() {
    JsonValue v = value();
    skipSpace();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("kernel metadata JSON: " + why + " at offset " +
                                std::to_string(pos_));
  }
  void skipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }

  JsonValue value() {
    skipSpace();
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    if (c == '{' || c == '[') {
      if (depth_ >= kMaxJsonDepth)
        fail("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      ++depth_;
      JsonValue v = c == '{' ? JsonValue{object()} : JsonValue{array()};
      --depth_;
      return v;
    }
    if (c == '"') return {string()};
    if (s_.compare(pos_, 4, "true") == 0) {
      pos_ += 4;
      return {true};
    }
    if (s_.compare(pos_, 5, "false") == 0) {
      pos_ += 5;
      return {false};
    }
    if (s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
      return {nullptr};
    }
    return {number()};
  }

  JsonObject object() {
    JsonObject o;
    expect('{');
    if (consume('}')) return o;
    do {
      skipSpace();
      std::string key = string();
      expect(':');
      o[key] = value();
    } while (consume(','));
    expect('}');
    return o;
  }

  JsonArray array() {
    JsonArray a;
    expect('[');
    if (consume(']')) return a;
    do a.push_back(value());
    while (consume(','));
    expect(']');
    return a;
  }

  std::string string() {
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (pos_ + 4 > s_.size()) fail("short \\u escape");
        unsigned code =
            static_cast<unsigned>(std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16));
        pos_ += 4;
        // Metadata names are ASCII; encode anything else as UTF-8 for completeness.
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else if (code < 0x800) {
          out += static_cast<char>(0xC0 | (code >> 6));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          out += static_cast<char>(0xE0 | (code >> 12));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default:
        out += e;
        break; // \" \\ \/
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }

  double number() {
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    double d = std::strtod(begin, &end);
    if (end == begin) fail("unexpected character");
    pos_ += static_cast<size_t>(end - begin);
    return d;
  }

  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0; // objects and arrays open around pos_
};

const JsonValue* field(const JsonObject& o, const std::string& key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : &it->second;
}

std::string stringField(const JsonObject& o, const std::string& key, bool required) {
  const JsonValue* v = field(o, key);
  if (v && std::holds_alternative<std::string>(v->v)) return std::get<std::string>(v->v);
  if (required || v)
    throw std::invalid_argument("kernel metadata JSON: \"" + key + "\" must be a string");
  return {};
}

int intField(const JsonObject& o, const std::string& key, int fallback) {
  const JsonValue* v = field(o, key);
  if (!v) return fallback;
  if (!std::holds_alternative<double>(v->v))
    throw std::invalid_argument("kernel metadata JSON: \"" + key + "\" must be a number");
  const double d = std::get<double>(v->v);
  // In range before the conversion (which is undefined outside it); NaN fails both tests.
  if (!(d >= INT_MIN && d <= INT_MAX) || d != static_cast<double>(static_cast<int>(d)))
    throw std::invalid_argument("kernel metadata JSON: \"" + key + "\" must be an integer " +
                                "that fits in 32 bits");
  return static_cast<int>(d);
}

} // namespace

CompiledKernel parseKernelMetadata(const std::string& json) {
  JsonValue doc = JsonReader(json).document();
  if (!std::holds_alternative<JsonObject>(doc.v))
    throw std::invalid_argument("kernel metadata JSON: the document must be an object");
  const JsonObject& o = std::get<JsonObject>(doc.v);
  CompiledKernel k;
  k.name = stringField(o, "name", true);
  std::string target = stringField(o, "target", false);
  if (!target.empty()) k.target = parseTarget(target);
  k.numWarps = intField(o, "num_warps", 4);
  k.numCtas = intField(o, "num_ctas", 1);
  k.clusterDims = {k.numCtas, 1, 1};
  if (const JsonValue* dims = field(o, "cluster_dims")) {
    const auto* a = std::get_if<JsonArray>(&dims->v);
    bool ok = a && a->size() == 3;
    int64_t product = 1;
    for (size_t i = 0; ok && i < 3; ++i) {
      const auto* d = std::get_if<double>(&(*a)[i].v);
      ok = d && *d >= 1 && *d <= 16 && *d == static_cast<double>(static_cast<int>(*d));
      if (ok) k.clusterDims[i] = static_cast<int>(*d);
      if (ok) product *= k.clusterDims[i];
    }
    if (!ok || product != k.numCtas)
      throw std::invalid_argument("kernel metadata JSON: \"cluster_dims\" must be [x, y, z], "
                                  "each 1 to 16, whose product is num_ctas");
  }
  k.sharedBytes = intField(o, "shared_bytes", 0);
  k.globalScratchBytes = intField(o, "global_scratch_bytes", 0);
  k.registers = intField(o, "registers", 0);
  k.spillBytes = intField(o, "spill_bytes", 0);
  if (const JsonValue* params = field(o, "params")) {
    if (!std::holds_alternative<JsonArray>(params->v))
      throw std::invalid_argument("kernel metadata JSON: \"params\" must be an array");
    for (const JsonValue& pv : std::get<JsonArray>(params->v)) {
      if (!std::holds_alternative<JsonObject>(pv.v))
        throw std::invalid_argument("kernel metadata JSON: each param must be an object");
      const JsonObject& po = std::get<JsonObject>(pv.v);
      KernelParam p;
      p.name = stringField(po, "name", true);
      p.type = stringField(po, "type", true);
      p.sizeBytes = intField(po, "size", 0);
      p.divisibility = intField(po, "divisibility", 1);
      k.params.push_back(std::move(p));
    }
  }
  if (const JsonValue* folded = field(o, "folded")) {
    if (!std::holds_alternative<JsonArray>(folded->v))
      throw std::invalid_argument("kernel metadata JSON: \"folded\" must be an array");
    for (const JsonValue& f : std::get<JsonArray>(folded->v)) {
      if (!std::holds_alternative<std::string>(f.v))
        throw std::invalid_argument("kernel metadata JSON: \"folded\" entries must be strings");
      k.foldedArgs.push_back(std::get<std::string>(f.v));
    }
  }
  if (k.numWarps < 1 || k.numCtas < 1 || k.sharedBytes < 0)
    throw std::invalid_argument("kernel metadata JSON: num_warps and num_ctas must be >= 1 and "
                                "shared_bytes >= 0");
  return k;
}

} // namespace ww
