// Splits Python source into tokens the way CPython's tokenizer does: NEWLINE/INDENT/DEDENT from
// indentation, implicit line joining inside brackets, literals decoded, every token located.
#pragma once

#include "frontend/Diagnostics.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ww::frontend {

enum class TokenKind {
  Name,      // identifier that is not a keyword
  Keyword,   // if, def, not, None, True, ...
  Int,       // integer literal; Token::intValue, or Token::intOverflow when past int64
  Float,     // float literal (and imaginary literals, flagged by Token::imaginary)
  String,    // one string literal; adjacent literals are separate tokens
  Op,        // operator or delimiter: + ** //= ( ) -> := ... and so on
  Newline,   // end of a logical line
  Indent,    // the next logical line is indented deeper
  Dedent,    // one level of indentation closed
  EndOfFile, // always the last token
};

struct Token {
  TokenKind kind = TokenKind::EndOfFile;
  std::string text; // the source spelling (for String: the whole literal including quotes)
  SourceLoc loc;

  int64_t intValue = 0;
  bool intUnsigned = false; // from 2**63 to 2**64 - 1: intValue holds its bits
  bool intOverflow = false; // past 2**64 - 1: Python accepts big ints; the parser rejects them
  double floatValue = 0;
  bool imaginary = false;

  std::string stringValue; // escape sequences decoded (raw strings kept verbatim)
  bool isBytes = false;
  bool isFString = false;

  bool is(TokenKind k, std::string_view s) const { return kind == k && text == s; }
  bool isOp(std::string_view s) const { return is(TokenKind::Op, s); }
  bool isKeyword(std::string_view s) const { return is(TokenKind::Keyword, s); }
};

/// Human-readable description of a token for "expected X, found Y" messages.
std::string describeToken(const Token& tok);

/// True for the words Python reserves (hard keywords only; `match`/`case`/`type` stay names).
bool isPythonKeyword(std::string_view word);

/// Tokenizes file `file` of `sm`. Throws CompileError (through raiseError) for text that no Python
/// tokenizer accepts: unterminated strings, unbalanced brackets, inconsistent dedents, stray
/// characters, malformed numbers. Integers too large for int64 are not an error here.
std::vector<Token> tokenize(const SourceManager& sm, uint32_t file);

} // namespace ww::frontend
