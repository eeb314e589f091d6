#include "interp/Memory.h"

#include <sstream>

namespace ww::interp {

uint64_t GlobalMemory::addRegion(std::string name, void* data, size_t bytes, bool readOnly) {
  uint64_t base = uint64_t(regions_.size() + 1) << kWindowShift;
  regions_.push_back({std::move(name), static_cast<unsigned char*>(data), bytes, base, readOnly});
  return base;
}

bool GlobalMemory::locate(uint64_t addr, std::string* name, int64_t* offset) const {
  uint64_t idx = ((addr + kHalfWindow) >> kWindowShift) - 1;
  if (idx >= regions_.size()) return false;
  *name = regions_[idx].name;
  *offset = int64_t(addr - regions_[idx].base);
  return true;
}

std::string GlobalMemory::describeFault(uint64_t addr, int width, const char* access) const {
  std::ostringstream os;
  std::string name;
  int64_t off = 0;
  if (!locate(addr, &name, &off)) {
    os << access << " of " << width << " bytes through the invalid address 0x" << std::hex << addr
       << std::dec << ", which is not derived from any buffer argument";
    return os.str();
  }
  const Region& r = regions_[((addr + kHalfWindow) >> kWindowShift) - 1];
  if (off < 0) {
    os << "out-of-bounds " << access << " of " << width << " bytes at offset " << off
       << " before the start of argument '" << name << "' (" << r.bytes << " bytes)";
  } else if (uint64_t(off) + uint64_t(width) > r.bytes) {
    os << "out-of-bounds " << access << " of " << width << " bytes at offset " << off
       << " past the end of argument '" << name << "' (" << r.bytes << " bytes)";
  } else if (r.readOnly && !isLoad(access) && off % width == 0) {
    os << access << " of " << width << " bytes at offset " << off << " into argument '" << name
       << "', which is read-only (a NumPy array that is not writeable)";
  } else {
    os << "misaligned " << access << " of " << width << " bytes at offset " << off
       << " of argument '" << name << "' (the address must be a multiple of " << width << ")";
  }
  return os.str();
}

} // namespace ww::interp
