// The interpreter's names for the scalar numerics contract (ir/ScalarNumerics.h), which constant
// folding shares: small-float encodings, roundings and float -> int conversions.
#pragma once

#include "ir/ScalarNumerics.h"

namespace ww::interp {

using ir::numerics::bf16ToFloat;
using ir::numerics::decodeSmallFloat;
using ir::numerics::encodeSmallFloat;
using ir::numerics::floatToBf16;
using ir::numerics::floatToHalf;
using ir::numerics::floatToIntSaturating;
using ir::numerics::floatToUintSaturating;
using ir::numerics::halfToFloat;
using ir::numerics::Rounding;
using ir::numerics::roundToFloat;
using ir::numerics::truncateToTf32;

} // namespace ww::interp
