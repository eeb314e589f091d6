// Reliability of the runtime's readers of untrusted input (issue 20): kernel metadata JSON comes
// from disk-cache files that anything may have written, so any text must end in
// std::invalid_argument, never a crash (deep nesting once overflowed the stack) or an undefined
// conversion.
#include "warpweave/runtime.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using namespace ww;

namespace {

std::string nested(char open, char close, int depth, const std::string& inner) {
  return std::string(static_cast<size_t>(depth), open) + inner +
         std::string(static_cast<size_t>(depth), close);
}

std::string withField(const std::string& field) {
  return R"({"name": "k", "params": [], )" + field + "}";
}

std::string messageOf(const std::string& json) {
  try {
    parseKernelMetadata(json);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

} // namespace

TEST(MetadataReliability, DeepArraysAreRefusedWithoutRecursingIntoThem) {
  for (int depth : {65, 1000, 1000000}) {
    std::string msg = messageOf(withField("\"x\": " + nested('[', ']', depth, "1")));
    EXPECT_NE(msg.find("nesting deeper than 64 levels"), std::string::npos) << depth << ": " << msg;
  }
  // Unclosed: refused at the bound too, not at the end of the text.
  EXPECT_NE(messageOf(std::string(1000000, '[')).find("nesting deeper"), std::string::npos);
}

TEST(MetadataReliability, DeepObjectsAreRefused) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\": ";
  deep += "1" + std::string(100000, '}');
  EXPECT_NE(messageOf(deep).find("nesting deeper than 64 levels"), std::string::npos);
}

TEST(MetadataReliability, NestingWithinTheBoundStillParses) {
  // The document is one level: 63 more fit.
  CompiledKernel k = parseKernelMetadata(withField("\"x\": " + nested('[', ']', 63, "1")));
  EXPECT_EQ(k.name, "k");
  EXPECT_THROW(parseKernelMetadata(withField("\"x\": " + nested('[', ']', 64, "1"))),
               std::invalid_argument);
}

TEST(MetadataReliability, NumbersOutsideIntAreRefused) {
  for (const char* v : {"1e300", "-1e300", "4294967296", "2147483648", "4.5", "nan", "inf"}) {
    std::string msg = messageOf(withField(std::string("\"num_warps\": ") + v));
    EXPECT_NE(msg.find("\"num_warps\" must be an integer that fits in 32 bits"), std::string::npos)
        << v << ": " << msg;
  }
  std::string params = R"({"name": "k", "params": [{"name": "x", "type": "i32", "size": 1e20}]})";
  EXPECT_NE(messageOf(params).find("\"size\" must be an integer"), std::string::npos);
  EXPECT_EQ(parseKernelMetadata(withField("\"num_warps\": 2147483647")).numWarps, 2147483647);
}

TEST(MetadataReliability, TruncatedAndGarbledTextIsRefused) {
  const std::string good = R"({"name": "k", "params": [{"name": "x", "type": "i32", "size": 4}],
                              "folded": ["B"], "num_warps": 4})";
  ASSERT_EQ(parseKernelMetadata(good).params.size(), 1u);
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_THROW(parseKernelMetadata(good.substr(0, n)), std::invalid_argument) << n;
  for (const char* bad : {"{\"name\": \"k\\u12", "{\"name\": \"k\\", "\"k\"", "", "{]",
                          "{\"name\": \"k\", \"params\": {}}", "{\"name\": 5}"})
    EXPECT_THROW(parseKernelMetadata(bad), std::invalid_argument) << bad;
}
