// UTF-8 decoding for the front end: the lexer's check that a file is UTF-8, and diagnostics that
// quote source lines and messages without passing malformed bytes on to the user's terminal (or
// to Python, which decodes every message as UTF-8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ww {

/// Decodes the UTF-8 sequence at `s[pos]`: returns its length and sets `cp`, or returns 0 when
/// the bytes there are not well-formed UTF-8 (stray continuation bytes, overlong forms,
/// surrogates, past U+10FFFF, truncated).
inline size_t decodeUtf8(std::string_view s, size_t pos, uint32_t& cp) {
  unsigned char b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (len == 0 || b0 > 0xF4 || pos + len > s.size()) return 0;
  cp = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) {
    unsigned char b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

/// `s` with control bytes (but tab and newline) and malformed UTF-8 written as \xNN.
inline std::string escapeUnprintable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    size_t n = c < 0x80 ? 1 : decodeUtf8(s, i, cp);
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F || n == 0) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

} // namespace ww
