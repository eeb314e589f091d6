// Source files, source locations and the one path by which every compiler error reaches the user:
// `FILE:LINE:COL: error: MESSAGE`, the source line, a caret, and optional notes.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace ww {

/// A position in a source file registered with a SourceManager. Lines and columns count from 1;
/// line 0 means "no location".
struct SourceLoc {
  uint32_t file = 0;
  uint32_t line = 0;
  uint32_t col = 0;
  bool valid() const { return line != 0; }
};

/// Owns the text of every file the compiler reads, so that diagnostics can quote source lines.
class SourceManager {
public:
  /// Registers a file and returns its id for SourceLoc::file. Its line endings ("\r\n", "\r")
  /// read as "\n", as Python reads source; text() returns the translated text.
  uint32_t addFile(std::string path, std::string text);
  const std::string& path(uint32_t file) const { return files_.at(file).path; }
  const std::string& text(uint32_t file) const { return files_.at(file).text; }
  size_t numFiles() const { return files_.size(); }
  /// The text of the line `loc` points into, without its newline; empty when out of range.
  std::string_view lineText(SourceLoc loc) const;

private:
  struct File {
    std::string path;
    std::string text;
    std::vector<size_t> lineStarts;
  };
  std::vector<File> files_;
};

struct Diagnostic {
  enum class Severity { Error, Warning, Note };
  Severity severity = Severity::Error;
  SourceLoc loc;
  std::string message;
  std::vector<Diagnostic> notes;
};

/// Renders `FILE:LINE:COL: error: MESSAGE`, the quoted line with a caret, then each note.
std::string formatDiagnostic(const SourceManager& sm, const Diagnostic& diag);

/// The exception every compiler stage throws for a user error. The driver renders it against the
/// SourceManager before it leaves the library, after which what() is the full formatted text.
class CompileError : public std::exception {
public:
  explicit CompileError(Diagnostic diag) : diag_(std::move(diag)) {}
  CompileError(SourceLoc loc, std::string message, std::vector<Diagnostic> notes = {});

  const Diagnostic& diagnostic() const { return diag_; }
  /// Adds a note (for instance "in helper called from here") while the error unwinds; a note
  /// already given at the same place is not repeated.
  void addNote(SourceLoc loc, std::string message);
  void render(const SourceManager& sm) { text_ = formatDiagnostic(sm, diag_); }
  bool rendered() const { return !text_.empty(); }
  const char* what() const noexcept override {
    return text_.empty() ? diag_.message.c_str() : text_.c_str();
  }

private:
  Diagnostic diag_;
  std::string text_;
};

/// Throws a CompileError at `loc`. Used by every stage; the single way to report a user error.
[[noreturn]] void raiseError(SourceLoc loc, std::string message,
                             std::vector<Diagnostic> notes = {});

/// A note to attach to an error.
inline Diagnostic note(SourceLoc loc, std::string message) {
  return Diagnostic{Diagnostic::Severity::Note, loc, std::move(message), {}};
}

} // namespace ww
