// Reading a kernel file together with the sibling modules its relative imports name, so that
// wwc and C++ callers compile what `@ww.jit` compiles from Python (helpers in other files).
#include "frontend/Parser.h"
#include "warpweave/warpweave.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace ww {

namespace {

namespace fs = std::filesystem;

bool readText(const fs::path& path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buf;
  buf << in.rdbuf();
  text = buf.str();
  return true;
}

/// The file a relative import names: `.mod` is mod.py beside `from`, `..mod` one folder up, and
/// `from . import mod` names mod.py itself. Empty for absolute imports (packages on sys.path,
/// which only Python can resolve) and for names that are not files.
fs::path importedFile(const fs::path& from, const ast::ImportAlias& alias) {
  const std::string& m = alias.module;
  size_t dots = m.find_first_not_of('.');
  if (dots == 0) return {};
  if (dots == std::string::npos) dots = m.size();
  fs::path dir = from.parent_path();
  for (size_t i = 1; i < dots; ++i) dir = dir.parent_path();
  std::string rest = m.substr(dots);
  if (rest.empty()) rest = alias.name;
  for (char& c : rest)
    if (c == '.') c = '/';
  fs::path file = dir / (rest + ".py");
  return fs::is_regular_file(file) ? file : fs::path();
}

} // namespace

std::vector<SourceFile> readSourceWithImports(const std::string& path) {
  std::vector<SourceFile> files;
  std::string text;
  if (!readText(path, text)) throw std::runtime_error(path + ": cannot open file");
  files.push_back({path, std::move(text)});
  std::set<fs::path> seen = {fs::weakly_canonical(path)};
  for (size_t i = 0; i < files.size(); ++i) {
    SourceManager sm;
    ast::Module module;
    try {
      module = frontend::parseModule(sm, sm.addFile(files[i].path, files[i].text));
    } catch (const std::exception&) {
      continue; // the compile itself reports the syntax error, with its location
    }
    for (const auto& imp : module.imports)
      for (const ast::ImportAlias& alias : imp->names) {
        fs::path file = importedFile(files[i].path, alias);
        if (file.empty() || !seen.insert(fs::weakly_canonical(file)).second) continue;
        std::string imported;
        if (readText(file, imported)) files.push_back({file.string(), std::move(imported)});
      }
  }
  return files;
}

} // namespace ww
