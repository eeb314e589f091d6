// Tile IR text -> IR. A recursive-descent reader over characters (types such as `128x64xfp16` do
// not split into tokens well). It follows the printed form's lines where that form needs them: an
// op's operands, attributes, types, regions and location start on the op's line, so an op without
// operands is not confused with the next line's results.
#include "ir/Parser.h"

#include "ir/Builder.h"
#include "ir/Printer.h"

#include <charconv>
#include <unordered_map>

namespace ww::ir {

namespace {

bool isIdentChar(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '_' ||
         u >= 0x80; // Python identifiers may be UTF-8
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

/// A position in the text with its line and column, copied freely for lookahead.
class Cursor {
public:
  Cursor(std::string_view text, uint32_t file) : text_(text), file_(file) {}

  SourceLoc loc() const { return {file_, line_, col_}; }
  bool eof() const { return pos_ >= text_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < text_.size() ? text_[pos_ + k] : '\0'; }
  bool startsWith(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }

  void advance(size_t n = 1) {
    for (; n && pos_ < text_.size(); --n, ++pos_) {
      if (text_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }

  /// Skips blanks within the line.
  void skipBlanks() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\r') advance();
  }
  /// Skips blanks, line ends and `//` comments (lit's RUN and CHECK lines among them).
  void skipSpace() {
    for (;;) {
      skipBlanks();
      if (peek() == '\n') {
        advance();
      } else if (peek() == '/' && peek(1) == '/') {
        while (!eof() && peek() != '\n') advance();
      } else {
        return;
      }
    }
  }
  bool atLineEnd() {
    skipBlanks();
    return eof() || peek() == '\n' || (peek() == '/' && peek(1) == '/');
  }
  bool consume(char c) {
    skipBlanks();
    if (peek() != c) return false;
    advance();
    return true;
  }
  std::string_view identifier() {
    skipBlanks();
    size_t begin = pos_;
    while (isIdentChar(peek())) advance();
    return text_.substr(begin, pos_ - begin);
  }
  /// The text from here to the end of the line, shortened, for error messages.
  std::string rest() const {
    size_t end = text_.find('\n', pos_);
    std::string s(text_.substr(pos_, end == std::string_view::npos ? end : end - pos_));
    if (s.size() > 24) s = s.substr(0, 24) + "...";
    return s;
  }

private:
  std::string_view text_;
  uint32_t file_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

[[noreturn]] void fail(SourceLoc at, std::string message) {
  raiseError(at, std::move(message));
}

std::string found(const Cursor& c) {
  if (c.eof()) return "the end of the text";
  std::string r = c.rest();
  return r.empty() ? "the end of the line" : "'" + r + "'";
}

void expect(Cursor& c, char ch, const std::string& what) {
  if (!c.consume(ch))
    fail(c.loc(), std::string("expected '") + ch + "' " + what + ", found " + found(c));
}

int64_t parseInt(Cursor& c, const std::string& what) {
  c.skipBlanks();
  SourceLoc at = c.loc();
  std::string digits;
  if (c.peek() == '-') {
    digits += '-';
    c.advance();
  }
  while (isDigit(c.peek())) {
    digits += c.peek();
    c.advance();
  }
  int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || digits == "-" || ec != std::errc() || end != digits.data() + digits.size())
    fail(at, "expected " + what + " (an integer), found " + found(c));
  return v;
}

int positiveInt(Cursor& c, const std::string& what) {
  SourceLoc at = c.loc();
  int64_t v = parseInt(c, what);
  if (v < 1 || v > (1 << 20))
    fail(at, what + " must be a positive integer, got " + std::to_string(v));
  return static_cast<int>(v);
}

std::string parseString(Cursor& c) {
  c.skipBlanks();
  SourceLoc open = c.loc();
  if (c.peek() != '"') fail(open, "expected a string in double quotes, found " + found(c));
  c.advance();
  std::string s;
  for (;;) {
    char ch = c.peek();
    if (c.eof() || ch == '\n') fail(open, "string is not closed (missing '\"')");
    c.advance();
    if (ch == '"') return s;
    if (ch != '\\') {
      s += ch;
      continue;
    }
    SourceLoc esc = c.loc();
    char e = c.peek();
    c.advance();
    if (e == 'n') {
      s += '\n';
    } else if (e == 't') {
      s += '\t';
    } else if (e == '"' || e == '\\') {
      s += e;
    } else if (e == 'x') {
      int v = 0;
      for (int i = 0; i < 2; ++i) {
        char h = c.peek();
        int d = isDigit(h)               ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) fail(esc, "'\\x' takes two hex digits");
        v = v * 16 + d;
        c.advance();
      }
      s += static_cast<char>(v);
    } else {
      fail(esc, std::string("unknown escape '\\") + e + "' (accepted: \\n \\t \\\" \\\\ \\xHH)");
    }
  }
}

DType parseDType(Cursor& c) {
  SourceLoc at = c.loc();
  std::string_view w = c.identifier();
  if (auto d = parseSigDType(w)) return *d;
  fail(at, "expected an element type (i1 i8 i16 i32 i64 u8 ... fp8e4nv fp8e5 fp16 bf16 fp32 fp64), "
           "found " +
               (w.empty() ? found(c) : "'" + std::string(w) + "'"));
}

/// Integers separated by 'x' (`128x64`), as shapes print. With `trailingX` each is followed by an
/// 'x' (`128x64xfp16`: the element type comes next) and the list may be empty.
std::vector<int64_t> parseDims(Cursor& c, bool trailingX) {
  std::vector<int64_t> dims;
  c.skipBlanks();
  while (isDigit(c.peek())) {
    SourceLoc at = c.loc();
    int64_t d = parseInt(c, "a dimension");
    if (d < 0) fail(at, "dimensions are not negative");
    dims.push_back(d);
    if (c.peek() == 'x') {
      c.advance();
      if (!trailingX && !isDigit(c.peek())) fail(c.loc(), "expected a dimension after 'x'");
    } else if (trailingX) {
      fail(c.loc(), "expected 'x' after dimension " + std::to_string(d));
    } else {
      break;
    }
  }
  return dims;
}

Type parseTypeAt(Cursor& c) {
  c.skipBlanks();
  SourceLoc at = c.loc();
  std::string_view w = c.identifier();
  if (w == "none") return Type::none();
  if (w == "token") return Type::token();
  auto open = [&] { expect(c, '<', "after '" + std::string(w) + "'"); };
  auto close = [&] { expect(c, '>', "to close '" + std::string(w) + "<'"); };
  if (w == "ptr") {
    open();
    DType d = parseDType(c);
    close();
    return Type::ptr(d);
  }
  if (w == "tensor") {
    open();
    std::vector<int64_t> shape = parseDims(c, true);
    if (shape.empty()) fail(c.loc(), "a tensor type needs a shape (tensor<128xfp32>)");
    Cursor elem = c;
    Type t;
    if (c.identifier() == "ptr") {
      expect(c, '<', "after 'ptr'");
      t = Type::ptrTensor(parseDType(c), shape);
      expect(c, '>', "to close 'ptr<'");
    } else {
      c = elem; // not a pointer: read it again as an element type
      t = Type::tensor(parseDType(c), shape);
    }
    close();
    return t;
  }
  if (w == "buffer") {
    open();
    std::vector<int64_t> dims = parseDims(c, true);
    if (dims.empty())
      fail(c.loc(), "a buffer type starts with its count (buffer<2x64x64xfp16, smem>)");
    if (dims.size() == 1 && c.peek() == 'x') c.advance(); // no tile shape: `buffer<2xxfp16, smem>`
    DType d = parseDType(c);
    expect(c, ',', "before the buffer's memory space");
    SourceLoc spaceAt = c.loc();
    std::string_view space = c.identifier();
    if (space != "smem" && space != "tmem")
      fail(spaceAt, "expected the memory space 'smem' or 'tmem', found " + found(c));
    close();
    return Type::buffer(d, std::vector<int64_t>(dims.begin() + 1, dims.end()), dims[0],
                        space == "tmem" ? MemorySpace::Tmem : MemorySpace::Shared);
  }
  if (w == "barrier") {
    open();
    int64_t n = parseInt(c, "the barrier count");
    close();
    return Type::barrier(n);
  }
  if (w == "desc") {
    open();
    DType d = parseDType(c);
    expect(c, ',', "after the descriptor's element type");
    std::vector<int64_t> block = parseDims(c, false);
    expect(c, ',', "after the descriptor's block shape");
    SourceLoc rankAt = c.loc();
    if (c.identifier() != "rank") fail(rankAt, "expected 'rank=N', found " + found(c));
    expect(c, '=', "after 'rank'");
    int64_t rank = parseInt(c, "the descriptor's rank");
    close();
    return Type::descriptor(d, block, static_cast<int>(rank));
  }
  if (auto d = parseSigDType(w)) return Type::scalar(*d);
  fail(at, "expected a type (i32, fp16, ptr<..>, tensor<..>, buffer<..>, barrier<N>, desc<..>, "
           "token), found " +
               (w.empty() ? found(c) : "'" + std::string(w) + "'"));
}

/// `%12_offsets` -> `offsets`; `%3` -> ``; `%x` (hand-written) -> `x`.
std::string valueName(std::string_view ref) {
  size_t i = 0;
  while (i < ref.size() && isDigit(ref[i])) ++i;
  if (i == 0) return std::string(ref);
  if (i == ref.size()) return {};
  if (ref[i] == '_') return std::string(ref.substr(i + 1));
  return std::string(ref);
}

class IRParser {
public:
  IRParser(SourceManager& sm, uint32_t file) : sm_(sm), c_(sm.text(file), file) {}

  Module parseModule() {
    Module m;
    m.sources = &sm_;
    c_.skipSpace();
    if (c_.eof()) fail(c_.loc(), "no kernel in this text (expected 'kernel @NAME(...)')");
    while (!c_.eof()) {
      m.functions.push_back(parseKernel());
      c_.skipSpace();
    }
    return m;
  }

private:
  struct Ref {
    std::string text; // without '%'
    SourceLoc loc;
  };

  Ref parseRef() {
    c_.skipBlanks();
    SourceLoc at = c_.loc();
    if (c_.peek() != '%') fail(at, "expected a value ('%name'), found " + found(c_));
    c_.advance();
    std::string_view id = c_.identifier();
    if (id.empty()) fail(at, "expected a value name after '%'");
    return {std::string(id), at};
  }

  void define(const Ref& r, Value* v) {
    auto [it, fresh] = defined_.emplace(r.text, r.loc);
    if (!fresh)
      fail(r.loc, "value '%" + r.text + "' is defined twice (first at line " +
                      std::to_string(it->second.line) + ")");
    scopes_.back()[r.text] = v;
  }

  Value* lookup(const Ref& r) {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      if (auto it = s->find(r.text); it != s->end()) return it->second;
    if (auto it = defined_.find(r.text); it != defined_.end())
      fail(r.loc, "value '%" + r.text + "' (defined at line " + std::to_string(it->second.line) +
                      ") is not visible here: its region has ended");
    fail(r.loc, "use of undefined value '%" + r.text + "'");
  }

  SourceLoc parseLoc() {
    c_.advance(4); // loc(
    Cursor open = c_;
    if (c_.identifier() == "unknown") { // an op made without a location
      expect(c_, ')', "to close 'loc(unknown'");
      return {};
    }
    c_ = open;
    std::string path = parseString(c_);
    expect(c_, ':', "after the file of a location");
    auto line = static_cast<uint32_t>(positiveInt(c_, "a line number"));
    expect(c_, ':', "after the line of a location");
    auto col = static_cast<uint32_t>(positiveInt(c_, "a column number"));
    expect(c_, ')', "to close 'loc('");
    for (uint32_t f = 0; f < sm_.numFiles(); ++f)
      if (sm_.path(f) == path) return {f, line, col};
    return {sm_.addFile(path, ""), line, col};
  }

  bool atLoc() {
    c_.skipBlanks();
    return c_.startsWith("loc(");
  }

  std::unique_ptr<Function> parseKernel() {
    SourceLoc at = c_.loc();
    if (c_.identifier() != "kernel") fail(at, "expected 'kernel @NAME(...)', found " + found(c_));
    auto fn = std::make_unique<Function>();
    fn->loc = at;
    expect(c_, '@', "before the kernel's name");
    fn->name = std::string(c_.identifier());
    if (fn->name.empty()) fail(c_.loc(), "expected the kernel's name after '@'");
    scopes_.assign(1, {});
    defined_.clear();
    expect(c_, '(', "to open the kernel's parameters");
    if (!c_.consume(')')) {
      do parseKernelArg(*fn);
      while (c_.consume(','));
      expect(c_, ')', "to close the kernel's parameters");
    }
    bool clusterDimsGiven = false;
    for (;;) {
      c_.skipBlanks();
      if (c_.peek() == '{' || c_.atLineEnd()) break;
      if (atLoc()) {
        fn->loc = parseLoc();
        continue;
      }
      SourceLoc keyAt = c_.loc();
      std::string key(c_.identifier());
      if (key == "cluster_dims") {
        expect(c_, '=', "after 'cluster_dims'");
        for (int i = 0; i < 3; ++i) {
          if (i) expect(c_, 'x', "between cluster_dims' sizes (XxYxZ)");
          fn->clusterDims[size_t(i)] = positiveInt(c_, "a cluster dimension");
        }
        clusterDimsGiven = true;
        continue;
      }
      if (key != "num_warps" && key != "num_ctas" && key != "num_stages")
        fail(keyAt, "expected num_warps=N, num_ctas=N, num_stages=N, cluster_dims=XxYxZ or '{', "
                    "found " +
                        found(c_));
      expect(c_, '=', "after '" + key + "'");
      int v = positiveInt(c_, key);
      (key == "num_warps" ? fn->numWarps : key == "num_ctas" ? fn->numCtas : fn->numStages) = v;
    }
    if (clusterDimsGiven) {
      int64_t ctas = int64_t(fn->clusterDims[0]) * fn->clusterDims[1] * fn->clusterDims[2];
      if (ctas > (1 << 20)) fail(at, "cluster_dims: at most 2**20 CTAs a cluster");
      fn->numCtas = static_cast<int>(ctas);
    } else
      fn->clusterDims = {fn->numCtas, 1, 1};
    SourceLoc open = c_.loc();
    expect(c_, '{', "to open the kernel's body");
    if (!c_.atLineEnd()) fail(c_.loc(), "expected a line end after '{', found " + found(c_));
    parseOps(fn->body, 0);
    if (c_.eof()) fail(open, "the body of kernel '" + fn->name + "' is not closed ('}' missing)");
    c_.advance();
    if (!c_.atLineEnd()) fail(c_.loc(), "unexpected text after the kernel: " + found(c_));
    return fn;
  }

  void parseKernelArg(Function& fn) {
    KernelArg arg;
    c_.skipBlanks();
    std::optional<Ref> ref;
    if (c_.peek() == '<') {
      c_.advance();
      SourceLoc w = c_.loc();
      if (c_.identifier() != "folded") fail(w, "expected '<folded NAME>', found " + found(c_));
      arg.name = std::string(c_.identifier());
      if (arg.name.empty()) fail(c_.loc(), "expected the folded parameter's name");
      expect(c_, '>', "to close '<folded'");
    } else {
      ref = parseRef();
      arg.name = valueName(ref->text);
    }
    expect(c_, ':', "before the parameter's type");
    arg.type = parseTypeAt(c_);
    while (c_.consume('{')) {
      c_.skipBlanks();
      SourceLoc keyAt = c_.loc();
      if (c_.startsWith("==")) {
        c_.advance(2);
        if (parseInt(c_, "1 after '=='") != 1) fail(keyAt, "only '{==1}' is accepted");
        arg.equalsOne = true;
      } else if (c_.identifier() == "div") {
        expect(c_, '=', "after 'div'");
        arg.divisibility = positiveInt(c_, "the divisibility");
      } else {
        fail(keyAt, "expected '{div=N}' or '{==1}', found " + found(c_));
      }
      expect(c_, '}', "to close the parameter's attribute");
    }
    if (ref) {
      arg.value = fn.body.addArg(arg.type, arg.name);
      define(*ref, arg.value);
    }
    fn.args.push_back(std::move(arg));
  }

  /// Ops up to the `}` closing the block (left unread) or the end of the text.
  void parseOps(Block& block, int depth) {
    for (;;) {
      c_.skipSpace();
      if (c_.eof() || c_.peek() == '}') return;
      parseOp(block, depth);
    }
  }

  bool atAttrDict() {
    c_.skipBlanks();
    if (c_.peek() != '{') return false;
    Cursor look = c_;
    look.advance();
    look.skipBlanks();
    if (look.identifier().empty()) return false;
    look.skipBlanks();
    return look.peek() == '=';
  }

  Attr parseAttrValue() {
    c_.skipBlanks();
    SourceLoc at = c_.loc();
    if (c_.peek() == '"') return parseString(c_);
    if (c_.peek() == '[') {
      c_.advance();
      std::vector<int64_t> v;
      if (!c_.consume(']')) {
        do v.push_back(parseInt(c_, "a list element"));
        while (c_.consume(','));
        expect(c_, ']', "to close the list");
      }
      return v;
    }
    // A number: ints print without '.', floats always with '.', an exponent, nan or inf.
    std::string tok;
    while (isIdentChar(c_.peek()) || c_.peek() == '.' ||
           ((c_.peek() == '-' || c_.peek() == '+') &&
            (tok.empty() || tok.back() == 'e' || tok.back() == 'E'))) {
      tok += c_.peek();
      c_.advance();
    }
    const char* b = tok.data();
    const char* e = b + tok.size();
    bool integral = !tok.empty() && tok != "-" &&
                    tok.find_first_not_of("0123456789", tok[0] == '-' ? 1 : 0) == std::string::npos;
    if (integral) {
      int64_t i = 0;
      auto [end, ec] = std::from_chars(b, e, i);
      if (ec == std::errc() && end == e) return i;
    } else if (!tok.empty()) {
      double d = 0;
      auto [end, ec] = std::from_chars(b, e, d);
      if (ec == std::errc() && end == e) return d;
    }
    fail(at, "expected an attribute value (integer, float, \"string\" or [integers]), found " +
                 (tok.empty() ? found(c_) : "'" + tok + "'"));
  }

  void parseOp(Block& block, int depth) {
    SourceLoc at = c_.loc();
    std::vector<Ref> results;
    if (c_.peek() == '%') {
      do results.push_back(parseRef());
      while (c_.consume(','));
      expect(c_, '=', "after the op's results");
    }
    c_.skipBlanks();
    SourceLoc nameAt = c_.loc();
    std::string name(c_.identifier());
    if (name.empty()) fail(nameAt, "expected an op, found " + found(c_));
    std::optional<OpCode> code = opCodeByName(name);
    if (!code) fail(nameAt, "unknown op '" + name + "' (Ops.def lists the ops)");
    if (results.empty()) at = nameAt;

    std::vector<Value*> operands;
    c_.skipBlanks();
    if (c_.peek() == '%') {
      do operands.push_back(lookup(parseRef()));
      while (c_.consume(','));
    }
    std::vector<NamedAttr> attrs;
    if (atAttrDict()) {
      c_.advance();
      do {
        c_.skipBlanks();
        SourceLoc keyAt = c_.loc();
        std::string key(c_.identifier());
        if (key.empty()) fail(keyAt, "expected an attribute name, found " + found(c_));
        for (const NamedAttr& a : attrs)
          if (a.name == key) fail(keyAt, "attribute '" + key + "' is given twice");
        expect(c_, '=', "after attribute '" + key + "'");
        attrs.push_back({key, parseAttrValue()});
      } while (c_.consume(','));
      expect(c_, '}', "to close the attributes of '" + name + "'");
    }
    std::vector<Type> types;
    c_.skipBlanks();
    SourceLoc typesAt = c_.loc();
    if (c_.consume(':')) {
      do types.push_back(parseTypeAt(c_));
      while (c_.consume(','));
    }
    if (types.size() != results.size())
      fail(results.empty() ? typesAt : results.front().loc,
           "'" + name + "' has " + std::to_string(results.size()) + " result(s) but " +
               std::to_string(types.size()) + " result type(s) after ':'");

    Builder b(&block);
    b.setLoc(at);
    Op* op = b.create(*code, std::move(operands), std::move(types), std::move(attrs));
    for (size_t i = 0; i < results.size(); ++i) op->result(i)->name = valueName(results[i].text);

    c_.skipBlanks();
    while (c_.peek() == '{') {
      parseRegion(*op, depth + 1);
      c_.skipBlanks();
    }
    if (atLoc()) op->setLoc(parseLoc());
    if (!c_.atLineEnd())
      fail(c_.loc(), "unexpected " + found(c_) + " after op '" + name +
                         "' (an op is: results = name operands {attributes} : types {regions})");
    for (size_t i = 0; i < results.size(); ++i) define(results[i], op->result(i));
  }

  void parseRegion(Op& op, int depth) {
    SourceLoc open = c_.loc();
    // Deep enough for any kernel; bounds the recursion on malformed text.
    if (depth > 200) fail(open, "regions nest deeper than 200");
    c_.advance();
    Block* region = op.addRegion();
    scopes_.emplace_back();
    c_.skipBlanks();
    if (c_.peek() == '^') {
      c_.advance();
      expect(c_, '(', "after '^' (region arguments: ^(%a: i32, ...))");
      if (!c_.consume(')')) {
        do {
          Ref r = parseRef();
          expect(c_, ':', "before the region argument's type");
          Type t = parseTypeAt(c_);
          define(r, region->addArg(t, valueName(r.text)));
        } while (c_.consume(','));
        expect(c_, ')', "to close the region arguments");
      }
    }
    if (!c_.atLineEnd())
      fail(c_.loc(), "expected a line end after the region's '{', found " + found(c_));
    parseOps(*region, depth);
    if (c_.eof())
      fail(open, std::string("region of '") + op.name() + "' is not closed ('}' missing)");
    c_.advance();
    scopes_.pop_back();
  }

  SourceManager& sm_;
  Cursor c_;
  std::vector<std::unordered_map<std::string, Value*>> scopes_;
  std::unordered_map<std::string, SourceLoc> defined_; // every value of the kernel so far
};

} // namespace

std::optional<OpCode> opCodeByName(std::string_view name) {
  static const std::unordered_map<std::string_view, OpCode> byName = [] {
    std::unordered_map<std::string_view, OpCode> m;
#define OP(id, str, traits) m.emplace(str, OpCode::id);
#include "ir/Ops.def"
#undef OP
    return m;
  }();
  auto it = byName.find(name);
  if (it == byName.end()) return std::nullopt;
  return it->second;
}

Module parseModule(SourceManager& sources, uint32_t file) {
  return IRParser(sources, file).parseModule();
}

std::unique_ptr<Function> parseFunction(SourceManager& sources, uint32_t file) {
  Module m = parseModule(sources, file);
  if (m.functions.size() != 1)
    fail(m.functions[1]->loc,
         "expected one kernel in this text, found " + std::to_string(m.functions.size()));
  return std::move(m.functions.front());
}

std::optional<Type> parseType(std::string_view text) {
  Cursor c(text, 0);
  try {
    Type t = parseTypeAt(c);
    c.skipBlanks();
    if (c.eof()) return t;
  } catch (const CompileError&) {
  }
  return std::nullopt;
}

} // namespace ww::ir
