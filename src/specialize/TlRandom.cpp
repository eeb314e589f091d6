// Triton's counter-based random numbers (tl.randint, tl.randint4x, tl.rand, tl.rand4x, tl.randn,
// tl.randn4x, tl.philox, tl.philox_impl, tl.uint_to_uniform_float, tl.pair_uniform_to_normal; all
// also reached as tl.random.*). They are pure functions of (seed, offset), so they decompose into
// the integer and float ops every back end already has (umulhi, mul, add, xor, casts, select,
// log / sqrt / cos / sin): the interpreter and the GPU run the same Philox rounds and give the
// same bits. The decomposition follows Triton's definitions step by step, including its type
// promotions, so that results are bit-identical to Triton's for the same seed and offsets.
#include "specialize/TlRandom.h"

#include "specialize/SpecializerImpl.h"

#include <array>

namespace ww::specialize {

using ast::BinOpKind;
using ir::DType;
using ir::OpCode;

namespace {

/// The Philox constants for one counter width: the Weyl increments of the key (golden ratio,
/// sqrt(3) - 1) and the round multipliers (Salmon et al., "Parallel random numbers: as easy as
/// 1, 2, 3", SC'11). 64-bit counters take the 4x64 variant's.
struct PhiloxConstants {
  uint64_t keyA, keyB, roundA, roundB;
};

PhiloxConstants philoxConstants(DType counter) {
  if (counter == DType::U32) return {0x9E3779B9u, 0xBB67AE85u, 0xD2511F53u, 0xCD9E8D57u};
  return {0x9E3779B97F4A7C15ull, 0xBB67AE8584CAA73Bull, 0xD2E7470EE14C6C93ull,
          0xCA5A826395121157ull};
}

/// The `n_rounds=` argument: a compile-time count (default 10), as the rounds are unrolled.
int64_t roundsArg(Specializer& sp, const BoundArgs& a, const std::string& fn) {
  if (!a.has("n_rounds")) return kPhiloxDefaultRounds;
  int64_t n =
      sp.constInt(a.get("n_rounds"), a.loc("n_rounds"), fn + "'s n_rounds", a.expr("n_rounds"));
  if (n < 0)
    raiseError(a.loc("n_rounds"), fn + "'s n_rounds must be >= 0, got " + std::to_string(n));
  return n;
}

/// A run-time value of an integer argument (python ints take Triton's literal types); floats and
/// pointers are refused with `what`.
ir::Value* integerArg(Specializer& sp, const Val& v, SourceLoc loc, const std::string& what) {
  if (v.kind == Val::Kind::Float ||
      (v.isRuntime() && v.type().isValue() && (v.type().isPointer() || ir::isFloat(v.type().elem))))
    raiseError(loc, what + " must be an integer, got " + kindName(v));
  return sp.requireTensorOrScalar(v, loc, what);
}

Val bin(Specializer& sp, BinOpKind op, const Val& x, const Val& y, SourceLoc loc) {
  return sp.evalBinOp(op, x, y, loc);
}

/// tl.umulhi(x, y) after Triton's binary promotion of its operands.
Val umulhi(Specializer& sp, const Val& x, const Val& y, SourceLoc loc) {
  DType dt = sp.computationType(x.type().elem, false, y.type().elem, false, false, loc, "umulhi");
  auto [p, q] = sp.unify(x, y, loc, dt, "umulhi");
  return Val::runtime(sp.b.binary(OpCode::Umulhi, p, q));
}

/// Calls tl.NAME on `args`, so that the random functions compute exactly what the same call in a
/// kernel computes.
Val callTlFunction(Specializer& sp, const char* name, std::vector<Val> args, SourceLoc loc) {
  CallSite cs;
  cs.loc = loc;
  cs.callee = std::string("tl.") + name;
  cs.args = std::move(args);
  cs.argLocs.assign(cs.args.size(), loc);
  cs.argExprs.assign(cs.args.size(), nullptr);
  return sp.callTl(name, cs);
}

using Four = std::array<Val, 4>;

/// The counter parameters' names, for BoundArgs and messages.
constexpr std::array<const char*, 4> kCounterNames = {"c0", "c1", "c2", "c3"};

Val tuple4(const Four& x) {
  return Val::tuple({x[0], x[1], x[2], x[3]});
}

/// `rounds` Philox rounds on counter (c0, c1, c2, c3) with key (k0, k1). c0's type (uint32 or
/// uint64) picks the constants; the other operands combine with it under Triton's promotion.
Four philoxRounds(Specializer& sp, Four c, Val k0, Val k1, int64_t rounds, SourceLoc loc,
                  const std::string& fn) {
  DType d = c[0].type().elem;
  if (d != DType::U32 && d != DType::U64)
    raiseError(loc, fn + " needs uint32 or uint64 counters, got c0 of " + c[0].type().str());
  PhiloxConstants k = philoxConstants(d);
  auto constant = [&](uint64_t x) {
    return Val::runtime(sp.b.constInt(static_cast<int64_t>(x), ir::Type::scalar(d)));
  };
  Val roundA = constant(k.roundA), roundB = constant(k.roundB);
  Val keyA = constant(k.keyA), keyB = constant(k.keyB);
  for (int64_t r = 0; r < rounds; ++r) {
    // Each round multiplies c0 and c2 into 2*w-bit products: their high halves, mixed with the
    // other two words and the key, become the new c0 / c2; their low halves the new c1 / c3.
    Four n;
    n[0] = bin(sp, BinOpKind::BitXor,
               bin(sp, BinOpKind::BitXor, umulhi(sp, roundB, c[2], loc), c[1], loc), k0, loc);
    n[2] = bin(sp, BinOpKind::BitXor,
               bin(sp, BinOpKind::BitXor, umulhi(sp, roundA, c[0], loc), c[3], loc), k1, loc);
    n[1] = bin(sp, BinOpKind::Mul, roundB, c[2], loc);
    n[3] = bin(sp, BinOpKind::Mul, roundA, c[0], loc);
    c = n;
    k0 = bin(sp, BinOpKind::Add, k0, keyA, loc);
    k1 = bin(sp, BinOpKind::Add, k1, keyB, loc);
    sp.checkKernelSize(loc);
  }
  return c;
}

/// tl.philox: a 64-bit integer seed keys Philox on the four counters (all 32-bit or all 64-bit,
/// reinterpreted as unsigned). 32-bit counters take the seed's low and high words as the key;
/// 64-bit ones the whole seed and a [1] zero, as Triton does (so scalar counters give [1]
/// results there, as in Triton).
Four philox(Specializer& sp, const Val& seedArg, SourceLoc seedLoc, std::array<Val, 4> cs,
            const std::array<SourceLoc, 4>& locs, int64_t rounds, SourceLoc loc,
            const std::string& fn) {
  ir::Value* seed = sp.cast(integerArg(sp, seedArg, seedLoc, fn + "'s seed"), DType::U64, seedLoc);
  Four c;
  for (size_t i = 0; i < 4; ++i) {
    if (cs[i].isRuntime() && cs[i].type().isValue() && cs[i].type().isPointer())
      raiseError(locs[i],
                 fn + "'s counters must be numbers or tensors of numbers, got " + kindName(cs[i]));
    c[i] = Val::runtime(sp.requireTensorOrScalar(cs[i], locs[i], fn + "'s " + kCounterNames[i]));
  }
  int width = ir::bitWidth(c[0].type().elem);
  if (width != 32 && width != 64)
    raiseError(locs[0], fn + " needs 32- or 64-bit counters, got c0 of " + c[0].type().str());
  DType d = width == 32 ? DType::U32 : DType::U64;
  Val lo, hi;
  if (d == DType::U32) {
    lo = Val::runtime(sp.cast(seed, DType::U32, seedLoc));
    Val shifted = bin(sp, BinOpKind::RShift, Val::runtime(seed), Val::integer(32), seedLoc);
    hi = Val::runtime(sp.cast(shifted.v, DType::U32, seedLoc));
  } else {
    lo = Val::runtime(seed);
    hi = Val::runtime(sp.b.constInt(0, ir::Type::tensor(DType::U64, {1})));
  }
  for (size_t i = 0; i < 4; ++i) c[i] = Val::runtime(sp.cast(c[i].v, d, locs[i], true));
  return philoxRounds(sp, c, lo, hi, rounds, loc, fn);
}

/// tl.randint4x: offset's low 32 bits are the first counter word, its high ones (for 64-bit
/// offsets, shifted as its signedness says) the second; the other two are zero.
Four randint4x(Specializer& sp, const BoundArgs& a, const std::string& fn) {
  SourceLoc loc = a.call().loc;
  int64_t rounds = roundsArg(sp, a, fn);
  ir::Value* offset = integerArg(sp, a.get("offset"), a.loc("offset"), fn + "'s offset");
  ir::Value* lo = sp.cast(offset, DType::U32, a.loc("offset"));
  ir::Value* zero = sp.constant(Val::integer(0), lo->type());
  ir::Value* hi = zero;
  if (ir::bitWidth(offset->type().elem) > 32)
    hi = sp.cast(
        bin(sp, BinOpKind::RShift, Val::runtime(offset), Val::integer(32), a.loc("offset")).v,
        DType::U32, a.loc("offset"));
  std::array<SourceLoc, 4> locs;
  locs.fill(a.loc("offset"));
  return philox(sp, a.get("seed"), a.loc("seed"),
                {Val::runtime(lo), Val::runtime(hi), Val::runtime(zero), Val::runtime(zero)}, locs,
                rounds, loc, fn);
}

/// tl.uint_to_uniform_float: a random 32- or 64-bit integer to a float32 in [0, 1). The integer
/// is read as signed and folded onto the non-negative ones (x < 0 -> ~x), then scaled by the
/// largest factor that keeps the largest of them below 1.0 after rounding.
Val uniformFloat(Specializer& sp, const Val& xArg, SourceLoc loc, const std::string& fn) {
  ir::Value* x = sp.requireTensorOrScalar(xArg, loc, fn + "'s input");
  DType d = x->type().elem;
  if (x->type().isPointer() ||
      (d != DType::U32 && d != DType::I32 && d != DType::U64 && d != DType::I64))
    raiseError(loc, fn + " needs uint32, int32, uint64 or int64 integers, got " + kindName(xArg));
  bool wide = ir::bitWidth(d) == 64;
  Val s = Val::runtime(sp.cast(x, wide ? DType::I64 : DType::I32, loc, true));
  Val negative = sp.evalCompare(ast::CmpOpKind::Lt, s, Val::integer(0), loc);
  Val flipped = sp.evalUnary(ast::UnaryOpKind::Invert, s, loc);
  Val folded =
      Val::runtime(sp.b.create1(OpCode::Select, {negative.v, flipped.v, s.v}, s.v->type()));
  double scale = wide ? 1.0842020432385337e-19 : 4.6566127342e-10;
  return bin(sp, BinOpKind::Mul, folded, Val::real(scale), loc);
}

/// tl.pair_uniform_to_normal: the Box-Muller transform of two uniforms into two standard normals
/// (u1 clamped to 1e-7 so that log stays finite).
std::pair<Val, Val> boxMuller(Specializer& sp, const Val& u1Arg, const Val& u2, SourceLoc loc) {
  Val u1 = Val::runtime(sp.minMax(true, Val::real(1.0e-7), u1Arg, loc));
  Val theta = bin(sp, BinOpKind::Mul, Val::real(6.283185307179586), u2, loc);
  Val r = callTlFunction(
      sp, "sqrt",
      {bin(sp, BinOpKind::Mul, Val::real(-2.0), callTlFunction(sp, "log", {u1}, loc), loc)}, loc);
  return {bin(sp, BinOpKind::Mul, r, callTlFunction(sp, "cos", {theta}, loc), loc),
          bin(sp, BinOpKind::Mul, r, callTlFunction(sp, "sin", {theta}, loc), loc)};
}

} // namespace

Val tlRandom(Specializer& sp, const std::string& name, CallSite& call) {
  const std::string& fn = call.callee;
  SourceLoc loc = call.loc;
  if (name == "philox_impl") {
    BoundArgs a(call, {"c0", "c1", "c2", "c3", "k0", "k1", "n_rounds="});
    Four c;
    for (size_t i = 0; i < 4; ++i) {
      const char* p = kCounterNames[i];
      c[i] = Val::runtime(integerArg(sp, a.get(p), a.loc(p), fn + "'s " + p));
    }
    Val k0 = Val::runtime(integerArg(sp, a.get("k0"), a.loc("k0"), fn + "'s k0"));
    Val k1 = Val::runtime(integerArg(sp, a.get("k1"), a.loc("k1"), fn + "'s k1"));
    return tuple4(philoxRounds(sp, c, k0, k1, roundsArg(sp, a, fn), a.loc("c0"), fn));
  }
  if (name == "philox") {
    BoundArgs a(call, {"seed", "c0", "c1", "c2", "c3", "n_rounds="});
    return tuple4(philox(
        sp, a.get("seed"), a.loc("seed"), {a.get("c0"), a.get("c1"), a.get("c2"), a.get("c3")},
        {a.loc("c0"), a.loc("c1"), a.loc("c2"), a.loc("c3")}, roundsArg(sp, a, fn), loc, fn));
  }
  if (name == "uint_to_uniform_float") {
    BoundArgs a(call, {"x"});
    return uniformFloat(sp, a.get("x"), a.loc("x"), fn);
  }
  if (name == "pair_uniform_to_normal") {
    BoundArgs a(call, {"u1", "u2"});
    auto [n1, n2] = boxMuller(sp, a.get("u1"), a.get("u2"), loc);
    return Val::tuple({n1, n2});
  }
  BoundArgs a(call, {"seed", "offset", "n_rounds="});
  Four ints = randint4x(sp, a, fn);
  if (name == "randint") return ints[0];
  if (name == "randint4x") return tuple4(ints);
  if (name == "rand") return uniformFloat(sp, ints[0], loc, fn);
  if (name == "rand4x") {
    Four u;
    for (size_t i = 0; i < 4; ++i) u[i] = uniformFloat(sp, ints[i], loc, fn);
    return tuple4(u);
  }
  Val u1 = uniformFloat(sp, ints[0], loc, fn), u2 = uniformFloat(sp, ints[1], loc, fn);
  auto [n1, n2] = boxMuller(sp, u1, u2, loc);
  if (name == "randn") return n1;
  // randn4x
  Val u3 = uniformFloat(sp, ints[2], loc, fn), u4 = uniformFloat(sp, ints[3], loc, fn);
  auto [n3, n4] = boxMuller(sp, u3, u4, loc);
  return Val::tuple({n1, n2, n3, n4});
}

} // namespace ww::specialize
