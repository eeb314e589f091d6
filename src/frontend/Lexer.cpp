#include "frontend/Lexer.h"

#include "frontend/Utf8.h"

#include <array>
#include <charconv>

namespace ww::frontend {

namespace {

// CPython refuses deeper nesting too; the limit keeps the parser's recursion bounded.
constexpr size_t kMaxIndentLevels = 100;
constexpr size_t kMaxBracketDepth = 200;
// Kernel files are kilobytes; a mangled or generated file of hundreds of megabytes would take the
// front end minutes and gigabytes before any error.
constexpr size_t kMaxSourceBytes = size_t(16) << 20;

bool isIdentStart(unsigned char c) {
  // Bytes >= 0x80 belong to UTF-8 encoded non-ASCII identifiers, which Python accepts.
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
bool isIdentChar(unsigned char c) {
  return isIdentStart(c) || (c >= '0' && c <= '9');
}
bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

int digitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

/// Whether a non-ASCII code point may appear in an identifier (`start`: begin one). Python's rule
/// is Unicode's XID_Start / XID_Continue; this approximation refuses what is plainly not a letter
/// or digit (controls, spaces, punctuation, symbols, arrows, emoji, private use, specials) and
/// accepts the scripts' letters and marks.
bool isUnicodeIdentChar(uint32_t cp, bool start) {
  auto in = [cp](uint32_t lo, uint32_t hi) { return cp >= lo && cp <= hi; };
  if (in(0x80, 0xBF)) // C1 controls and Latin-1 punctuation: only ª µ º, and · inside a name
    return cp == 0xAA || cp == 0xB5 || cp == 0xBA || (!start && cp == 0xB7);
  if (cp == 0xD7 || cp == 0xF7) return false;  // × ÷
  if (start && in(0x300, 0x36F)) return false; // combining marks continue a name only
  if (in(0x2000, 0x206F)) // general punctuation: zero-width joiners continue, ‿ ⁀ ⁔ connect
    return (!start && (cp == 0x200C || cp == 0x200D)) || cp == 0x203F || cp == 0x2040 ||
           cp == 0x2054;
  if (in(0x20A0, 0x20FF)) return !start && in(0x20D0, 0x20FF); // currency; combining marks
  if (in(0x2190, 0x2BFF) || in(0x2E00, 0x2E7F) || in(0x3000, 0x3004) || in(0x3008, 0x3020) ||
      in(0xE000, 0xF8FF) || in(0xFE10, 0xFE1F) || in(0xFE50, 0xFE6F) || in(0xFFF0, 0xFFFF) ||
      in(0x1F000, 0x1FAFF) || in(0xE0000, 0xE007F) || in(0xF0000, 0x10FFFF) || cp == 0xFEFF)
    return false;
  if (in(0xFE30, 0xFE4F)) return cp == 0xFE33 || cp == 0xFE34 || in(0xFE4D, 0xFE4F);
  if (in(0xFF01, 0xFF0F) || in(0xFF1A, 0xFF20) || in(0xFF3B, 0xFF3E) || cp == 0xFF40 ||
      in(0xFF5B, 0xFF65))
    return false;
  return true;
}

std::string codePointName(uint32_t cp) {
  static const char* hex = "0123456789ABCDEF";
  std::string digits;
  for (int shift = cp > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4) digits += hex[(cp >> shift) & 15];
  return "U+" + digits;
}

std::string quoteChar(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  static const char* hex = "0123456789abcdef";
  return std::string("'\\x") + hex[c >> 4] + hex[c & 15] + "'";
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Longest operators first so that maximal munch is a linear scan.
constexpr std::array<std::string_view, 49> kOperators = {
    "**=", "//=", ">>=", "<<=", "...", "**", "//", "<<", ">>", "<=", ">=", "==", "!=",
    "->",  ":=",  "+=",  "-=",  "*=",  "/=", "%=", "&=", "|=", "^=", "@=", "+",  "-",
    "*",   "/",   "%",   "@",   "&",   "|",  "^",  "~",  "<",  ">",  "(",  ")",  "[",
    "]",   "{",   "}",   ",",   ":",   ".",  ";",  "=",  "!",  "`"};

class Lexer {
public:
  Lexer(const SourceManager& sm, uint32_t file) : file_(file), src_(sm.text(file)) {}

  std::vector<Token> run() {
    indents_.push_back({0, 0});
    // A UTF-8 byte order mark, as some editors write, is not part of the first line's text.
    if (src_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = lineStart_ = 3;
    checkEncoding();
    tokens_.reserve(src_.size() / 4 + 16); // about one token per four bytes of Python
    while (true) {
      if (atLineStart_ && brackets_.empty()) {
        if (!handleIndentation()) continue; // blank or comment-only line
      }
      skipSpaces();
      if (pos_ >= src_.size()) break;
      char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
        continue;
      }
      if (c == '\\') {
        lexContinuation();
        continue;
      }
      if (c == '\n') {
        if (brackets_.empty()) emit(TokenKind::Newline, "\n", here());
        newline();
        continue;
      }
      lexToken();
    }
    finish();
    return std::move(tokens_);
  }

private:
  struct IndentLevel {
    uint32_t width8; // tabs to multiples of 8
    uint32_t width1; // tabs count as one column: both orders must agree (CPython's TabError)
  };
  struct OpenBracket {
    char ch;
    SourceLoc loc;
  };

  /// Python decodes the whole file before tokenizing: a NUL byte or bytes that are not UTF-8 are
  /// errors wherever they are, comments and strings included.
  void checkEncoding() const {
    if (src_.size() > kMaxSourceBytes)
      raiseError(SourceLoc{file_, 1, 1}, "this file has " + std::to_string(src_.size()) +
                                             " bytes; a source file may have at most " +
                                             std::to_string(kMaxSourceBytes) + " (16 MiB)");
    uint32_t line = 1;
    size_t lineStart = pos_;
    for (size_t p = pos_; p < src_.size();) {
      unsigned char c = static_cast<unsigned char>(src_[p]);
      SourceLoc loc{file_, line, static_cast<uint32_t>(p - lineStart + 1)};
      if (c == 0) raiseError(loc, "source code cannot contain null bytes");
      if (c == '\n') {
        ++line;
        lineStart = ++p;
        continue;
      }
      if (c < 0x80) {
        ++p;
        continue;
      }
      uint32_t cp = 0;
      size_t n = decodeUtf8(src_, p, cp);
      if (n == 0)
        raiseError(loc, "invalid UTF-8: byte " + quoteChar(c) +
                            " does not start a well-formed sequence (source files are UTF-8)");
      p += n;
    }
  }

  SourceLoc here() const { return locAt(pos_); }
  SourceLoc locAt(size_t p) const {
    return SourceLoc{file_, line_, static_cast<uint32_t>(p - lineStart_ + 1)};
  }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  void newline() {
    ++pos_;
    ++line_;
    lineStart_ = pos_;
    atLineStart_ = brackets_.empty(); // inside brackets physical lines join
  }

  Token& emit(TokenKind kind, std::string text, SourceLoc loc) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.loc = loc;
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void skipSpaces() {
    while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\f'))
      ++pos_;
  }

  // Measures the indentation of a new logical line and emits INDENT/DEDENT. Returns false (having
  // consumed the line) when the line is blank or holds only a comment: those do not count.
  bool handleIndentation() {
    uint32_t width8 = 0, width1 = 0;
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ') {
        ++width8;
        ++width1;
      } else if (c == '\t') {
        width8 = (width8 / 8 + 1) * 8;
        ++width1;
      } else if (c == '\f') {
        width8 = width1 = 0;
      } else {
        break;
      }
      ++pos_;
    }
    if (pos_ >= src_.size()) return true; // end of file: finish() closes the blocks
    char c = src_[pos_];
    if (c == '#' || c == '\n') {
      while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      if (pos_ < src_.size()) newline();
      return false;
    }
    if (c == '\\' && peek(1) == '\n') {
      // A continuation right after the indentation joins with the next physical line.
      atLineStart_ = false;
      pendingIndent_ = {width8, width1};
      hasPendingIndent_ = true;
      return true;
    }
    atLineStart_ = false;
    applyIndent({width8, width1}, here());
    return true;
  }

  void applyIndent(IndentLevel level, SourceLoc loc) {
    const IndentLevel& top = indents_.back();
    if (level.width8 == top.width8) {
      if (level.width1 != top.width1) inconsistentTabs(loc);
      return;
    }
    if (level.width8 > top.width8) {
      if (level.width1 <= top.width1) inconsistentTabs(loc);
      if (indents_.size() > kMaxIndentLevels)
        raiseError(loc, "too many levels of indentation (the limit is 100)");
      indents_.push_back(level);
      emit(TokenKind::Indent, "", loc);
      return;
    }
    while (indents_.size() > 1 && level.width8 < indents_.back().width8) {
      indents_.pop_back();
      emit(TokenKind::Dedent, "", loc);
    }
    if (level.width8 != indents_.back().width8)
      raiseError(loc, "unindent does not match any outer indentation level");
    if (level.width1 != indents_.back().width1) inconsistentTabs(loc);
  }

  [[noreturn]] void inconsistentTabs(SourceLoc loc) {
    raiseError(loc, "inconsistent use of tabs and spaces in indentation");
  }

  void lexContinuation() {
    SourceLoc loc = here();
    ++pos_;
    if (pos_ >= src_.size())
      raiseError(loc, "unexpected end of file after line continuation character '\\'");
    if (src_[pos_] != '\n')
      raiseError(loc, "unexpected character after line continuation character '\\'");
    newline();
    atLineStart_ = false; // the logical line goes on
    skipSpaces();
    if (hasPendingIndent_ && pos_ < src_.size() && src_[pos_] != '\n' && src_[pos_] != '#') {
      hasPendingIndent_ = false;
      applyIndent(pendingIndent_, here());
    }
  }

  void finish() {
    if (!brackets_.empty()) {
      const OpenBracket& open = brackets_.back();
      raiseError(open.loc, std::string("'") + open.ch + "' was never closed");
    }
    SourceLoc end = here();
    if (!tokens_.empty() && tokens_.back().kind != TokenKind::Newline &&
        tokens_.back().kind != TokenKind::Dedent && tokens_.back().kind != TokenKind::Indent)
      emit(TokenKind::Newline, "", end);
    while (indents_.size() > 1) {
      indents_.pop_back();
      emit(TokenKind::Dedent, "", end);
    }
    emit(TokenKind::EndOfFile, "", end);
  }

  void lexToken() {
    if (hasPendingIndent_) {
      hasPendingIndent_ = false;
      applyIndent(pendingIndent_, here());
    }
    unsigned char c = static_cast<unsigned char>(src_[pos_]);
    if (c >= 0x80) {
      uint32_t cp = 0;
      decodeUtf8(src_, pos_, cp); // checkEncoding() made sure it decodes
      if (!isUnicodeIdentChar(cp, true)) invalidCharacter(cp);
    }
    if (isIdentStart(c)) {
      size_t begin = pos_;
      while (pos_ < src_.size()) {
        unsigned char ch = static_cast<unsigned char>(src_[pos_]);
        if (ch < 0x80) {
          if (!isIdentChar(ch)) break;
          ++pos_;
          continue;
        }
        uint32_t cp = 0;
        size_t n = decodeUtf8(src_, pos_, cp);
        if (!isUnicodeIdentChar(cp, false)) break; // the next token reports it
        pos_ += n;
      }
      std::string word(src_.substr(begin, pos_ - begin));
      if (pos_ < src_.size() && (src_[pos_] == '\'' || src_[pos_] == '"') && isStringPrefix(word)) {
        lexString(begin, word);
        return;
      }
      TokenKind kind = isPythonKeyword(word) ? TokenKind::Keyword : TokenKind::Name;
      emit(kind, std::move(word), locAt(begin));
      return;
    }
    if (isDigit(static_cast<char>(c)) || (c == '.' && isDigit(peek(1)))) {
      lexNumber();
      return;
    }
    if (c == '\'' || c == '"') {
      lexString(pos_, "");
      return;
    }
    for (std::string_view op : kOperators) {
      size_t n = op.size();
      if (op[0] != static_cast<char>(c) || src_.compare(pos_, n, op) != 0) continue;
      SourceLoc loc = here();
      if (n == 1 && op[0] == '!')
        raiseError(loc, "invalid character '!' in source; use 'not' for negation and '!=' for "
                        "inequality");
      if (n == 1 && op[0] == '`') raiseError(loc, "invalid character '`' in source");
      pos_ += n;
      trackBracket(op[0], n, loc);
      emit(TokenKind::Op, std::string(op), loc);
      return;
    }
    raiseError(here(), "invalid character " + quoteChar(c) + " in source");
  }

  [[noreturn]] void invalidCharacter(uint32_t cp) {
    bool printable =
        !(cp <= 0xA0 || cp == 0xAD || (cp >= 0x2000 && cp <= 0x200F) ||
          (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF ||
          cp == 0x3000 || (cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000 ||
          (cp >= 0xFFF0 && cp <= 0xFFFF) || (cp >= 0xE0000 && cp <= 0xE007F));
    if (!printable) raiseError(here(), "invalid non-printable character " + codePointName(cp));
    uint32_t ignored = 0;
    size_t n = decodeUtf8(src_, pos_, ignored);
    raiseError(here(), "invalid character '" + std::string(src_.substr(pos_, n)) + "' (" +
                           codePointName(cp) + ")");
  }

  void trackBracket(char ch, size_t len, SourceLoc loc) {
    if (len != 1) return;
    if (ch == '(' || ch == '[' || ch == '{') {
      if (brackets_.size() >= kMaxBracketDepth)
        raiseError(loc, "too many nested brackets (the limit is 200)");
      brackets_.push_back({ch, loc});
      return;
    }
    if (ch != ')' && ch != ']' && ch != '}') return;
    if (brackets_.empty()) raiseError(loc, std::string("unmatched '") + ch + "'");
    OpenBracket open = brackets_.back();
    char expected = open.ch == '(' ? ')' : open.ch == '[' ? ']' : '}';
    if (ch != expected)
      raiseError(loc, std::string("closing '") + ch + "' does not match opening '" + open.ch + "'",
                 {note(open.loc, std::string("'") + open.ch + "' opened here")});
    brackets_.pop_back();
  }

  static bool isStringPrefix(const std::string& w) {
    if (w.size() > 2) return false;
    bool r = false, b = false, f = false, u = false;
    for (char ch : w) {
      char l = static_cast<char>(ch | 0x20);
      if (l == 'r' && !r)
        r = true;
      else if (l == 'b' && !b)
        b = true;
      else if (l == 'f' && !f)
        f = true;
      else if (l == 'u' && !u)
        u = true;
      else
        return false;
    }
    return !(b && f) && !(u && (r || b || f));
  }

  void lexNumber() {
    size_t begin = pos_;
    SourceLoc loc = here();
    auto isBaseDigit = [](char ch, int base) { return digitValue(ch) < base; };
    // Digits of `base` with single underscores between them; returns the digits without '_'.
    auto readDigits = [&](int base, bool required) {
      std::string digits;
      while (pos_ < src_.size()) {
        char ch = src_[pos_];
        if (isBaseDigit(ch, base)) {
          digits += ch;
          ++pos_;
        } else if (ch == '_' && (pos_ + 1 < src_.size()) && isBaseDigit(src_[pos_ + 1], base) &&
                   (!digits.empty() || base != 10)) {
          ++pos_;
        } else {
          break;
        }
      }
      if (required && digits.empty()) raiseError(loc, "invalid number literal: expected digits");
      return digits;
    };
    auto rejectTrailingIdent = [&]() {
      if (pos_ < src_.size() &&
          (isIdentChar(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
        raiseError(loc, "invalid number literal '" +
                            std::string(src_.substr(begin, pos_ - begin + 1)) + "'");
    };

    if (src_[pos_] == '0' && pos_ + 1 < src_.size()) {
      char p = static_cast<char>(src_[pos_ + 1] | 0x20);
      int base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (base) {
        pos_ += 2;
        if (peek() == '_') ++pos_;
        std::string digits = readDigits(base, true);
        rejectTrailingIdent();
        emitInt(digits, base, begin, loc);
        return;
      }
    }

    std::string mantissa = readDigits(10, false);
    bool isFloat = false;
    if (peek() == '.' && !(peek(1) == '.' && peek(2) == '.')) {
      isFloat = true;
      ++pos_;
      mantissa += '.';
      if (isDigit(peek())) mantissa += readDigits(10, false);
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t save = pos_;
      ++pos_;
      std::string exp = "e";
      if (peek() == '+' || peek() == '-') exp += src_[pos_++];
      if (isDigit(peek())) {
        exp += readDigits(10, true);
        mantissa += exp;
        isFloat = true;
      } else {
        pos_ = save;
      }
    }
    bool imaginary = false;
    if (peek() == 'j' || peek() == 'J') {
      ++pos_;
      imaginary = true;
      isFloat = true;
    }
    rejectTrailingIdent();
    if (!isFloat) {
      if (mantissa.size() > 1 && mantissa[0] == '0' &&
          mantissa.find_first_not_of('0') != std::string::npos)
        raiseError(loc, "leading zeros in decimal integer literals are not permitted; use an "
                        "0o prefix for octal integers");
      emitInt(mantissa, 10, begin, loc);
      return;
    }
    Token& t = emit(TokenKind::Float, std::string(src_.substr(begin, pos_ - begin)), loc);
    t.imaginary = imaginary;
    if (mantissa == ".") mantissa = "0";
    double value = 0;
    auto res = std::from_chars(mantissa.data(), mantissa.data() + mantissa.size(), value);
    if (res.ec == std::errc::result_out_of_range) {
      // from_chars reports overflow and underflow alike; Python gives inf or 0.
      bool tiny = mantissa.find("e-") != std::string::npos;
      value = tiny ? 0.0 : __builtin_huge_val();
    } else if (res.ec != std::errc() || res.ptr != mantissa.data() + mantissa.size()) {
      raiseError(loc, "invalid float literal '" + t.text + "'");
    }
    t.floatValue = value;
  }

  void emitInt(const std::string& digits, int base, size_t begin, SourceLoc loc) {
    Token& t = emit(TokenKind::Int, std::string(src_.substr(begin, pos_ - begin)), loc);
    uint64_t value = 0;
    for (char ch : digits) {
      uint64_t d = static_cast<uint64_t>(digitValue(ch));
      if (value > (UINT64_MAX - d) / static_cast<uint64_t>(base)) {
        t.intOverflow = true;
        return;
      }
      value = value * static_cast<uint64_t>(base) + d;
    }
    t.intValue = static_cast<int64_t>(value);
    t.intUnsigned = value > static_cast<uint64_t>(INT64_MAX);
  }

  void lexString(size_t begin, const std::string& prefix) {
    SourceLoc loc = locAt(begin);
    bool raw = false, bytes = false, fstring = false;
    for (char ch : prefix) {
      char l = static_cast<char>(ch | 0x20);
      raw |= l == 'r';
      bytes |= l == 'b';
      fstring |= l == 'f';
    }
    char quote = src_[pos_];
    bool triple = peek(1) == quote && peek(2) == quote;
    pos_ += triple ? 3 : 1;
    std::string value;
    int fBraceDepth = 0; // inside `{...}` of an f-string, quotes start nested strings
    while (true) {
      if (pos_ >= src_.size()) unterminated(loc, triple);
      char ch = src_[pos_];
      if (ch == '\n') {
        if (!triple) unterminated(loc, triple);
        value += '\n';
        newline();
        atLineStart_ = false;
        continue;
      }
      if (fstring && fBraceDepth > 0 && (ch == '\'' || ch == '"') && ch != quote) {
        skipNestedString(loc, triple);
        continue;
      }
      if (ch == quote && (!triple || (peek(1) == quote && peek(2) == quote))) {
        pos_ += triple ? 3 : 1;
        break;
      }
      if (fstring) {
        if (ch == '{' && peek(1) == '{' && fBraceDepth == 0) {
          value += "{{";
          pos_ += 2;
          continue;
        }
        if (ch == '{') ++fBraceDepth;
        if (ch == '}' && fBraceDepth > 0) --fBraceDepth;
      }
      if (ch == '\\') {
        ++pos_;
        if (pos_ >= src_.size()) unterminated(loc, triple);
        char esc = src_[pos_];
        if (esc == '\n') { // backslash-newline continues the literal on the next line
          if (raw) value += "\\\n";
          newline();
          atLineStart_ = false;
          continue;
        }
        if (raw) {
          value += '\\';
          value += esc;
          ++pos_;
          continue;
        }
        decodeEscape(value, bytes, loc);
        continue;
      }
      value += ch;
      ++pos_;
    }
    Token& t = emit(TokenKind::String, std::string(src_.substr(begin, pos_ - begin)), loc);
    t.stringValue = std::move(value);
    t.isBytes = bytes;
    t.isFString = fstring;
  }

  // A string literal nested in an f-string replacement field (`f"{d['k']}"`); its value is unused.
  void skipNestedString(SourceLoc outer, bool outerTriple) {
    char quote = src_[pos_++];
    while (true) {
      if (pos_ >= src_.size()) unterminated(outer, outerTriple);
      char ch = src_[pos_];
      if (ch == '\n') unterminated(outer, outerTriple);
      if (ch == '\\' && pos_ + 1 < src_.size() && src_[pos_ + 1] != '\n') {
        pos_ += 2;
        continue;
      }
      ++pos_;
      if (ch == quote) return;
    }
  }

  [[noreturn]] void unterminated(SourceLoc loc, bool triple) {
    raiseError(loc, triple ? "unterminated triple-quoted string literal"
                           : "unterminated string literal (missing closing quote on this line)");
  }

  void decodeEscape(std::string& out, bool bytes, SourceLoc loc) {
    char esc = src_[pos_++];
    auto hexDigits = [&](int count) {
      uint32_t v = 0;
      for (int i = 0; i < count; ++i) {
        if (pos_ >= src_.size() || digitValue(src_[pos_]) >= 16)
          raiseError(loc, std::string("truncated \\") + esc + " escape in string literal");
        v = v * 16 + static_cast<uint32_t>(digitValue(src_[pos_++]));
      }
      return v;
    };
    switch (esc) {
    case '\\':
      out += '\\';
      return;
    case '\'':
      out += '\'';
      return;
    case '"':
      out += '"';
      return;
    case 'a':
      out += '\a';
      return;
    case 'b':
      out += '\b';
      return;
    case 'f':
      out += '\f';
      return;
    case 'n':
      out += '\n';
      return;
    case 'r':
      out += '\r';
      return;
    case 't':
      out += '\t';
      return;
    case 'v':
      out += '\v';
      return;
    case 'x':
      out += static_cast<char>(hexDigits(2));
      return;
    default:
      break;
    }
    if (esc >= '0' && esc <= '7') {
      uint32_t v = static_cast<uint32_t>(esc - '0');
      for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i)
        v = v * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
      out += static_cast<char>(v & 0xFF);
      return;
    }
    if (!bytes && (esc == 'u' || esc == 'U')) {
      uint32_t cp = hexDigits(esc == 'u' ? 4 : 8);
      if (cp > 0x10FFFF) raiseError(loc, "invalid \\U escape in string literal: past U+10FFFF");
      appendUtf8(out, cp);
      return;
    }
    // Unknown escapes (and \N{...}) stay as written, as Python keeps them.
    out += '\\';
    out += esc;
  }

  uint32_t file_;
  std::string_view src_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  size_t lineStart_ = 0;
  bool atLineStart_ = true;
  bool hasPendingIndent_ = false;
  IndentLevel pendingIndent_{0, 0};
  std::vector<IndentLevel> indents_;
  std::vector<OpenBracket> brackets_;
  std::vector<Token> tokens_;
};

} // namespace

bool isPythonKeyword(std::string_view w) {
  static constexpr std::array<std::string_view, 35> kKeywords = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  for (std::string_view k : kKeywords)
    if (k == w) return true;
  return false;
}

std::string describeToken(const Token& tok) {
  switch (tok.kind) {
  case TokenKind::Newline:
    return "end of line";
  case TokenKind::Indent:
    return "an indented block";
  case TokenKind::Dedent:
    return "end of the indented block";
  case TokenKind::EndOfFile:
    return "end of file";
  case TokenKind::String:
    return tok.isFString ? "an f-string" : "a string literal";
  default:
    return "'" + tok.text + "'";
  }
}

std::vector<Token> tokenize(const SourceManager& sm, uint32_t file) {
  return Lexer(sm, file).run();
}

} // namespace ww::frontend
