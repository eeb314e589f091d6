// libFuzzer entry point for the front end: lexes and parses arbitrary bytes as a kernel file.
// Not part of the CMake build; with clang:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -Iinclude \
//     tools/fuzz/parser_fuzzer.cpp src/frontend/{Lexer,Parser,Ast,AstDump,Diagnostics}.cpp \
//     -o parser_fuzzer && ./parser_fuzzer -max_len=4096 kernels/ examples/
// Any crash, sanitizer report or exception other than CompileError is a bug.
#include "frontend/AstDump.h"
#include "frontend/Parser.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ww::SourceManager sm;
  uint32_t file = sm.addFile("fuzz.py", std::string(reinterpret_cast<const char*>(data), size));
  try {
    ww::ast::Module module = ww::frontend::parseModule(sm, file);
    // Dumping walks every node, catching half-built trees.
    (void)ww::ast::dump(module);
  } catch (ww::CompileError& e) {
    if (!e.diagnostic().loc.valid()) __builtin_trap();
    e.render(sm);
  }
  return 0;
}
