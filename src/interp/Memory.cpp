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

void GlobalMemory::setHostLookup(HostMemoryLookup lookup) {
  host_.reset();
  if (!lookup) return;
  host_ = std::make_shared<HostState>();
  host_->lookup = std::move(lookup);
}

unsigned char* GlobalMemory::resolveHost(uint64_t addr, int width, const char* access,
                                         std::string* why) const {
  std::lock_guard<std::mutex> lock(host_->mutex);
  const HostSpan* span = nullptr;
  for (const HostSpan& s : host_->spans)
    if (addr >= s.start && addr - s.start < s.bytes) span = &s;
  if (!span) {
    std::optional<HostSpan> found = host_->lookup(addr);
    if (!found || found->bytes == 0 || addr < found->start || addr - found->start >= found->bytes) {
      // Most often an index past the end of memory the kernel reached through a table.
      const HostSpan* below = nullptr;
      for (const HostSpan& s : host_->spans)
        if (s.start <= addr && (!below || s.start > below->start)) below = &s;
      if (below) {
        std::ostringstream os;
        os << describeFault(addr, width, access) << " (" << addr - below->start - below->bytes
           << " bytes past the end of the host allocation at 0x" << std::hex << below->start
           << std::dec << " (" << below->bytes
           << " bytes), the nearest below it that the kernel reached through an address it read)";
        *why = os.str();
      }
      return nullptr;
    }
    host_->spans.push_back(*found);
    span = &host_->spans.back();
  }
  const uint64_t off = addr - span->start;
  std::ostringstream os;
  if (off + uint64_t(width) > span->bytes) {
    os << "out-of-bounds " << access << " of " << width << " bytes at offset " << off
       << " past the end of the host allocation at 0x" << std::hex << span->start << std::dec
       << " (" << span->bytes << " bytes), reached through an address the kernel read";
  } else if (addr % uint64_t(width) != 0) {
    os << "misaligned " << access << " of " << width << " bytes at address 0x" << std::hex << addr
       << std::dec << " (the address must be a multiple of " << width << ")";
  } else if (!span->writable && !isLoad(access)) {
    os << access << " of " << width << " bytes at offset " << off
       << " into the read-only host allocation at 0x" << std::hex << span->start << std::dec;
  } else {
    return reinterpret_cast<unsigned char*>(addr);
  }
  *why = os.str();
  return nullptr;
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
