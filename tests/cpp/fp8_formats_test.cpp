// The software fp8 formats of src/ir/ScalarNumerics.cpp (fp8e4b15, fp8e4b8, fp8e5b16), at their
// edges: the largest finite value, saturation of overflow and infinity, the NaN encodings, the
// smallest subnormal, round-to-nearest-even ties, and -0 (kept by e4b15, +0 in the fnuz formats);
// and the dtype table's names, widths, mantissa bits and biases.
#include "ir/ScalarNumerics.h"
#include "ir/Type.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace ww;
using ir::DType;
namespace num = ww::ir::numerics;

TEST(Fp8Formats, TableNamesWidthsAndLayouts) {
  struct Row {
    DType t;
    const char* sig;
    const char* tl;
    int mantissa, bias;
  };
  for (const Row& r : {Row{DType::F8E4B15, "fp8e4b15", "float8e4b15", 3, 15},
                       Row{DType::F8E4B8, "fp8e4b8", "float8e4b8", 3, 8},
                       Row{DType::F8E5B16, "fp8e5b16", "float8e5b16", 2, 16},
                       Row{DType::F8E4M3, "fp8e4nv", "float8e4nv", 3, 7},
                       Row{DType::F16, "fp16", "float16", 10, 15}}) {
    EXPECT_EQ(ir::sigName(r.t), r.sig);
    EXPECT_EQ(ir::tlName(r.t), r.tl);
    EXPECT_EQ(ir::parseSigDType(r.sig), r.t);
    EXPECT_EQ(ir::parseTlDType(r.tl), r.t);
    EXPECT_EQ(ir::mantissaBits(r.t), r.mantissa) << r.sig;
    EXPECT_EQ(ir::exponentBias(r.t), r.bias) << r.sig;
    EXPECT_TRUE(ir::isFloat(r.t));
  }
  for (DType t : {DType::F8E4B15, DType::F8E4B8, DType::F8E5B16}) {
    EXPECT_EQ(ir::bitWidth(t), 8);
    EXPECT_TRUE(ir::isFp8(t));
  }
  EXPECT_FALSE(ir::isFp8(DType::F16));
  EXPECT_EQ(ir::parseTlDType("float8e4m3fnuz"), DType::F8E4B8);
  EXPECT_EQ(ir::parseTlDType("float8e5m2fnuz"), DType::F8E5B16);
}

TEST(Fp8Formats, E4B15) {
  const DType t = DType::F8E4B15;
  EXPECT_EQ(num::encodeSmallFloat(t, 1.0), 0x78u);
  EXPECT_EQ(num::decodeSmallFloat(t, 0x7E), 1.75);
  EXPECT_TRUE(std::isnan(num::decodeSmallFloat(t, 0x7F)));
  EXPECT_TRUE(std::isnan(num::decodeSmallFloat(t, 0xFF)));
  EXPECT_EQ(num::encodeSmallFloat(t, 1.8), 0x7Eu); // saturates below the NaN encoding
  EXPECT_EQ(num::encodeSmallFloat(t, INFINITY), 0x7Eu);
  EXPECT_EQ(num::encodeSmallFloat(t, -100.0), 0xFEu);
  EXPECT_EQ(num::encodeSmallFloat(t, NAN), 0x7Fu);
  EXPECT_EQ(num::decodeSmallFloat(t, 0x01), std::ldexp(1.0, -17));  // 2^(1-15-3)
  EXPECT_EQ(num::encodeSmallFloat(t, std::ldexp(1.0, -18)), 0x00u); // tie with 0 -> even
  EXPECT_EQ(num::encodeSmallFloat(t, std::ldexp(3.0, -18)), 0x02u); // tie 1.5 ulp -> even 2
  EXPECT_EQ(num::encodeSmallFloat(t, -0.0), 0x80u);                 // -0 kept
}

TEST(Fp8Formats, FnuzFormats) {
  for (DType t : {DType::F8E4B8, DType::F8E5B16}) {
    EXPECT_TRUE(std::isnan(num::decodeSmallFloat(t, 0x80)));
    EXPECT_EQ(num::encodeSmallFloat(t, NAN), 0x80u);
    EXPECT_EQ(num::encodeSmallFloat(t, -0.0), 0x00u); // no -0: 0x80 is the NaN
    EXPECT_EQ(num::encodeSmallFloat(t, -1e-30), 0x00u);
    EXPECT_EQ(num::encodeSmallFloat(t, INFINITY), 0x7Fu);
    EXPECT_EQ(num::encodeSmallFloat(t, -INFINITY), 0xFFu);
    EXPECT_FALSE(std::isnan(num::decodeSmallFloat(t, 0x7F))); // the all-ones exponent is finite
  }
  EXPECT_EQ(num::decodeSmallFloat(DType::F8E4B8, 0x7F), 240.0);
  EXPECT_EQ(num::decodeSmallFloat(DType::F8E5B16, 0x7F), 57344.0);
  EXPECT_EQ(num::encodeSmallFloat(DType::F8E4B8, 1.0), 0x40u);
  EXPECT_EQ(num::encodeSmallFloat(DType::F8E5B16, 1.0), 0x40u);
  EXPECT_EQ(num::decodeSmallFloat(DType::F8E4B8, 0x01), std::ldexp(1.0, -10));
  EXPECT_EQ(num::decodeSmallFloat(DType::F8E5B16, 0x01), std::ldexp(1.0, -17));
  EXPECT_EQ(num::encodeSmallFloat(DType::F8E4B8, 1.0625), 0x40u); // tie -> even mantissa
  EXPECT_EQ(num::encodeSmallFloat(DType::F8E4B8, 1.1875), 0x42u); // tie -> even mantissa
  EXPECT_EQ(num::encodeSmallFloat(DType::F8E4B8, 1.1, num::Rounding::TowardZero), 0x40u);
  // Casts from fp16 are exact in both directions for every finite value.
  for (DType t : {DType::F8E4B15, DType::F8E4B8, DType::F8E5B16})
    for (uint32_t b = 0; b < 256; ++b) {
      double v = num::decodeSmallFloat(t, b);
      if (std::isnan(v)) continue;
      EXPECT_EQ(num::castFloatToFloat(v, t, DType::F16), v) << ir::sigName(t) << " " << b;
      EXPECT_EQ(num::castFloatToSmallFloat(v, DType::F16, t), b) << ir::sigName(t) << " " << b;
    }
}
