// Reading a kernel file together with the helper modules its imports name, so that wwc and C++
// callers compile what `@ww.jit` compiles from Python (helpers in other files). Python knows
// where each import led; here the files are found as Python would find them from the usual roots
// (the search is documented at readSourceWithImports in warpweave.h).
#include "frontend/Parser.h"
#include "warpweave/warpweave.h"

#include <cstdlib>
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

/// The file of module `dotted` (a.b: a/b.py or a/b/__init__.py) under `root`, or empty.
fs::path moduleFile(const fs::path& root, const std::string& dotted) {
  if (dotted.empty()) return {};
  std::string rel = dotted;
  for (char& c : rel)
    if (c == '.') c = '/';
  std::error_code ec;
  for (fs::path file : {root / (rel + ".py"), root / rel / "__init__.py"})
    if (fs::is_regular_file(file, ec)) return file;
  return {};
}

/// Modules that are the kernel language, never helper files.
bool isLanguageModule(const std::string& dotted) {
  std::string top = dotted.substr(0, dotted.find('.'));
  return top == "warpweave" || top == "triton" || top == "math";
}

/// The package's own helper modules of @jit functions (language.extra.tlx.warp_spec), named
/// in warpweave's spelling (TLX kernels import them as triton.language.extra.tlx.*): their files
/// join the compile as a user's helper files do. Empty for other modules.
std::string packageHelperModule(const std::string& dotted) {
  for (const char* prefix : {"warpweave.language.extra.tlx.", "triton.language.extra.tlx."})
    if (dotted.starts_with(prefix) && dotted.size() > std::string(prefix).size())
      return "warpweave.language.extra.tlx." + dotted.substr(std::string(prefix).size());
  return {};
}

/// Where absolute imports are looked for, after the importing file's own folder: the kernel
/// file's folder and each folder above it (a project root, wherever the command runs), the
/// PYTHONPATH entries, and the working directory.
std::vector<fs::path> importRoots(const fs::path& kernel) {
  std::vector<fs::path> roots;
  std::error_code ec;
  fs::path dir = fs::absolute(kernel, ec).parent_path();
  for (;;) {
    // Installed packages are not a project: a kernel there would reach torch's whole tree.
    if (dir.filename() == "site-packages" || dir.filename() == "dist-packages") break;
    roots.push_back(dir);
    if (dir == dir.root_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  if (const char* pp = std::getenv("PYTHONPATH")) {
    std::stringstream entries(pp);
    for (std::string e; std::getline(entries, e, ':');)
      if (!e.empty()) roots.push_back(e);
  }
  fs::path cwd = fs::current_path(ec);
  if (!ec) roots.push_back(cwd);
  return roots;
}

/// The files an import names: for a relative one, beside `from` (`.mod` is mod.py there, `..mod`
/// one folder up, `from . import mod` names mod.py itself); for an absolute one, under the first
/// root holding it. `from pkg import f` names pkg (f may be defined there) and pkg/f.py when it
/// is a module.
std::vector<fs::path> importedFiles(const fs::path& from, const ast::ImportAlias& alias,
                                    const std::vector<fs::path>& roots) {
  const std::string& m = alias.module;
  size_t dots = m.find_first_not_of('.');
  if (dots == std::string::npos) dots = m.size();
  std::string rest = m.substr(dots);
  std::vector<std::string> candidates; // dotted module names, relative to the roots searched
  if (!alias.name.empty())
    candidates.push_back(rest.empty() ? alias.name : rest + "." + alias.name);
  if (!rest.empty()) candidates.push_back(rest);
  std::vector<fs::path> searched;
  if (dots > 0) {
    fs::path dir = from.parent_path();
    for (size_t i = 1; i < dots; ++i) dir = dir.parent_path();
    searched.push_back(dir);
  } else {
    if (std::string helper = packageHelperModule(rest); !helper.empty()) {
      candidates = {helper};
    } else if (isLanguageModule(rest)) {
      return {};
    }
    searched.push_back(from.parent_path());
    searched.insert(searched.end(), roots.begin(), roots.end());
  }
  std::vector<fs::path> files;
  for (const std::string& dotted : candidates)
    for (const fs::path& root : searched) {
      fs::path file = moduleFile(root, dotted);
      if (file.empty()) continue;
      files.push_back(file);
      break;
    }
  return files;
}

} // namespace

std::vector<SourceFile> readSourceWithImports(const std::string& path) {
  std::vector<SourceFile> files;
  std::string text;
  if (!readText(path, text)) throw std::runtime_error(path + ": cannot open file");
  files.push_back({path, std::move(text)});
  const std::vector<fs::path> roots = importRoots(path);
  std::error_code ec;
  std::set<fs::path> seen = {fs::weakly_canonical(path, ec)};
  // Bounds a walk that strays into a large package; the compile reports what is missing.
  constexpr size_t kMaxFiles = 256;
  for (size_t i = 0; i < files.size() && files.size() < kMaxFiles; ++i) {
    SourceManager sm;
    ast::Module module;
    try {
      module = frontend::parseModule(sm, sm.addFile(files[i].path, files[i].text));
    } catch (const std::exception&) {
      continue; // the compile itself reports the syntax error, with its location
    }
    for (const auto& imp : module.imports)
      for (const ast::ImportAlias& alias : imp->names)
        for (const fs::path& file : importedFiles(files[i].path, alias, roots)) {
          if (!seen.insert(fs::weakly_canonical(file, ec)).second) continue;
          std::string imported;
          if (readText(file, imported)) files.push_back({file.string(), std::move(imported)});
        }
  }
  return files;
}

} // namespace ww
