// The interpreter's global address space: every buffer argument gets its own 1 TiB window of
// addresses, so each pointer knows which argument it came from and every access is bounds-checked
// against that argument, even when the host buffers happen to lie next to each other. Read-only
// arguments (NumPy arrays that are not writeable) refuse stores and atomics the same way.
//
// Host memory that no argument covers (the tensors a table of pointers names) keeps its own
// addresses: when a host lookup is set, an access outside every window asks it which host
// allocation holds the address and is checked against that span.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "warpweave/warpweave.h"

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
    if (host_ && idx >= regions_.size()) {
      why->clear();
      if (unsigned char* p = resolveHost(addr, width, access, why)) return p;
      if (!why->empty()) return nullptr;
    }
    *why = describeFault(addr, width, access);
    return nullptr;
  }

  /// Lets accesses outside every argument reach the host memory `lookup` names (none: faults).
  void setHostLookup(HostMemoryLookup lookup);
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
  /// The host pointer of an access outside every window, through the lookup's spans (each
  /// asked for once and kept); null with `why` set when the span refuses the access, null with
  /// `why` untouched when no span holds the address.
  unsigned char* resolveHost(uint64_t addr, int width, const char* access, std::string* why) const;
  std::vector<Region> regions_;
  struct HostState {
    HostMemoryLookup lookup;
    std::mutex mutex;
    std::vector<HostSpan> spans; // those the lookup returned, in the order it did
  };
  std::shared_ptr<HostState> host_;
};

} // namespace ww::interp
