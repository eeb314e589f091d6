// TLX's shared-memory layout objects in kernel code (tlx.swizzled_layout,
// tlx.swizzled_shared_layout_encoding, tlx.padded_shared_layout_encoding and their class
// methods), local_alloc's layout= of them, and tlx.dump_layout (TlxLayouts.cpp).
#pragma once

#include "ir/IR.h"

#include <string>
#include <vector>

namespace ww::specialize {

class Specializer;
struct CallSite;
struct Val;

/// `name`: "swizzled_layout", "swizzled_layout.make_default", "swizzled_shared_layout_encoding",
/// "swizzled_shared_layout_encoding.make_default", "padded_shared_layout_encoding",
/// "padded_shared_layout_encoding.with_identity_for" / ".with_bases". A compile-time object.
Val tlxSharedLayout(Specializer& sp, const std::string& name, CallSite& call);
/// tlx.dump_layout(x): a dump_layout op on the tensor or buffer view.
Val tlxDumpLayout(Specializer& sp, const std::string& name, CallSite& call);
/// True for the objects tlxSharedLayout makes.
bool isSharedLayoutObject(const Val& v);
/// The object as TLX's constructor spells it, for messages.
std::string describeSharedLayout(const Val& v);
/// The class methods of the layout classes ("make_default", ...): the builtin name of
/// `cls.method`, or empty.
std::string sharedLayoutClassMethod(const std::string& cls, const std::string& method);
/// The local_alloc attributes of `layout=` for a buffer of `shape` (refusing, at `loc`, what
/// does not fit it).
std::vector<ir::NamedAttr> sharedLayoutAttrs(Specializer& sp, const Val& layout, SourceLoc loc,
                                             const std::vector<int64_t>& shape);

} // namespace ww::specialize
