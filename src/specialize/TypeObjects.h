// `x.type` of kernel values as Triton's compile-time type objects (constexpr_type, block_type,
// tuple_type; a scalar's type is its dtype). See TypeObjects.cpp.
#pragma once

#include "specialize/Values.h"

#include <string>

namespace ww::specialize {

struct CallSite;

/// Whether `v` is one of the type objects below.
bool isTypeObject(const Val& v);
/// `v.type`: constexpr_type(v) for a compile-time value, the dtype of a scalar, a block_type of a
/// tensor, a tuple_type of a tuple's element types.
Val typeOf(const Val& v, SourceLoc loc);
/// A type object's attributes: constexpr_type.value; block_type.element_ty / scalar / shape /
/// numel / is_block() / is_ptr(); tuple_type.types.
Val typeObjectAttr(const Val& t, const std::string& name, SourceLoc loc);
Val typeObjectMethod(const Val& t, const std::string& name, const CallSite& call);
/// Python's == of two type objects.
bool typeObjectsEqual(const Val& a, const Val& b);
/// As Triton prints them: constexpr_type[10], <[128], tl.float32>, tuple_type(...).
std::string describeTypeObject(const Val& t);

} // namespace ww::specialize
