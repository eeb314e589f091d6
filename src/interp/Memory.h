// The interpreter's global address space: every buffer argument gets its own 1 TiB window of
// addresses, so each pointer knows which argument it came from and every access is bounds-checked
// against that argument, even when the host buffers happen to lie next to each other. Read-only
// arguments (NumPy arrays that are not writeable) refuse stores and atomics the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ww::interp {

class GlobalMemory {
public:
  /// Registers a host buffer under the argument name; returns the address of its first byte.
  uint64_t addRegion(std::string name, void* data, size_t bytes, bool readOnly = false);

  /// The host address of an access of `width` bytes at `addr`, or null when the access leaves
  /// its argument, is misaligned, does not point into any argument or writes a read-only one;
  /// then `why` says what (`out-of-bounds load of 4 bytes at offset 4096 past the end of
  /// argument 'x' (4096 bytes)`). `access` is "load" for reads, anything else writes.
  unsigned char* resolve(uint64_t addr, int width, const char* access, std::string* why) const {
    uint64_t idx = ((addr + kHalfWindow) >> kWindowShift) - 1;
    if (idx < regions_.size()) {
      const Region& r = regions_[idx];
      int64_t off = int64_t(addr - r.base);
      if (off >= 0 && uint64_t(off) + uint64_t(width) <= r.bytes && off % width == 0 &&
          !(r.readOnly && !isLoad(access)))
        return r.data + off;
    }
    *why = describeFault(addr, width, access);
    return nullptr;
  }
  /// The argument name and byte offset of an address inside some argument's window.
  bool locate(uint64_t addr, std::string* name, int64_t* offset) const;

private:
  static constexpr int kWindowShift = 40;
  static constexpr uint64_t kHalfWindow = uint64_t(1) << (kWindowShift - 1);
  struct Region {
    std::string name;
    unsigned char* data;
    uint64_t bytes;
    uint64_t base;
    bool readOnly;
  };
  static bool isLoad(const char* access) { return access[0] == 'l'; }
  std::string describeFault(uint64_t addr, int width, const char* access) const;
  std::vector<Region> regions_;
};

} // namespace ww::interp
