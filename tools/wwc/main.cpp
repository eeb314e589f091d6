// wwc: compile kernel-language source to Tile IR, PTX or cubin ahead of time.
#include "warpweave/warpweave.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return ww::runCli(args);
}
