// Small POSIX helpers for the runtime: private temp directories, whole-file I/O, and running a
// tool (ptxas) as a child process without a shell.
#pragma once

#include <string>
#include <vector>

namespace ww::runtime {

/// A fresh directory under $TMPDIR (or /tmp), unique per call (mkdtemp), removed with its files
/// on destruction.
class TempDir {
public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

private:
  std::string path_;
  std::string error_;
};

bool writeFile(const std::string& path, const void* data, size_t size);
bool readFile(const std::string& path, std::string& out);

struct ProcessResult {
  bool started = false;
  int exitCode = -1;  // the exit status; 128 + N when killed by signal N
  std::string output; // stdout and stderr, interleaved as written; the error when !started
};

/// Runs argv[0] (a path) with `argv`, capturing stdout and stderr. Thread-safe: the pipe is
/// close-on-exec so concurrent spawns in other threads do not hold it open.
ProcessResult runProcess(const std::vector<std::string>& argv);

} // namespace ww::runtime
