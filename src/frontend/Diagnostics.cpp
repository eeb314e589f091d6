#include "frontend/Diagnostics.h"

#include "frontend/Utf8.h"

#include <algorithm>
#include <sstream>

namespace ww {

namespace {

/// Python reads source with universal newlines: "\r\n" and a lone "\r" end a line as "\n" does.
/// Translating them here gives the lexer, the line table and every quoted line one convention.
void translateNewlines(std::string& text) {
  size_t out = text.find('\r');
  if (out == std::string::npos) return;
  for (size_t i = out; i < text.size(); ++i) {
    if (text[i] != '\r') {
      text[out++] = text[i];
      continue;
    }
    text[out++] = '\n';
    if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
  }
  text.resize(out);
}

} // namespace

uint32_t SourceManager::addFile(std::string path, std::string text) {
  File f;
  f.path = std::move(path);
  f.text = std::move(text);
  translateNewlines(f.text);
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
  return std::string_view(f.text.data() + begin, end - begin);
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
  // Messages quote names and strings of the source, which may hold any bytes.
  os << severityName(d.severity) << ": " << escapeUnprintable(d.message) << '\n';
  std::string_view line = sm.numFiles() ? sm.lineText(d.loc) : std::string_view{};
  if (!line.empty()) {
    // A long line is quoted around the column only (a generated or mangled file may have lines
    // of megabytes), starting on a character boundary.
    constexpr size_t kWindow = 160;
    size_t col = d.loc.col ? d.loc.col - 1 : 0;
    size_t begin = 0;
    if (line.size() > kWindow && col > kWindow / 2) {
      begin = std::min(col - kWindow / 2, line.size() - kWindow);
      while (begin < col && (static_cast<unsigned char>(line[begin]) & 0xC0) == 0x80) ++begin;
    }
    size_t end = std::min(line.size(), begin + kWindow);
    while (end < line.size() && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) ++end;
    const char* before = begin > 0 ? "..." : "";
    os << "  " << before << escapeUnprintable(line.substr(begin, end - begin))
       << (end < line.size() ? "..." : "") << '\n'
       << "  " << (begin > 0 ? "   " : "");
    line = line.substr(begin, end - begin);
    // The caret lines up under the quoted text: tabs kept, a character one column however many
    // bytes it takes, an escaped byte four.
    for (size_t i = 0; i < col - begin && i < line.size();) {
      unsigned char c = static_cast<unsigned char>(line[i]);
      uint32_t cp = 0;
      size_t n = c < 0x80 ? 1 : decodeUtf8(line, i, cp);
      bool escaped = (c < 0x20 && c != '\t') || c == 0x7F || n == 0;
      os << (c == '\t' ? "\t" : escaped ? "    " : " ");
      i += n == 0 ? 1 : n;
    }
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
  // A recursion unwinds through its call sites many times: each is noted once.
  for (const Diagnostic& n : diag_.notes)
    if (n.loc.file == loc.file && n.loc.line == loc.line && n.loc.col == loc.col &&
        n.message == message)
      return;
  diag_.notes.push_back(note(loc, std::move(message)));
}

void raiseError(SourceLoc loc, std::string message, std::vector<Diagnostic> notes) {
  throw CompileError(loc, std::move(message), std::move(notes));
}

} // namespace ww
