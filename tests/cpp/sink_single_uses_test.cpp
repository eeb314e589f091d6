// codegen::sinkSingleUses: a pure instruction whose result has one use moves down to just before
// it, chains of them together, within straight-line code; and a masked elementwise kernel gets
// each element's compare next to its select on sm_100a (assembled by ptxas).
#include "codegen/Lowering.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <string>

namespace ww {
namespace {

std::string sunk(std::string body) {
  codegen::sinkSingleUses(body);
  return body;
}

TEST(SinkSingleUses, MaskChainMovesToEachSelect) {
  // Two elements of `(n + j) < len ? x * s : 0`, lowered op by op; n, len and s are read again
  // after (no operand's life ends in the chain).
  const std::string in = "\tadd.s32 %r3, %r1, 0;\n"
                         "\tadd.s32 %r4, %r1, 1;\n"
                         "\tsetp.lt.s32 %p1, %r3, %r2;\n"
                         "\tsetp.lt.s32 %p2, %r4, %r2;\n"
                         "\tmul.f32 %f3, %f1, %f9;\n"
                         "\tmul.f32 %f4, %f2, %f9;\n"
                         "\tselp.f32 %f5, %f3, 0f00000000, %p1;\n"
                         "\tselp.f32 %f6, %f4, 0f00000000, %p2;\n"
                         "\tst.global.v2.f32 [%rd1], {%f5, %f6};\n"
                         "\tst.global.v2.f32 [%rd2], {%r1, %r2};\n"
                         "\tst.global.f32 [%rd3], %f9;\n";
  EXPECT_EQ(sunk(in), "\tmul.f32 %f3, %f1, %f9;\n"
                      "\tadd.s32 %r3, %r1, 0;\n"
                      "\tsetp.lt.s32 %p1, %r3, %r2;\n"
                      "\tselp.f32 %f5, %f3, 0f00000000, %p1;\n"
                      "\tmul.f32 %f4, %f2, %f9;\n"
                      "\tadd.s32 %r4, %r1, 1;\n"
                      "\tsetp.lt.s32 %p2, %r4, %r2;\n"
                      "\tselp.f32 %f6, %f4, 0f00000000, %p2;\n"
                      "\tst.global.v2.f32 [%rd1], {%f5, %f6};\n"
                      "\tst.global.v2.f32 [%rd2], {%r1, %r2};\n"
                      "\tst.global.f32 [%rd3], %f9;\n");
}

TEST(SinkSingleUses, NothingCrossesControlFlowAsmOrAsynchronousWrites) {
  for (const char* wall :
       {"$L_for_1:\n", "\t@%p1 bra $L_x;\n", "\tsetmaxnreg.inc.sync.aligned.u32 152;\n",
        "\t// begin inline asm\n", "\t{\n", "\t}\n", "\t.reg .b64 %x;\n", "\tret;\n",
        "\twgmma.wait_group.sync.aligned 0;\n", "\ttcgen05.wait::ld.sync.aligned;\n"}) {
    const std::string in = std::string("\tadd.s32 %r3, %r1, 1;\n") + wall +
                           "\tst.global.b32 [%rd1], %r9;\n\tst.global.b32 [%rd2], %r3;\n";
    EXPECT_EQ(sunk(in), in) << wall;
  }
}

TEST(SinkSingleUses, StaysWhereMovingWouldBeWrongOrCostly) {
  for (const char* lines : {
           // an operand rewritten before the use (a loop-carried register)
           "\tadd.s32 %r3, %r1, 1;\n\tmov.u32 %r1, %r8;\n\tst.global.b32 [%rd2], %r3;\n",
           // an operand written under a guard before the use
           "\tadd.s32 %r3, %r1, 1;\n\t@%p4 mov.u32 %r1, %r8;\n\tst.global.b32 [%rd2], %r3;\n",
           // an operand written by a vector load before the use
           "\tadd.s32 %r3, %r1, 1;\n\tld.shared.v2.b32 {%r1, %r7}, [%r8];\n"
           "\tst.global.b32 [%rd2], %r3;\n",
           // two uses of the result
           "\tadd.s32 %r3, %r1, 1;\n\tst.global.b32 [%rd1], %r9;\n\tst.global.b32 [%rd2], %r3;\n"
           "\tst.global.b32 [%rd3], %r3;\n",
           // two operands ending here: moving would keep both live instead of the one result
           "\tld.global.b32 %r1, [%rd5];\n\tld.global.b32 %r2, [%rd6];\n"
           "\tadd.s32 %r3, %r1, %r2;\n\tst.global.b32 [%rd1], %r9;\n\tst.global.b32 [%rd2], %r3;\n",
           // guarded, memory, two destinations
           "\t@%p5 add.s32 %r3, %r1, 1;\n\tst.global.b32 [%rd1], %r9;\n\tst.global.b32 [%rd2], "
           "%r3;\n",
           "\tld.global.b32 %r3, [%rd5];\n\tst.global.b32 [%rd1], %r9;\n\tst.global.b32 [%rd2], "
           "%r3;\n",
           "\tsetp.lt.s32 %p1|%p2, %r1, %r2;\n\tst.global.b32 [%rd1], %r9;\n\t@%p1 bra $L_y;\n",
           // a special register's read (a clock taken before the work it times)
           "\tmov.u64 %rd3, %clock64;\n\tst.global.b32 [%rd1], %r9;\n\tst.global.b64 [%rd2], "
           "%rd3;\n",
       }) {
    EXPECT_EQ(sunk(lines), lines) << lines;
  }
}

TEST(SinkSingleUses, MaskedActivationKeepsEachCompareBesideItsSelect) {
  const char* src = R"(
import warpweave.language as tl
import warpweave as ww


@ww.jit
def masked_silu(X, Y, start, n, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.arange(0, ROWS)
    cols = start + tl.arange(0, COLS)
    x = tl.load(X + rows[:, None] * COLS + tl.arange(0, COLS)[None, :])
    y = x / (1.0 + tl.exp(-x))
    y = tl.where(rows[:, None] + cols[None, :] < n, y, 0.0)
    tl.store(Y + rows[:, None] * COLS + tl.arange(0, COLS)[None, :], y)
)";
  CompileRequest req;
  req.files.push_back({"silu.py", src});
  req.kernel = "masked_silu";
  req.signature = parseSignature("X:*fp32:16, Y:*fp32:16, start:i32, n:i32, ROWS=128, COLS=64");
  req.options.target = Target::SM100a;
  req.options.numWarps = 4;
  req.stage = Stage::Cubin;
  CompiledKernel k = compile(req);
  ASSERT_FALSE(k.cubin.empty());
  // Each compare is followed by its select within a few lines, but for the last element's,
  // where the row index and the bound are read for the last time (moving it would keep both
  // live).
  const std::string& ptx = k.ptx;
  size_t setps = 0, near = 0;
  for (size_t at = ptx.find("\tsetp.lt.s32"); at != std::string::npos;
       at = ptx.find("\tsetp.lt.s32", at + 1)) {
    ++setps;
    size_t sel = ptx.find("\tselp.f32", at);
    ASSERT_NE(sel, std::string::npos);
    size_t between = 0;
    for (size_t c = at; c < sel; ++c) between += ptx[c] == '\n';
    near += between <= 1;
  }
  EXPECT_EQ(setps, 64u);
  EXPECT_GE(near, setps - 1) << ptx;
}

TEST(SinkSingleUses, TwoClockReadsAroundAStoreStayTwoReadsInPlace) {
  // tlx.clock64() before and after the work it times: two reads of %clock64 (not one shared
  // register), the first before the store and the second after it, on both targets.
  const char* src = R"(
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx
import warpweave as ww


@ww.jit
def timed_store(out, elapsed, value):
    start = tlx.clock64()
    tl.store(out, value)
    end = tlx.clock64()
    tl.store(elapsed, end - start)
)";
  for (Target t : {Target::SM90a, Target::SM100a}) {
    CompileRequest req;
    req.files.push_back({"timed.py", src});
    req.kernel = "timed_store";
    req.signature = parseSignature("out:*i32:16, elapsed:*i64:16, value:i32");
    req.options.target = t;
    req.options.numWarps = 1;
    req.stage = Stage::Cubin;
    CompiledKernel k = compile(req);
    ASSERT_FALSE(k.cubin.empty());
    const std::string& ptx = k.ptx;
    size_t first = ptx.find("%clock64;");
    size_t store = ptx.find("st.global.b32");
    ASSERT_NE(first, std::string::npos);
    size_t second = ptx.find("%clock64;", first + 1);
    ASSERT_NE(second, std::string::npos) << ptx;
    EXPECT_LT(first, store);
    EXPECT_GT(second, store);
  }
}

} // namespace
} // namespace ww
