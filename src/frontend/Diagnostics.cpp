#include "frontend/Diagnostics.h"

#include <sstream>

namespace ww {

uint32_t SourceManager::addFile(std::string path, std::string text) {
  File f;
  f.path = std::move(path);
  f.text = std::move(text);
  f.lineStarts.push_back(0);
  for (size_t i = 0; i < f.text.size(); ++i)
    if (f.text[i] == '\n') f.lineStarts.push_back(i + 1);
  files_.push_back(std::move(f));
  return static_cast<uint32_t>(files_.size() - 1);
}

std::string_view SourceManager::lineText(SourceLoc loc) const {
  if (!loc.valid() || loc.file >= files_.size()) return {};
  const File& f = files_[loc.file];
  if (loc.line > f.lineStarts.size()) return {};
  size_t begin = f.lineStarts[loc.line - 1];
  size_t end = f.text.find('\n', begin);
  if (end == std::string::npos) end = f.text.size();
  std::string_view line(f.text.data() + begin, end - begin);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

static const char* severityName(Diagnostic::Severity s) {
  switch (s) {
  case Diagnostic::Severity::Error:
    return "error";
  case Diagnostic::Severity::Warning:
    return "warning";
  case Diagnostic::Severity::Note:
    return "note";
  }
  return "error";
}

static void formatOne(std::ostringstream& os, const SourceManager& sm, const Diagnostic& d) {
  if (d.loc.valid() && d.loc.file < sm.numFiles())
    os << sm.path(d.loc.file) << ':' << d.loc.line << ':' << d.loc.col << ": ";
  os << severityName(d.severity) << ": " << d.message << '\n';
  std::string_view line = sm.numFiles() ? sm.lineText(d.loc) : std::string_view{};
  if (!line.empty()) {
    os << "  " << line << '\n' << "  ";
    // Keep tabs so the caret lines up under the quoted text.
    for (uint32_t i = 1; i < d.loc.col && i - 1 < line.size(); ++i)
      os << (line[i - 1] == '\t' ? '\t' : ' ');
    os << "^\n";
  }
}

std::string formatDiagnostic(const SourceManager& sm, const Diagnostic& diag) {
  std::ostringstream os;
  formatOne(os, sm, diag);
  for (const Diagnostic& n : diag.notes) formatOne(os, sm, n);
  std::string s = os.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

CompileError::CompileError(SourceLoc loc, std::string message, std::vector<Diagnostic> notes)
    : diag_{Diagnostic::Severity::Error, loc, std::move(message), std::move(notes)} {}

void CompileError::addNote(SourceLoc loc, std::string message) {
  diag_.notes.push_back(note(loc, std::move(message)));
}

void raiseError(SourceLoc loc, std::string message, std::vector<Diagnostic> notes) {
  throw CompileError(loc, std::move(message), std::move(notes));
}

} // namespace ww
