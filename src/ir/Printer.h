// Prints Tile IR as text (`wwc --emit tile-ir`): the form tests match against.
#pragma once

#include "ir/IR.h"

#include <string>

namespace ww::ir {

std::string print(const Function& fn);
std::string print(const Module& module);

} // namespace ww::ir
