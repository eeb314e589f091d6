// tl.dot_scaled: the product of two operands in microscaling formats (OCP MX: e2m1 packed two to a
// byte, e4m3, e5m2, or plain bf16 / fp16, each optionally scaled by one e8m0 exponent per group of
// 16 or 32 elements along K). Built from the Tile IR ops other builtins use, as Triton does on GPUs
// without scaled MMA instructions: the nibbles are unpacked, the values decoded to fp32 and
// multiplied by their group's scale, both operands rounded to fp16 (when either format is fp16) or
// bf16, then one ordinary dot accumulating in fp32. So the interpreter and every code generator run
// it without an op of its own.
#include "specialize/TlDotScaled.h"

#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

#include <cmath>
#include <limits>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

struct Format {
  const char* name;
  DType elem;    // the element type the values have in the dot's operand
  DType storage; // the unsigned integer type the values may also arrive as (bits)
  bool fp4;      // e2m1: two values per uint8, the first in the low nibble
};

constexpr Format kFormats[] = {
    {"e2m1", DType::U8, DType::U8, true},      {"e4m3", DType::F8E4M3, DType::U8, false},
    {"e5m2", DType::F8E5M2, DType::U8, false}, {"bf16", DType::BF16, DType::U16, false},
    {"fp16", DType::F16, DType::U16, false},
};

using ir::shapeText;

const Format& parseFormat(const Val& v, SourceLoc loc, const std::string& what) {
  if (v.kind == Val::Kind::String)
    for (const Format& f : kFormats)
      if (v.s == f.name) return f;
  raiseError(loc, "tl.dot_scaled's " + what +
                      " must be 'e2m1', 'e4m3', 'e5m2', 'bf16' or 'fp16', got " + describe(v));
}

/// One operand as the caller gave it, and what is known of it.
struct Operand {
  std::string side; // "lhs" / "rhs"
  const Format* format = nullptr;
  ir::Value* v = nullptr;
  bool kPack = true;
  ir::Value* scale = nullptr;
  SourceLoc loc, scaleLoc;
};

/// Splits each byte of `x` into its two nibbles (low first) along `axis`, which doubles.
ir::Value* unpackNibbles(Specializer& sp, ir::Value* x, size_t axis, SourceLoc loc) {
  const ir::Type& t = x->type();
  ir::Value* lo = sp.b.binary(OpCode::And, x, sp.constant(Val::integer(0xF), t));
  ir::Value* hi = sp.b.binary(OpCode::Shr, x, sp.constant(Val::integer(4), t));
  std::vector<int64_t> joined = t.shape;
  joined.push_back(2);
  ir::Value* j = sp.b.create1(OpCode::Join, {lo, hi}, t.withShape(joined));
  // The pair axis goes right after `axis`, so that the reshape interleaves the nibbles there.
  size_t rank = t.shape.size();
  if (axis + 1 != rank) {
    std::vector<int64_t> order, permuted;
    for (size_t i = 0; i <= rank; ++i) {
      if (i == axis + 1) order.push_back(int64_t(rank));
      if (i < rank) order.push_back(int64_t(i));
    }
    for (int64_t d : order) permuted.push_back(joined[size_t(d)]);
    j = sp.b.create1(OpCode::Permute, {j}, t.withShape(permuted),
                     {ir::attr::Permute::make::order(order)});
  }
  std::vector<int64_t> out = t.shape;
  out[axis] *= 2;
  return sp.reshape(j, out, loc);
}

/// e2m1 nibbles (uint8, 0..15) to fp32: the exponent and mantissa bits move into fp32's, the
/// bias is corrected for normal values, and the one subnormal (0b001) is 0.5.
ir::Value* decodeE2M1(Specializer& sp, ir::Value* nibbles, SourceLoc loc) {
  ir::Value* u = sp.cast(nibbles, DType::U32, loc);
  const ir::Type& t = u->type();
  auto k = [&](int64_t v) { return sp.constant(Val::integer(v), t); };
  ir::Value* em = sp.b.binary(OpCode::And, u, k(0x7));
  ir::Value* bits = sp.b.binary(OpCode::Shl, em, k(22));
  ir::Value* normal = sp.b.binary(OpCode::Add, bits, k(int64_t(126) << 23));
  ir::Value* mag = sp.b.create1(OpCode::Select, {sp.b.cmp("eq", em, k(1)), k(0x3F000000), bits}, t);
  mag = sp.b.create1(OpCode::Select, {sp.b.cmp("ge", em, k(2)), normal, mag}, t);
  ir::Value* sign = sp.b.binary(OpCode::Shl, sp.b.binary(OpCode::And, u, k(0x8)), k(28));
  return sp.cast(sp.b.binary(OpCode::Or, mag, sign), DType::F32, loc, /*bitcast=*/true);
}

/// fp8 bits (e4m3: bias 7, 0x7F NaN, no infinities; e5m2: bias 15, IEEE-style infinities and
/// NaNs) to fp32 by integer operations, so that targets without fp8 conversions (sm_80) decode
/// them too: normal values move their exponent and mantissa bits into fp32's and correct the
/// bias; subnormals are their mantissa times 2^(1 - bias - mantissa bits), exactly.
ir::Value* decodeFp8(Specializer& sp, ir::Value* bytes, bool e4m3, SourceLoc loc) {
  int manBits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  ir::Value* u = sp.cast(bytes, DType::U32, loc);
  const ir::Type& t = u->type();
  auto k = [&](int64_t v) { return sp.constant(Val::integer(v), t); };
  ir::Value* em = sp.b.binary(OpCode::And, u, k(0x7F));
  ir::Value* normal = sp.b.binary(OpCode::Add, sp.b.binary(OpCode::Shl, em, k(23 - manBits)),
                                  k(int64_t(127 - bias) << 23));
  ir::Value* subF = sp.b.binary(
      OpCode::Mul, sp.cast(em, DType::F32, loc),
      sp.constant(Val::real(std::ldexp(1.0, 1 - bias - manBits)), t.withElem(DType::F32)));
  ir::Value* sub = sp.cast(subF, DType::U32, loc, /*bitcast=*/true);
  ir::Value* mag =
      sp.b.create1(OpCode::Select, {sp.b.cmp("lt", em, k(int64_t(1) << manBits)), sub, normal}, t);
  if (e4m3) {
    mag = sp.b.create1(OpCode::Select, {sp.b.cmp("eq", em, k(0x7F)), k(0x7FC00000), mag}, t);
  } else {
    ir::Value* special =
        sp.b.binary(OpCode::Or, sp.b.binary(OpCode::Shl, sp.b.binary(OpCode::And, em, k(3)), k(21)),
                    k(0x7F800000));
    mag = sp.b.create1(OpCode::Select, {sp.b.cmp("ge", em, k(0x7C)), special, mag}, t);
  }
  ir::Value* sign = sp.b.binary(OpCode::Shl, sp.b.binary(OpCode::And, u, k(0x80)), k(24));
  return sp.cast(sp.b.binary(OpCode::Or, mag, sign), DType::F32, loc, /*bitcast=*/true);
}

/// The operand's elements in [M, K] (lhs) or [K, N] (rhs) order: fp4 unpacked into one nibble a
/// byte, fp8 as uint8 bits, bf16 / fp16 as that type.
ir::Value* operandValues(Specializer& sp, const Operand& op) {
  ir::Value* x = op.v;
  size_t rank = x->type().shape.size();
  if (op.format->fp4) {
    // Packed along K by default, else along M (lhs) / N (rhs).
    bool lhs = op.side == "lhs";
    size_t axis = op.kPack == lhs ? rank - 1 : rank - 2;
    return unpackNibbles(sp, x, axis, op.loc);
  }
  // fp8 stays as its bits (decodeFp8 reads them); bf16 / fp16 become that type.
  return sp.cast(x, op.format->storage == DType::U8 ? DType::U8 : op.format->elem, op.loc,
                 /*bitcast=*/true);
}

/// The decoded scale of each element of a [..., X, K] operand (X: M or N) as fp32: 2^(s - 127)
/// for e8m0 bytes (0xFF is NaN unless fast_math, 0 gives 0 as Triton's upcast does), the value
/// itself for float scales; each scale repeated over its group of `factor` elements along K.
ir::Value* expandScale(Specializer& sp, ir::Value* s, int64_t factor, bool fastMath,
                       SourceLoc loc) {
  ir::Value* f;
  if (s->type().elem == DType::U8) {
    ir::Value* u = sp.cast(s, DType::U32, loc);
    ir::Value* bits = sp.b.binary(OpCode::Shl, u, sp.constant(Val::integer(23), u->type()));
    f = sp.cast(bits, DType::F32, loc, /*bitcast=*/true);
    if (!fastMath) {
      ir::Value* isNan = sp.b.cmp("eq", s, sp.constant(Val::integer(0xFF), s->type()));
      ir::Value* nan = sp.constant(Val::real(std::numeric_limits<double>::quiet_NaN()), f->type());
      f = sp.b.create1(OpCode::Select, {isNan, nan, f}, f->type());
    }
  } else {
    f = sp.cast(s, DType::F32, loc);
  }
  std::vector<int64_t> shape = f->type().shape;
  f = sp.expandDims(f, int64_t(shape.size()), loc);
  std::vector<int64_t> wide = shape;
  wide.push_back(factor);
  f = sp.broadcastTo(f, wide, loc);
  shape.back() *= factor;
  return sp.reshape(f, shape, loc);
}

/// Swaps the last two axes.
ir::Value* transposeLast(Specializer& sp, ir::Value* x) {
  std::vector<int64_t> shape = x->type().shape, order;
  for (size_t i = 0; i < shape.size(); ++i) order.push_back(int64_t(i));
  std::swap(order[order.size() - 1], order[order.size() - 2]);
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return sp.b.create1(OpCode::Permute, {x}, x->type().withShape(shape),
                      {ir::attr::Permute::make::order(order)});
}

} // namespace

Val tlDotScaled(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"lhs", "lhs_scale", "lhs_format", "rhs", "rhs_scale", "rhs_format",
                     "acc=", "fast_math=", "lhs_k_pack=", "rhs_k_pack=", "out_dtype="});
  Operand ops[2];
  for (int i = 0; i < 2; ++i) {
    Operand& op = ops[i];
    op.side = i == 0 ? "lhs" : "rhs";
    op.loc = a.loc(op.side);
    op.format =
        &parseFormat(a.get(op.side + "_format"), a.loc(op.side + "_format"), op.side + "_format");
    const Val& v = a.get(op.side);
    if (!v.isRuntime() || !v.type().isValue() || v.type().isPointer() || v.type().isScalar())
      raiseError(op.loc, "tl.dot_scaled's " + op.side + " must be a tensor, got " + kindName(v));
    op.v = v.v;
    DType dt = op.v->type().elem;
    if (dt != op.format->elem && dt != op.format->storage) {
      std::string want = op.format->fp4 ? std::string("uint8 (two e2m1 values a byte)")
                                        : std::string(ir::tlName(op.format->elem)) + " or " +
                                              std::string(ir::tlName(op.format->storage));
      raiseError(op.loc, "tl.dot_scaled's " + op.side + " in format '" + op.format->name +
                             "' must be " + want + ", got " + std::string(ir::tlName(dt)));
    }
    std::string packName = op.side + "_k_pack";
    op.kPack = !a.has(packName) || sp.constBool(a.get(packName), a.loc(packName), packName);
    if (!op.kPack && !op.format->fp4)
      raiseError(a.loc(packName), "tl.dot_scaled: only e2m1 operands can be packed along a "
                                  "dimension other than K (" +
                                      op.side + " is '" + op.format->name + "')");
    std::string scaleName = op.side + "_scale";
    op.scaleLoc = a.loc(scaleName);
    if (a.has(scaleName)) {
      const Val& s = a.get(scaleName);
      if (!s.isRuntime() || !s.type().isValue() || s.type().isPointer() || s.type().isScalar())
        raiseError(op.scaleLoc, "tl.dot_scaled's " + scaleName + " must be a tensor or None, got " +
                                    kindName(s));
      DType st = s.type().elem;
      if (st != DType::U8 && !ir::isFloat(st))
        raiseError(op.scaleLoc, "tl.dot_scaled's " + scaleName +
                                    " must be uint8 (e8m0 exponents) or a float type, got " +
                                    std::string(ir::tlName(st)));
      op.scale = s.v;
    }
  }
  const std::vector<int64_t>&sl = ops[0].v->type().shape, &sr = ops[1].v->type().shape;
  if ((sl.size() != 2 && sl.size() != 3) || sl.size() != sr.size())
    raiseError(loc, "tl.dot_scaled needs two 2-D (or two 3-D batched) tensors, got " +
                        ops[0].v->type().str() + " and " + ops[1].v->type().str());
  size_t r = sl.size();
  if (r == 3 && sl[0] != sr[0])
    raiseError(loc, "tl.dot_scaled batch sizes differ: " + shapeText(sl) + " @ " + shapeText(sr));

  ir::Value* vals[2] = {operandValues(sp, ops[0]), operandValues(sp, ops[1])};
  const std::vector<int64_t>&ul = vals[0]->type().shape, &ur = vals[1]->type().shape;
  int64_t M = ul[r - 2], K = ul[r - 1], Kr = ur[r - 2], N = ur[r - 1];
  if (K != Kr)
    raiseError(loc, "tl.dot_scaled: the operands' reduction dimensions hold different numbers of "
                    "elements: lhs " +
                        shapeText(sl) + " ('" + ops[0].format->name +
                        "') has K = " + std::to_string(K) + ", rhs " + shapeText(sr) + " ('" +
                        ops[1].format->name + "') has K = " + std::to_string(Kr));

  // Each scale holds one value per group of 16 or 32 elements along K; both groups agree.
  int64_t factor = 0;
  for (int i = 0; i < 2; ++i) {
    const Operand& op = ops[i];
    if (!op.scale) continue;
    const std::vector<int64_t>& ss = op.scale->type().shape;
    int64_t rows = i == 0 ? M : N;
    int64_t groups = ss.back();
    int64_t f = groups > 0 && K % groups == 0 ? K / groups : 0;
    // The shape a scale with `g` groups along K would have.
    auto wanted = [&](int64_t g) {
      std::vector<int64_t> w;
      if (r == 3) w.push_back(sl[0]);
      w.push_back(rows);
      w.push_back(g);
      return shapeText(w);
    };
    if (f != 16 && f != 32)
      raiseError(op.scaleLoc, "tl.dot_scaled's " + op.side + "_scale has shape " + shapeText(ss) +
                                  ": one scale per 16 or 32 elements of K = " + std::to_string(K) +
                                  " is needed, e.g. " + wanted(K / 32));
    bool fits = ss.size() == r && ss[r - 2] == rows && (r == 2 || ss[0] == sl[0]);
    if (!fits)
      raiseError(op.scaleLoc, "tl.dot_scaled's " + op.side + "_scale must have shape " +
                                  wanted(K / f) + ", got " + shapeText(ss));
    if (factor && factor != f)
      raiseError(op.scaleLoc, "tl.dot_scaled's scales group different numbers of elements: lhs " +
                                  std::to_string(factor) + ", rhs " + std::to_string(f));
    factor = f;
  }

  bool fastMath =
      a.has("fast_math") && sp.constBool(a.get("fast_math"), a.loc("fast_math"), "fast_math");
  bool fp16 =
      std::string(ops[0].format->name) == "fp16" || std::string(ops[1].format->name) == "fp16";
  DType compute = fp16 ? DType::F16 : DType::BF16;
  ir::Value* in[2];
  for (int i = 0; i < 2; ++i) {
    const Operand& op = ops[i];
    ir::Value* x = vals[i];
    if (op.format->fp4)
      x = decodeE2M1(sp, x, op.loc);
    else if (op.format->storage == DType::U8)
      x = decodeFp8(sp, x, op.format->elem == DType::F8E4M3, op.loc);
    else if (op.scale)
      x = sp.cast(x, DType::F32, op.loc);
    if (op.scale) {
      ir::Value* s = expandScale(sp, op.scale, factor, fastMath, op.scaleLoc);
      if (i == 1) s = transposeLast(sp, s);
      x = sp.b.binary(OpCode::Mul, x, s);
    }
    in[i] = sp.cast(x, compute, op.loc);
  }

  if (a.has("out_dtype")) {
    DType out = sp.constDType(a.get("out_dtype"), a.loc("out_dtype"), "tl.dot_scaled's out_dtype");
    if (out != DType::F32)
      raiseError(a.loc("out_dtype"), "tl.dot_scaled accumulates in float32 only, got out_dtype=" +
                                         std::string(ir::tlName(out)));
  }
  std::vector<int64_t> outShape = ul;
  outShape[r - 1] = N;
  ir::Type outType = ir::Type::tensor(DType::F32, outShape);
  ir::Value* acc;
  if (a.has("acc")) {
    acc = sp.requireTensorOrScalar(a.get("acc"), a.loc("acc"), "tl.dot_scaled's acc");
    if (acc->type().shape != outShape || acc->type().elem != DType::F32)
      raiseError(a.loc("acc"), "tl.dot_scaled's acc is " + acc->type().str() +
                                   " but the product is " + outType.str());
  } else {
    acc = sp.constant(Val::integer(0), outType);
  }
  return Val::runtime(sp.b.create1(OpCode::Dot, {in[0], in[1], acc}, outType,
                                   {ir::attr::Dot::make::inputPrecision("ieee")}));
}

} // namespace ww::specialize
