// libdevice: CUDA's math functions (Triton's triton.language.extra.libdevice, __nv_* semantics) as
// sequences of existing Tile IR ops: the interpreter and every code generator run the same
// sequence, so a function needs no op, interpreter rule or lowering of its own. Hardware
// approximations (sin.approx, ex2.approx, ...) are used only by the fast_* functions; the others
// are range reduction plus polynomials fitted for this file (relative least squares on Chebyshev
// nodes, checked against mpmath), computed in fp32 with fma, so their accuracy does not depend on
// the target. fp16 / bf16 arguments are computed in fp32 and rounded back, as Triton does.
// Accuracy classes are documented in docs/language.md and measured by
// tests/python/test_libdevice.py.
#include "specialize/TlLibdevice.h"

#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLog2e = 1.44269504088896340736;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

struct Ctx;

/// A floating-point value of the function's compute type (fp32 or fp64, the call's shape).
struct V {
  Ctx* c;
  ir::Value* v;
};
/// An integer value (any integer type of the call's shape).
struct I {
  Ctx* c;
  ir::Value* v;
};
/// A boolean (i1) value.
struct B {
  Ctx* c;
  ir::Value* v;
};

struct Ctx {
  Specializer& sp;
  SourceLoc loc;
  ir::Type ft; // fp32 or fp64 with the call's shape

  bool f64() const { return ft.elem == DType::F64; }
  ir::Type type(DType d) const { return ft.withElem(d); }
  DType uintType() const { return f64() ? DType::U64 : DType::U32; }
  DType sintType() const { return f64() ? DType::I64 : DType::I32; }
  V k(double d) { return {this, sp.constant(Val::real(d), ft)}; }
  I ki(int64_t x, DType d) { return {this, sp.constant(Val::integer(x), type(d))}; }
  ir::Value* bin(OpCode op, ir::Value* a, ir::Value* b) { return sp.b.binary(op, a, b); }
  ir::Value* un(OpCode op, ir::Value* a) { return sp.b.create1(op, {a}, a->type()); }
};

// ---- float arithmetic --------------------------------------------------------------------------
V operator+(V a, V b) {
  return {a.c, a.c->bin(OpCode::Add, a.v, b.v)};
}
V operator-(V a, V b) {
  return {a.c, a.c->bin(OpCode::Sub, a.v, b.v)};
}
V operator*(V a, V b) {
  return {a.c, a.c->bin(OpCode::Mul, a.v, b.v)};
}
V operator/(V a, V b) {
  return {a.c, a.c->bin(OpCode::Div, a.v, b.v)};
}
V operator+(V a, double b) {
  return a + a.c->k(b);
}
V operator-(V a, double b) {
  return a - a.c->k(b);
}
V operator*(V a, double b) {
  return a * a.c->k(b);
}
V operator+(double a, V b) {
  return b.c->k(a) + b;
}
V operator-(double a, V b) {
  return b.c->k(a) - b;
}
V operator*(double a, V b) {
  return b.c->k(a) * b;
}
V operator/(double a, V b) {
  return b.c->k(a) / b;
}
V operator-(V a) {
  return {a.c, a.c->un(OpCode::Neg, a.v)};
}
V fma(V a, V b, V c) {
  return {a.c, a.c->sp.b.create1(OpCode::Fma, {a.v, b.v, c.v}, a.v->type())};
}
V fma(V a, double b, V c) {
  return fma(a, a.c->k(b), c);
}
V fma(V a, V b, double c) {
  return fma(a, b, a.c->k(c));
}
V fma(V a, double b, double c) {
  return fma(a, a.c->k(b), a.c->k(c));
}
V fabs(V a) {
  return {a.c, a.c->un(OpCode::Abs, a.v)};
}
V floorv(V a) {
  return {a.c, a.c->un(OpCode::Floor, a.v)};
}
V ceilv(V a) {
  return {a.c, a.c->un(OpCode::Ceil, a.v)};
}
V sqrtv(V a) {
  return {a.c, a.c->sp.b.create1(OpCode::Sqrt, {a.v}, a.v->type(),
                                 {ir::attr::Sqrt::make::approx(false)})};
}
V fmax(V a, V b) {
  return {a.c, a.c->bin(OpCode::Max, a.v, b.v)};
} // the non-NaN operand
V fmin(V a, V b) {
  return {a.c, a.c->bin(OpCode::Min, a.v, b.v)};
}

B cmp(const char* p, V a, V b) {
  return {a.c, a.c->sp.b.cmp(p, a.v, b.v)};
}
B operator<(V a, V b) {
  return cmp("lt", a, b);
}
B operator<=(V a, V b) {
  return cmp("le", a, b);
}
B operator>(V a, V b) {
  return cmp("gt", a, b);
}
B operator>=(V a, V b) {
  return cmp("ge", a, b);
}
B operator==(V a, V b) {
  return cmp("eq", a, b);
}
B operator!=(V a, V b) {
  return cmp("ne", a, b);
} // unordered: true for NaN
B operator<(V a, double b) {
  return a < a.c->k(b);
}
B operator<=(V a, double b) {
  return a <= a.c->k(b);
}
B operator>(V a, double b) {
  return a > a.c->k(b);
}
B operator>=(V a, double b) {
  return a >= a.c->k(b);
}
B operator==(V a, double b) {
  return a == a.c->k(b);
}
B operator!=(V a, double b) {
  return a != a.c->k(b);
}
B operator&&(B a, B b) {
  return {a.c, a.c->bin(OpCode::And, a.v, b.v)};
}
B operator||(B a, B b) {
  return {a.c, a.c->bin(OpCode::Or, a.v, b.v)};
}
B operator!(B a) {
  return {a.c, a.c->un(OpCode::Not, a.v)};
}
B isnan(V a) {
  return a != a;
}

V sel(B p, V a, V b) {
  return {a.c, a.c->sp.b.create1(OpCode::Select, {p.v, a.v, b.v}, a.v->type())};
}
V sel(B p, double a, V b) {
  return sel(p, b.c->k(a), b);
}
V sel(B p, V a, double b) {
  return sel(p, a, a.c->k(b));
}
I sel(B p, I a, I b) {
  return {a.c, a.c->sp.b.create1(OpCode::Select, {p.v, a.v, b.v}, a.v->type())};
}

/// c0 + x * (c1 + x * (...)), by fma.
V poly(V x, std::initializer_list<double> cs) {
  std::vector<double> c(cs);
  V r = x.c->k(c.back());
  for (size_t i = c.size() - 1; i-- > 0;) r = fma(r, x, c[i]);
  return r;
}

// ---- integers ----------------------------------------------------------------------------------
DType dt(I a) {
  return a.v->type().elem;
}
I operator+(I a, I b) {
  return {a.c, a.c->bin(OpCode::Add, a.v, b.v)};
}
I operator-(I a, I b) {
  return {a.c, a.c->bin(OpCode::Sub, a.v, b.v)};
}
I operator*(I a, I b) {
  return {a.c, a.c->bin(OpCode::Mul, a.v, b.v)};
}
I operator&(I a, I b) {
  return {a.c, a.c->bin(OpCode::And, a.v, b.v)};
}
I operator|(I a, I b) {
  return {a.c, a.c->bin(OpCode::Or, a.v, b.v)};
}
I operator^(I a, I b) {
  return {a.c, a.c->bin(OpCode::Xor, a.v, b.v)};
}
I operator<<(I a, I b) {
  return {a.c, a.c->bin(OpCode::Shl, a.v, b.v)};
}
I operator>>(I a, I b) {
  return {a.c, a.c->bin(OpCode::Shr, a.v, b.v)};
} // arithmetic when signed
I operator+(I a, int64_t b) {
  return a + a.c->ki(b, dt(a));
}
I operator-(I a, int64_t b) {
  return a - a.c->ki(b, dt(a));
}
I operator*(I a, int64_t b) {
  return a * a.c->ki(b, dt(a));
}
I operator&(I a, int64_t b) {
  return a & a.c->ki(b, dt(a));
}
I operator<<(I a, int64_t b) {
  return a << a.c->ki(b, dt(a));
}
I operator>>(I a, int64_t b) {
  return a >> a.c->ki(b, dt(a));
}
I operator-(I a) {
  return {a.c, a.c->un(OpCode::Neg, a.v)};
}
I operator~(I a) {
  return {a.c, a.c->un(OpCode::Not, a.v)};
}
B icmp(const char* p, I a, I b) {
  return {a.c, a.c->sp.b.cmp(p, a.v, b.v)};
}
B icmp(const char* p, I a, int64_t b) {
  return icmp(p, a, a.c->ki(b, dt(a)));
}
I as(I a, DType d) {
  return {a.c, a.c->sp.cast(a.v, d, a.c->loc)};
}
I bitsAs(I a, DType d) {
  return {a.c, a.c->sp.cast(a.v, d, a.c->loc, /*bitcast=*/true)};
}
I toInt(V a, DType d) {
  return {a.c, a.c->sp.cast(a.v, d, a.c->loc)};
} // truncates, saturates
V toFloat(I a) {
  return {a.c, a.c->sp.cast(a.v, a.c->ft.elem, a.c->loc)};
}
/// The value's bits as U32 / U64, and back.
I bits(V a) {
  return {a.c, a.c->sp.cast(a.v, a.c->uintType(), a.c->loc, true)};
}
V fromBits(I a) {
  if (dt(a) != a.c->uintType() && dt(a) != a.c->sintType()) a = as(a, a.c->uintType());
  return {a.c, a.c->sp.cast(a.v, a.c->ft.elem, a.c->loc, true)};
}

// ---- building blocks ---------------------------------------------------------------------------
int mantBits(Ctx& c) {
  return c.f64() ? 52 : 23;
}
int64_t signMask(Ctx& c) {
  return c.f64() ? int64_t(uint64_t(1) << 63) : int64_t(0x80000000u);
}
double two(int e) {
  return std::ldexp(1.0, e);
}
double maxFinite(Ctx& c) {
  return c.f64() ? std::numeric_limits<double>::max() : double(std::numeric_limits<float>::max());
}

V copysignv(V mag, V sgn) {
  Ctx& c = *mag.c;
  I m = bits(mag) & ~signMask(c);
  I s = bits(sgn) & signMask(c);
  return fromBits(m | s);
}
B signbitB(V x) {
  return icmp("ne", bits(x) & signMask(*x.c), 0);
}
B isinfB(V x) {
  return fabs(x) == kInf;
}
B isfiniteB(V x) {
  return fabs(x) < kInf;
}
/// Round to nearest even: adding and removing 2^mant leaves the integer part of |x| < 2^mant.
V rintv(V x) {
  Ctx& c = *x.c;
  double big = two(mantBits(c));
  V a = fabs(x);
  V r = (a + big) - big;
  return copysignv(sel(a < big, r, a), x);
}
V truncv(V x) {
  double big = two(mantBits(*x.c));
  V a = fabs(x);
  return copysignv(sel(a < big, floorv(a), a), x);
}
/// Round half away from zero.
V roundv(V x) {
  V a = fabs(x);
  V t = floorv(a);
  V r = sel(a - t >= 0.5, t + 1.0, t);
  return copysignv(sel(a < two(mantBits(*x.c)), r, a), x);
}
/// 2^n for integer-valued n in [-2*emax + 1, 2 * emax] as two factors (a product overflows or
/// underflows gradually, as ldexp does).
std::pair<V, V> pow2Pair(I n) {
  Ctx& c = *n.c;
  int mb = mantBits(c), bias = c.f64() ? 1023 : 127;
  I n1 = n >> 1;
  I n2 = n - n1;
  auto p = [&](I e) { return fromBits(bitsAs((e + bias) << mb, c.uintType())); };
  return {p(n1), p(n2)};
}
/// x * 2^n (ldexp / scalbn) for any integer n: clamped so that three factors reach every result.
V ldexpv(V x, I n) {
  Ctx& c = *x.c;
  int64_t lim = c.f64() ? 2200 : 330;
  I nn = as(n, c.sintType());
  nn = sel(icmp("gt", nn, lim), c.ki(lim, c.sintType()), nn);
  nn = sel(icmp("lt", nn, -lim), c.ki(-lim, c.sintType()), nn);
  // Split into thirds so that each factor is a normal power of two.
  I third = {&c, c.bin(OpCode::Div, nn.v, c.ki(3, c.sintType()).v)};
  I rest = nn - third - third;
  auto [a1, a2] = pow2Pair(third + third);
  auto [b1, b2] = pow2Pair(rest);
  V r = x * a1 * a2 * b1 * b2;
  return r;
}

/// e^r - 1 for |r| <= ln2/2 (~1 ulp): r + r^2 q(r), q fitted for fp32 and for fp64.
V expmCore(V r) {
  V q = r.c->f64() ? poly(r, {0.5, 0.1666666666666667, 0.04166666666666661, 0.008333333333326006,
                              0.0013888888888923393, 0.00019841269875286896, 2.4801587233725637e-05,
                              2.7557254794575413e-06, 2.755736043009973e-07, 2.510547348610389e-08,
                              2.088598114239972e-09})
                   : poly(r, {0.5, 0.1666666716337204, 0.041666463017463684, 0.008333373814821243,
                              0.0013933839509263635, 0.00019849566160701215});
  return fma(r * r, q, r);
}
/// A constant split into a head of the compute type and the rest (for Cody-Waite reductions).
std::pair<double, double> split(Ctx& c, double hiPart, double loPart) {
  if (c.f64()) return {hiPart, loPart};
  float hi = float(hiPart);
  return {hi, float((hiPart - double(hi)) + loPart)};
}
struct Reduced {
  V n; // integer-valued
  V r;
};
Reduced reduceLn2(V x) {
  Ctx& c = *x.c;
  V n = floorv(fma(x, kLog2e, 0.5));
  auto [hi, lo] = split(c, kLn2, 2.3190468138462996e-17);
  V r = fma(-n, c.k(hi), x);
  r = fma(-n, c.k(lo), r);
  return {n, r};
}
V expv(V x) {
  Ctx& c = *x.c;
  V xc = c.f64() ? fmin(fmax(x, c.k(-746.0)), c.k(710.0)) : fmin(fmax(x, c.k(-104.0)), c.k(89.0));
  Reduced rd = reduceLn2(xc);
  V p = expmCore(rd.r) + 1.0;
  auto [s1, s2] = pow2Pair(toInt(rd.n, c.sintType()));
  V r = p * s1 * s2;
  return sel(isnan(x), x, r);
}
/// e^x * e^y with y small against x (for erfc's e^-x^2).
V expm1v(V x) {
  Ctx& c = *x.c;
  V xc = c.f64() ? fmin(fmax(x, c.k(-40.0)), c.k(710.0)) : fmin(fmax(x, c.k(-18.0)), c.k(89.0));
  Reduced rd = reduceLn2(xc);
  V em = expmCore(rd.r);
  auto [s1, s2] = pow2Pair(toInt(rd.n, c.sintType()));
  V t = s1 * s2;
  V r = fma(t, em, t - 1.0);
  r = sel(x == 0.0, x, r);
  return sel(isnan(x), x, r);
}
/// 2^x: the exponent's integer part scales exactly, its fraction f (exact: x - n) goes through
/// e^(f ln 2) with ln 2 in two parts.
V exp2v(V x) {
  Ctx& c = *x.c;
  V xc =
      c.f64() ? fmin(fmax(x, c.k(-1080.0)), c.k(1030.0)) : fmin(fmax(x, c.k(-152.0)), c.k(130.0));
  V n = floorv(xc + 0.5);
  V f = xc - n;
  auto [hi, lo] = split(c, kLn2, 2.3190468138462996e-17);
  V p = expmCore(fma(f, c.k(hi), f * lo)) + 1.0;
  auto [s1, s2] = pow2Pair(toInt(n, c.sintType()));
  return sel(isnan(x), x, p * s1 * s2);
}
/// log(x) for finite x > 0 as x's exponent and the log of its mantissa in [sqrt(1/2), sqrt(2))
/// (fp64): log x = e ln 2 + lm.
struct LogParts64 {
  V e, lm;
};
LogParts64 logParts64(V x) {
  Ctx& c = *x.c;
  const int64_t sqrtHalf = 0x3fe6a09e667f3bcdll; // bits of sqrt(1/2)
  B sub = x < two(-1022);
  V xs = sel(sub, x * two(54), x);
  I ix = bitsAs(bits(xs), DType::I64) - sqrtHalf;
  I e = (ix >> 52) - as(sel(sub, c.ki(54, DType::I64), c.ki(0, DType::I64)), DType::I64);
  V m = fromBits((ix & 0xfffffffffffffll) + sqrtHalf);
  V f = m - 1.0;
  V s = f / (m + 1.0);
  V s2 = s + s;
  V z = s * s;
  V q = poly(z, {0.3333333333333333, 0.19999999999999996, 0.14285714285717924, 0.11111111109856468,
                 0.09090909307413914, 0.07692286737563853, 0.06667855043257874, 0.05843264799416645,
                 0.05948192279592784});
  return {toFloat(e), fma(s2 * z, q, s2)};
}
/// log(x) for finite x > 0 (fp64, ~1 ulp); other inputs give anything.
V logCore64(V x) {
  Ctx& c = *x.c;
  auto [ef, lm] = logParts64(x);
  return fma(ef, c.k(kLn2), fma(ef, c.k(2.3190468138462996e-17), lm));
}
V logCore(V x) {
  Ctx& c = *x.c;
  if (c.f64()) return logCore64(x);
  B sub = x < two(-126);
  V xs = sel(sub, x * two(23), x);
  I ix = bitsAs(bits(xs), DType::I32) - 0x3f3504f3; // mantissa in [sqrt(1/2), sqrt(2))
  I e = (ix >> 23) - as(sel(sub, c.ki(23, DType::I32), c.ki(0, DType::I32)), DType::I32);
  V m = fromBits((ix & 0x7fffff) + 0x3f3504f3);
  V f = m - 1.0;
  V s = f / (m + 1.0);
  V s2 = s + s;
  V z = s * s;
  V q = poly(z, {0.3333333432674408, 0.19999998807907104, 0.1428588181734085, 0.1109539121389389,
                 0.09687331318855286});
  V lm = fma(s2 * z, q, s2);
  V ef = toFloat(e);
  float hi = float(kLn2);
  float lo = float(kLn2 - double(hi));
  return fma(ef, c.k(hi), fma(ef, c.k(lo), lm));
}
V logv(V x) {
  V r = logCore(x);
  r = sel(x == kInf, kInf, r);
  r = sel(x == 0.0, -kInf, r);
  return sel(x < 0.0 || isnan(x), kNan, r);
}
/// log2(x) (fp64): the exponent plus the mantissa's log times log2(e), exact at powers of two.
V log2v64(V x) {
  Ctx& c = *x.c;
  auto [ef, lm] = logParts64(x);
  V r = fma(lm, c.k(kLog2e), fma(lm, c.k(2.0355273740931033e-17), ef));
  r = sel(x == kInf, kInf, r);
  r = sel(x == 0.0, -kInf, r);
  return sel(x < 0.0 || isnan(x), kNan, r);
}
V log1pv(V x) {
  V u = x + 1.0;
  V d = u - 1.0;
  V r = sel(d == 0.0, x, logv(u) * (x / d));
  return sel(x == kInf, kInf, r);
}
/// Odd function from its value on |x|: f(x) = sign(x) f(|x|) (keeps -0).
template <typename F> V odd(V x, F f) {
  return copysignv(f(fabs(x)), x);
}

// ---- trigonometric -----------------------------------------------------------------------------
V sinPoly(V r, V z) {
  V q = r.c->f64()
            ? poly(z, {-0.16666666666666666, 0.008333333333333333, -0.00019841269841269836,
                       2.7557319223980565e-06, -2.5052108382122678e-08, 1.6059042712818025e-10,
                       -7.646952760574398e-13, 2.7908216832785023e-15})
            : poly(z, {-0.1666666716337204, 0.008333333767950535, -0.00019841267203446478,
                       2.755593186520855e-06, -2.480035554697224e-08});
  return fma(r * z, q, r);
}
V cosPoly(V z) {
  V q = z.c->f64()
            ? poly(z, {0.041666666666666664, -0.001388888888888889, 2.4801587301587298e-05,
                       -2.755731922398323e-07, 2.0876756986210484e-09, -1.1470745036098665e-11,
                       4.779371875471223e-14, -1.5516029332590644e-16})
            : poly(z, {0.0416666679084301, -0.0013888889225199819, 2.48015858232975e-05,
                       -2.755632806383801e-07, 2.0696913072271172e-09});
  return fma(z * z, q, fma(z, -0.5, 1.0));
}
/// x = j pi/2 + r with |r| <= pi/4, reduced in fp64 (three-part pi/2): accurate while
/// |x| < 2^30; the quadrant j mod 4 as i32.
std::pair<V, I> reducePio2(V x) {
  Ctx& c = *x.c;
  ir::Type dT = c.type(DType::F64);
  Ctx d{c.sp, c.loc, dT};
  V xd{&d, c.sp.cast(x.v, DType::F64, c.loc)};
  V j = rintv(xd * (2 / kPi));
  const double p1 = 1.5707963267948966, p2 = 6.123233995736766e-17, p3 = -1.4973849048591698e-33;
  V r = fma(-j, d.k(p1), xd);
  r = fma(-j, d.k(p2), r);
  r = fma(-j, d.k(p3), r);
  V jm = j - floorv(j * 0.25) * 4.0;
  I q{&c, c.sp.cast(jm.v, DType::I32, c.loc)};
  // Beyond the reduction's range r is meaningless: kept bounded so results stay in range.
  V rf{&c, c.sp.cast(r.v, c.ft.elem, c.loc)};
  rf = fmin(fmax(rf, c.k(-0.8)), c.k(0.8));
  return {rf, q};
}
V sinCos(V x, bool cosine) {
  auto [r, q] = reducePio2(x);
  V z = r * r;
  V s = sinPoly(r, z), co = cosPoly(z);
  if (cosine) q = q + 1;
  V v = sel(icmp("ne", q & 1, 0), co, s);
  v = sel(icmp("ne", q & 2, 0), -v, v);
  if (!cosine) v = sel(x == 0.0, x, v); // sin(-0) = -0
  return sel(isinfB(x), kNan, sel(isnan(x), x, v));
}
V tanv(V x) {
  auto [r, q] = reducePio2(x);
  V z = r * r;
  if (x.c->f64()) { // sin / cos (fp64 tan's series converges too slowly on [-pi/4, pi/4])
    V s = sinPoly(r, z), co = cosPoly(z);
    V v = sel(icmp("ne", q & 1, 0), -co / s, s / co);
    v = sel(x == 0.0, x, v);
    return sel(isinfB(x), kNan, sel(isnan(x), x, v));
  }
  V q7 = poly(z, {0.3333333432674408, 0.13333344459533691, 0.05396468564867973, 0.02191443182528019,
                  0.008589374832808971, 0.004478428978472948, -6.944467168068513e-05,
                  0.0018245336832478642});
  V t = fma(r * z, q7, r);
  V v = sel(icmp("ne", q & 1, 0), -1.0 / t, t);
  v = sel(x == 0.0, x, v);
  return sel(isinfB(x), kNan, sel(isnan(x), x, v));
}
/// sin(pi x) / cos(pi x): exact reduction x = j/2 + r.
V sinCosPi(V x0, bool cosine) {
  Ctx& c = *x0.c;
  // From 2^(mantissa + 1) on every value is an even integer: the same results as at 0.
  V x = sel(fabs(x0) >= two(mantBits(c) + 1), copysignv(c.k(0.0), x0), x0);
  V j = rintv(x * 2.0);
  V r = fma(j, -0.5, x); // exact
  V jm = j - floorv(j * 0.25) * 4.0;
  I q = toInt(jm, DType::I32);
  auto [hi, lo] = split(c, kPi, 1.2246467991473532e-16);
  V t = fma(r, c.k(hi), r * c.k(lo));
  V z = t * t;
  V s = sinPoly(t, z), co = cosPoly(z);
  if (cosine) q = q + 1;
  V v = sel(icmp("ne", q & 1, 0), co, s);
  v = sel(icmp("ne", q & 2, 0), -v, v);
  if (!cosine) v = copysignv(v, sel(v == 0.0, x, v)); // sinpi(-n) = -0
  return sel(isinfB(x0), kNan, sel(isnan(x0), x0, v));
}
/// atan on [0, inf]: t > tan(pi/8) goes through pi/4 + atan((t-1)/(t+1)), t > 1 through 1/t.
V atanPos(V t) {
  Ctx& c = *t.c;
  B big = t > 1.0;
  V u = sel(big, 1.0 / t, t);
  B mid = u > 0.41421356237309503;
  V w = sel(mid, (u - 1.0) / (u + 1.0), u);
  V z = w * w;
  V q = c.f64() ? poly(z, {-0.3333333333333333, 0.1999999999999976, -0.14285714285648513,
                           0.11111111104067817, -0.09090908700097429, 0.07692294850801248,
                           -0.06666397850975764, 0.058786219376119234, -0.05228219686459449,
                           0.04541519178970994, -0.03431445278649618, 0.016005137613806602})
                : poly(z, {-0.3333333432674408, 0.19999974966049194, -0.14284025132656097,
                           0.11069083958864212, -0.08607978373765945, 0.05005771294236183});
  V a = fma(w * z, q, w);
  a = sel(mid, a + kPi / 4, a);
  a = sel(big, c.k(kPi / 2) - a, a);
  return sel(t == kInf, kPi / 2, a);
}
V atan2v(V y, V x) {
  Ctx& c = *y.c;
  V ax = fabs(x), ay = fabs(y);
  V mx = fmax(ax, ay), mn = fmin(ax, ay);
  V r = mn / mx;
  r = sel(mx == 0.0, 0.0, r);
  r = sel(ax == kInf && ay == kInf, 1.0, r);
  V a = atanPos(r);
  a = sel(ay > ax, c.k(kPi / 2) - a, a);
  a = sel(signbitB(x), c.k(kPi) - a, a);
  a = copysignv(a, y);
  return sel(isnan(x) || isnan(y), kNan, a);
}
V asinPoly(V x) { // |x| <= 0.5
  V z = x * x;
  V q = x.c->f64() ? poly(z, {0.16666666666666646, 0.0750000000002359, 0.04464285709851086,
                              0.030381947697834883, 0.02237203628192254, 0.017355485982830352,
                              0.0139268595826107, 0.011897574824818008, 0.007691226415247055,
                              0.01638541917159768, -0.011366583159741308, 0.028638648052266125})
                   : poly(z, {0.1666666567325592, 0.07500100135803223, 0.044597379863262177,
                              0.031126810237765312, 0.01701379008591175, 0.03393280506134033});
  return fma(x * z, q, x);
}
V asinv(V x) {
  return odd(x, [](V a) {
    V s = sqrtv((1.0 - a) * 0.5);
    V big = kPi / 2 - 2.0 * asinPoly(s);
    return sel(a > 0.5, big, asinPoly(a));
  });
}
V acosv(V x) {
  Ctx& c = *x.c;
  V a = fabs(x);
  V s = sqrtv((1.0 - a) * 0.5);
  V far = 2.0 * asinPoly(s); // acos(|x|) for |x| > 0.5
  V r = sel(a > 0.5, sel(x < 0.0, c.k(kPi) - far, far), c.k(kPi / 2) - asinPoly(x));
  return sel(a > 1.0, kNan, r);
}

// ---- hyperbolic --------------------------------------------------------------------------------
V sinhv(V x) {
  if (x.c->f64())
    return odd(x, [](V a) {
      // (E + E / (E + 1)) / 2 with E = expm1(a); from 700 on, e^(a/2) squared.
      V e = expm1v(a);
      V small = (e + e / (e + 1.0)) * 0.5;
      V h = expv(a * 0.5);
      return sel(a < 700.0, small, (h * 0.5) * h);
    });
  return odd(x, [](V a) {
    V z = a * a;
    V q = poly(z, {0.1666666716337204, 0.008333333767950535, 0.0001984128321055323,
                   2.7553719519346487e-06, 2.5459796049176475e-08});
    V small = fma(a * z, q, a);
    V e = expv(a * 0.5);
    V h = (e * 0.5) * e; // e^a / 2 without overflowing early
    V big = h - 0.25 / h;
    return sel(a < 1.0, small, big);
  });
}
V coshv(V x) {
  V a = fabs(x);
  V e = expv(a * 0.5);
  V h = (e * 0.5) * e;
  return h + 0.25 / h;
}
V tanhv(V x) {
  if (x.c->f64())
    return odd(x, [](V a) {
      V e = expm1v(a * 2.0);
      return sel(a > 22.0, a.c->k(1.0), e / (e + 2.0));
    });
  return odd(x, [](V a) {
    V z = a * a;
    V q = poly(z, {-0.3333333432674408, 0.13333332538604736, -0.053968049585819244,
                   0.021865466609597206, -0.008824891410768032, 0.0034008503425866365,
                   -0.00096098892390728});
    V small = fma(a * z, q, a);
    V e = expm1v(a * 2.0);
    V big = 1.0 - 2.0 / (e + 2.0);
    return sel(a < 0.55, small, sel(a > 9.1, a.c->k(1.0), big));
  });
}
V asinhv(V x) {
  return odd(x, [](V a) {
    V z = a * a;
    V small = log1pv(a + z / (1.0 + sqrtv(1.0 + z)));
    V large = logv(a) + kLn2;
    return sel(a > (a.c->f64() ? two(28) : 4096.0), large, small);
  });
}
V acoshv(V x) {
  V t = x - 1.0;
  V small = log1pv(t + sqrtv(t * (x + 1.0)));
  V large = logv(x) + kLn2;
  V r = sel(x > (x.c->f64() ? two(28) : 4096.0), large, small);
  return sel(x < 1.0, kNan, r);
}
V atanhv(V x) {
  return odd(x, [](V a) { return log1pv((a + a) / (1.0 - a)) * 0.5; });
}

// ---- error function and gamma ------------------------------------------------------------------
V erfSmall(V x) { // |x| <= 1
  V q = poly(x * x, {1.128379225730896, -0.37612637877464294, 0.11283781379461288,
                     -0.026865355670452118, 0.005220809485763311, -0.0008480728138238192,
                     0.0001124087066273205, -9.593301911081653e-06});
  return x * q;
}
/// erfc(a) e^(a^2) for a >= 0.5 (erfcx): t P(t), t = 2 / (2 + a).
V erfcxLarge(V a) {
  V t = 2.0 / (a + 2.0);
  V p = poly(t, {0.282094806432724, 0.28209471702575684, 0.2468368262052536, 0.17622333765029907,
                 0.08467652648687363, -0.009825007990002632, -0.0402643196284771,
                 -0.06926876306533813, -0.059596989303827286, 0.25765642523765564,
                 -0.204356849193573, 0.053754329681396484});
  return t * p;
}
/// e^(-a^2) (sign -1) or e^(a^2) (sign 1) with a split so that the square is exact (a = hi + lo,
/// hi with half the significand's bits: 12 of fp32's, 26 of fp64's): the rounding of a^2 would
/// cost up to a^2 ulps.
V expSquare(V a, double sign) {
  int64_t keepHigh = a.c->f64() ? ~((int64_t(1) << 27) - 1) : int64_t(0xfffff000u);
  V hi = fromBits(bits(a) & keepHigh);
  V lo = a - hi;
  return expv((hi * hi) * sign) * expv((lo * (a + hi)) * sign);
}
V expNegSquare(V a) {
  return expSquare(a, -1.0);
}
/// fp64 erf(a) / a for |a| <= 1: a polynomial in a^2 - 1/2 (a Chebyshev fit made for this file,
/// relative error under 3e-16 on the interval).
V erfSmall64(V a) {
  return poly(a * a - 0.5,
              {0.9654687386698673, -0.2810721780454342, 0.07940998675593687, -0.018283884489152684,
               0.003480274496570158, -0.0005611894221209664, 7.829649688379886e-05,
               -9.614808641390195e-06, 1.0536323840680666e-06, -1.0420387617195658e-07,
               9.432320191926508e-09, -7.795898827002142e-10});
}
/// fp64 erfcx(a) = erfc(a) e^(a^2) for 1 <= a <= 27: polynomials in t = 1 / (1 + a) about the
/// middle of t's range, one for a in [1, 6] and one for [6, 27] (Chebyshev fits made for this
/// file, relative error under 7e-16). Past 27 erfc underflows and erf is 1 from 6 on.
V erfcxMid64(V a) {
  V t = 1.0 / (a + 1.0);
  V near = poly(t - 0.32142857142857145,
                {0.24402507744132426, 0.949037442927304, 0.5163801198196002, -0.3811531311271965,
                 -0.3045864623293666, 0.5935016827687956, -0.08091629651549172, -0.8426429183175072,
                 1.1692623029478684, 0.006360719821873834, -2.437220441836874, 4.01147650964859,
                 -1.3831933991213619, -7.286540325855537, 18.02135996475553, -17.48259074647631,
                 -15.284364042891715, 80.89026496037692, -95.35965186115287});
  V far = poly(t - 0.08928571428571429,
               {0.05505062345387053, 0.6706585169692983, 0.6213178972837899, 0.12716484474658507,
                -0.5679529132516931, -0.47043940049258304, 0.9944780335394807, 1.3873347063845016,
                -2.8636774733180275, -4.607587133611611, 11.962484741508309, 15.804315334160624,
                -60.37665847007472});
  return sel(a <= 6.0, near, far);
}
V erf64(V x) {
  return odd(x, [](V a) {
    V big = 1.0 - erfcxMid64(a) * expNegSquare(a);
    return sel(a <= 1.0, a * erfSmall64(a), sel(a >= 6.0, a.c->k(1.0), big));
  });
}
V erfc64(V x) {
  V a = fabs(x);
  V pos = sel(a <= 1.0, 1.0 - a * erfSmall64(a), erfcxMid64(a) * expNegSquare(a));
  pos = sel(a > 27.3, 0.0, pos);
  V r = sel(x < 0.0, 2.0 - pos, pos);
  return sel(isnan(x), x, r);
}
V erfv(V x) {
  if (x.c->f64()) return erf64(x);
  return odd(x, [](V a) {
    V big = 1.0 - erfcxLarge(a) * expNegSquare(a);
    return sel(a <= 1.0, erfSmall(a), sel(a > 4.0, a.c->k(1.0), big));
  });
}
V erfcv(V x) {
  if (x.c->f64()) return erfc64(x);
  V a = fabs(x);
  V pos = sel(a <= 0.5, 1.0 - erfSmall(a), erfcxLarge(a) * expNegSquare(a));
  pos = sel(a > 10.1, 0.0, pos);
  V r = sel(x < 0.0, 2.0 - pos, pos);
  return sel(isnan(x), x, r);
}
V erfcxv(V x) {
  V a = fabs(x);
  V ea = expSquare(a, 1.0);
  V pos = sel(a <= 0.5, (1.0 - erfSmall(a)) * ea, erfcxLarge(a));
  V e2 = ea * 2.0;
  V r = sel(x < 0.0, e2 - pos, pos);
  r = sel(x == -kInf, kInf, r);
  return sel(isnan(x), x, sel(x == kInf, 0.0, r));
}
/// erfinv through w = -log((1 - y)(1 + y)) = -log(z (2 - z)), z = 1 - y: the same kernel serves
/// erfcinv, whose z may be far below 2^-24.
V erfinvKernel(V w) {
  V a = poly(w - 2.5, {1.5014094114303589, 0.24664074182510376, -0.004177677910774946,
                       -0.0012537313159555197, 0.0002185762714361772, -4.389042715047253e-06,
                       -3.52187225871603e-06, 3.4301010032322665e-07, 2.795391118581847e-08});
  V sw = sqrtv(w);
  V b1 = poly(sw - 3.0, {2.832977056503296, 1.0016776323318481, 0.009436407126486301,
                         -0.007667921017855406, 0.005747406743466854, -0.0035169196780771017,
                         0.0013265024172142148, -9.842058352660388e-05, -0.00016265668091364205,
                         7.979948713909835e-05, -1.585259997227695e-05, 1.2073826383129926e-06});
  V b2 = poly(sw - 8.0, {7.8771138191223145, 1.007606863975525, -0.00046982415369711816,
                         1.9104436432826333e-05, 1.1918655218323693e-06, -5.091178536531515e-07,
                         1.2136690941133566e-07, -1.7557818310365292e-08});
  return sel(w < 5.0, a, sel(sw < 6.0, b1, b2));
}
V erfinvv(V y) {
  V a = fabs(y);
  V w = -logv((1.0 - a) * (1.0 + a));
  V r = erfinvKernel(w) * a;
  r = sel(a == 1.0, kInf, sel(a > 1.0, kNan, r));
  return copysignv(r, y);
}
V erfcinvv(V z) {
  // erfcinv(z) = erfinv(1 - z); for z > 1 the mirror -erfcinv(2 - z).
  B upper = z > 1.0;
  V zz = sel(upper, 2.0 - z, z);
  V w = -logv(zz * (2.0 - zz));
  V r = erfinvKernel(w) * (1.0 - zz);
  r = sel(upper, -r, r);
  r = sel(z == 0.0, kInf, sel(z == 2.0, -kInf, r));
  return sel(z < 0.0 || z > 2.0 || isnan(z), kNan, r);
}
/// 0.5 erfc(-x / sqrt 2), with the rounding error d of u = -x / sqrt 2 corrected to first order
/// (erfc(u + d) ~ erfc(u) (1 - d (2u + 1/u)) for u > 1): uncorrected it costs ~2 u^2 d ulp.
V normcdfv(V x) {
  Ctx& c = *x.c;
  float hi = float(0.70710678118654752);
  float lo = float(0.70710678118654752 - double(hi));
  V u = x * -double(hi);
  V d = fma(-x, c.k(hi), -u) + (-x) * double(lo);
  V e = erfcv(u) * 0.5;
  V corr = e * (1.0 - d * (u * 2.0 + 1.0 / u));
  return sel(u > 1.0 && u < 20.0, corr, e); // erfc(u) is 0 from 10.06 on
}
V normcdfinvv(V p) {
  return erfcinvv(p * 2.0) * -1.4142135623730951;
}

/// lgamma for x >= 8: Stirling's series.
V lgammaStirling(V x) {
  V lx = logv(x);
  V r = 1.0 / x;
  V r2 = r * r;
  V corr = r * poly(r2, {1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680});
  return fma(x - 0.5, lx, 0.91893853320467274 - x) + corr; // 0.5 log(2 pi)
}
/// lgamma(a) for a > 0: shifted up to >= 8 by the recurrence.
V lgammaPos(V a) {
  Ctx& c = *a.c;
  V prod = c.k(1.0);
  V shifted = a;
  for (int i = 0; i < 8; ++i) {
    B need = shifted < 8.0;
    prod = sel(need, prod * shifted, prod);
    shifted = sel(need, shifted + 1.0, shifted);
  }
  return lgammaStirling(shifted) - logv(prod);
}
V lgammav(V x) {
  Ctx& c = *x.c;
  V a = fabs(x);
  V lp = lgammaPos(a);
  // x < 0: log(pi / |x sin(pi x)|) - lgamma(|x|).
  V s = fabs(sinCosPi(x, false) * x);
  V neg = logv(c.k(kPi) / s) - lp;
  V r = sel(x < 0.0, neg, lp);
  r = sel(a < two(-20), -logv(a), r);          // lgamma(x) ~ -log|x| near 0
  r = sel(x < 0.0 && floorv(x) == x, kInf, r); // poles
  r = sel(x == 1.0 || x == 2.0, 0.0, r);
  return sel(isinfB(x), kInf, sel(isnan(x), x, r));
}
V tgammav(V x) {
  Ctx& c = *x.c;
  // Positive x up to 8: a product and Stirling at the shifted point; exact at small integers to
  // the product's rounding. Otherwise exp(lgamma) with the sign of the reflection.
  V a = fabs(x);
  V lg = lgammav(x);
  V e = expv(lg);
  V sgn = sel(x < 0.0 && floorv(a) - floorv(a * 0.5) * 2.0 == 0.0, -1.0, c.k(1.0));
  V r = e * sgn;
  r = sel(x < 0.0 && floorv(x) == x, kNan, r);
  r = sel(x == 0.0, copysignv(c.k(kInf), x), r);
  r = sel(x == -kInf, kNan, r);
  return sel(isnan(x), x, r);
}

/// cyl_bessel_i0 / i1: the power series (fitted) up to 3.75, e^x / sqrt(x) P(1/x) above.
V besselI(V x, bool one) {
  V a = fabs(x);
  V z = a * a;
  V small =
      one ? a * poly(z, {0.5, 0.0625000149011612, 0.0026041644159704447, 5.4253592679742724e-05,
                         6.781168622183031e-07, 5.660779400784577e-09, 3.302967274687596e-11,
                         1.7002550626102342e-13, 8.326672684688674e-17, 1.3877787807814457e-17})
          : poly(z, {1.0, 0.24999995529651642, 0.015625005587935448, 0.0004340286541264504,
                     6.781455340387765e-06, 6.782826744711201e-08, 4.711698253778707e-10,
                     2.3784379413888113e-12, 9.936496070395151e-15, 2.7755575615628914e-17});
  V u = 1.0 / a;
  V p =
      one ? poly(u, {0.3989422619342804, -0.14959903061389923, -0.047170624136924744,
                     -0.026828855276107788, -0.24378353357315063, 0.3106204569339752,
                     12.44542121887207, -123.33719635009766, 401.7973327636719, -436.7333984375})
          : poly(u, {0.3989422917366028, 0.04986374080181122, 0.02845478057861328,
                     0.015080173499882221, 0.24919837713241577, -0.7673001289367676,
                     -7.8497724533081055, 98.54241943359375, -340.269287109375, 380.4895324707031});
  V e = expv(a * 0.5); // e^a as a square: finite up to where I0 / I1 overflow
  V big = (e * (p / sqrtv(a))) * e;
  V r = sel(a <= 3.75, small, sel(a == kInf, kInf, big));
  if (one) r = copysignv(r, x);
  return sel(isnan(x), x, r);
}

// ---- roots and norms ---------------------------------------------------------------------------
V cbrtv(V x) {
  return odd(x, [](V a) {
    Ctx& c = *a.c;
    bool d = c.f64();
    // Initial guess: the bits of a, less those of 1, divided by 3 (within 26%); then Newton
    // steps y -= (y - a / y^2) / 3, each squaring the error.
    double minNormal = d ? two(-1022) : two(-126);
    B sub = a < minNormal;
    V as_ = sel(sub, a * two(54), a);
    int64_t one = d ? int64_t(0x3ff0000000000000) : int64_t(0x3f800000);
    I ib = bitsAs(bits(as_), c.sintType());
    I third{&c, c.bin(OpCode::Div, (ib - one).v, c.ki(3, c.sintType()).v)};
    V y = fromBits(third + one);
    for (int i = 0; i < (d ? 6 : 4); ++i) y = y - (y - as_ / (y * y)) * (1.0 / 3);
    y = sel(sub, y * two(-18), y);
    return sel(a == 0.0 || a == kInf || isnan(a), a, y);
  });
}
V hypotv(V x, V y) {
  V ax = fabs(x), ay = fabs(y);
  V mx = fmax(ax, ay), mn = fmin(ax, ay);
  V r = mn / mx;
  V h = mx * sqrtv(fma(r, r, 1.0));
  h = sel(mx == 0.0, 0.0, h);
  h = sel(isnan(x) || isnan(y), kNan, h);
  return sel(ax == kInf || ay == kInf, kInf, h);
}
V norm3or4(std::vector<V> xs) {
  Ctx& c = *xs[0].c;
  V mx = fabs(xs[0]);
  for (size_t i = 1; i < xs.size(); ++i) mx = fmax(mx, fabs(xs[i]));
  V s = c.k(0.0);
  B anyNan{&c, c.sp.b.cmp("ne", xs[0].v, xs[0].v)};
  B anyInf = isinfB(xs[0]);
  for (V& v : xs) {
    V r = v / mx;
    s = fma(r, r, s);
    anyNan = anyNan || isnan(v);
    anyInf = anyInf || isinfB(v);
  }
  V h = mx * sqrtv(s);
  h = sel(mx == 0.0, 0.0, h);
  h = sel(anyNan, kNan, h);
  return sel(anyInf, kInf, h);
}

// ---- directed rounding -------------------------------------------------------------------------
/// The next representable value toward +inf (up) or -inf.
V stepv(V x, bool up) {
  Ctx& c = *x.c;
  I b = bits(x);
  // Moving away from zero adds one to the magnitude's bits, toward zero subtracts one.
  B away = up ? !signbitB(x) : signbitB(x);
  I nb = sel(away, b + 1, b - 1);
  V r = fromBits(nb);
  V tiny = c.k(up ? std::numeric_limits<double>::denorm_min() : -0.0);
  if (!c.f64())
    tiny = c.k(up ? double(std::numeric_limits<float>::denorm_min())
                  : -double(std::numeric_limits<float>::denorm_min()));
  r = sel(x == 0.0, tiny, r);
  r = sel(x == (up ? kInf : -kInf), x, r);
  return sel(isnan(x), x, r);
}
/// Rounds the round-to-nearest result `rn` of an operation toward `mode` ("rz", "rd", "ru") given
/// the sign of the exact result minus rn (`residual`, any value with that sign; 0 when exact).
V directed(V rn, V residual, const std::string& mode) {
  bool down = mode == "rd" || (mode == "rz");
  V dn = sel(residual < 0.0, stepv(rn, false), rn);
  V upv = sel(residual > 0.0, stepv(rn, true), rn);
  if (mode == "rd") return dn;
  if (mode == "ru") return upv;
  (void)down;
  return sel(rn > 0.0, dn, sel(rn < 0.0, upv, rn)); // rz
}
/// Overflowed round-to-nearest results of finite operands: rz / rd / ru keep the largest finite
/// value where the rounding direction does not reach infinity.
V directedOverflow(V r, B finiteInputs, const std::string& mode) {
  Ctx& c = *r.c;
  double m = maxFinite(c);
  B ov = finiteInputs && isinfB(r);
  V keep = r;
  if (mode == "rz") keep = copysignv(c.k(m), r);
  if (mode == "rd") keep = sel(r > 0.0, m, r);
  if (mode == "ru") keep = sel(r < 0.0, -m, r);
  return sel(ov, keep, r);
}
V roundedOp(const std::string& op, V a, V b, const std::string& mode) {
  Ctx& c = *a.c;
  // Residuals of tiny results would underflow and lose their sign: the operands are scaled by
  // powers of two (exactly) first.
  double tiny = c.f64() ? two(-900) : two(-60), S = c.f64() ? two(256) : two(64);
  double big = c.f64() ? two(600) : two(40);
  V rn{&c, nullptr}, res{&c, nullptr};
  if (op == "add" || op == "sub") {
    if (op == "sub") b = -b;
    rn = a + b;
    V bb = rn - a;
    res = (a - (rn - bb)) + (b - bb); // TwoSum: exact, subnormals included
  } else if (op == "mul") {
    rn = a * b;
    B t = fabs(rn) < tiny;
    V fa = sel(t && fabs(a) < big, c.k(S), c.k(1.0)),
      fb = sel(t && fabs(b) < big, c.k(S), c.k(1.0));
    res = fma(a * fa, b * fb, -((rn * fa) * fb));
    // Below even the scaled range: the exact product is nonzero with the operands' sign.
    res = sel(rn == 0.0 && a != 0.0 && b != 0.0, copysignv(c.k(1.0), a) * copysignv(c.k(1.0), b),
              res);
  } else if (op == "div") {
    rn = a / b;
    V f = sel(fabs(a) < tiny, c.k(S), c.k(1.0));
    res = fma(-(rn * f), b, a * f) * copysignv(c.k(1.0), b); // sign of (a - q b) / b
  } else if (op == "sqrt") {
    rn = sqrtv(a);
    B t = a < tiny;
    V fa = sel(t, c.k(S), c.k(1.0)), fr = sel(t, c.k(std::sqrt(S)), c.k(1.0));
    V rs = rn * fr;
    res = fma(-rs, rs, a * fa);
  }
  V r = directed(rn, sel(isfiniteB(rn), res, c.k(0.0)), mode);
  B fin = isfiniteB(a) && (op == "sqrt" ? isfiniteB(a) : isfiniteB(b));
  if (op == "div") fin = fin && b != 0.0;
  return directedOverflow(r, fin, mode);
}

// ---- the table ---------------------------------------------------------------------------------
enum class Kind {
  FloatUnary,   // f -> f
  FloatBinary,  // (f, f) -> f
  FloatTernary, // (f, f, f) -> f
  FloatQuad,    // (f, f, f, f) -> f
  FloatToInt,   // f -> int (result type per function)
  FloatPred,    // f -> i1
  FloatIntArg,  // (f, i32) -> f
  IntFn,        // integer functions (own checks)
  Convert,      // conversions and reinterpretations (own handling)
};

struct Spec {
  Kind kind;
  bool f64 = true; // also takes fp64 (computed in fp64); false: fp64 arguments are refused
};

const std::map<std::string, Spec>& table() {
  static const std::map<std::string, Spec> t = [] {
    std::map<std::string, Spec> m;
    for (const char* n :
         {"asin",          "acos",         "atan",        "sinh",      "cosh",      "tanh",
          "asinh",         "acosh",        "atanh",       "tan",       "sin",       "cos",
          "sinpi",         "cospi",        "expm1",       "log1p",     "log10",     "exp10",
          "erf",           "erfc",         "erfcx",       "erfinv",    "erfcinv",   "normcdf",
          "normcdfinv",    "lgamma",       "tgamma",      "fast_sinf", "fast_cosf", "fast_tanf",
          "fast_log2f",    "fast_log10f",  "fast_exp10f", "rcbrt",     "fast_expf", "fast_logf",
          "cyl_bessel_i0", "cyl_bessel_i1"})
      m[n] = {Kind::FloatUnary, false};
    for (const char* n :
         {"cbrt", "round", "rint", "nearbyint", "trunc", "saturatef", "rsqrt_rn", "rcp_rn",
          "rcp_rz", "rcp_rd", "rcp_ru", "sqrt_rz", "sqrt_rd", "sqrt_ru", "logb"})
      m[n] = {Kind::FloatUnary, true};
    for (const char* n :
         {"atan2",  "hypot",     "rhypot",       "fmod",   "remainder", "copysign", "nextafter",
          "fdim",   "fast_powf", "fast_dividef", "add_rn", "add_rz",    "add_rd",   "add_ru",
          "sub_rn", "sub_rz",    "sub_rd",       "sub_ru", "mul_rn",    "mul_rz",   "mul_rd",
          "mul_ru", "div_rz",    "div_rd",       "div_ru", "fmin",      "fmax"})
      m[n] = {Kind::FloatBinary, true};
    for (const char* n : {"fast_powf", "fast_dividef"}) m[n].f64 = false;
    for (const char* n : {"expm1", "log1p", "log10", "exp10", "sinh",  "cosh", "tanh",
                          "asinh", "acosh", "atanh", "sin",   "cos",   "asin", "acos",
                          "atan",  "atan2", "tan",   "sinpi", "cospi", "erf",  "erfc"})
      m[n].f64 = true;
    m["hypot"].f64 = m["rhypot"].f64 = true;
    for (const char* n : {"norm3d", "rnorm3d", "fma_rn"}) m[n] = {Kind::FloatTernary, true};
    for (const char* n : {"norm4d", "rnorm4d"}) m[n] = {Kind::FloatQuad, true};
    for (const char* n : {"signbit", "ilogb", "llrint", "llround"}) m[n] = {Kind::FloatToInt, true};
    for (const char* n : {"isinf", "isnan", "finitef", "isfinited"}) m[n] = {Kind::FloatPred, true};
    for (const char* n : {"ldexp", "scalbn"}) m[n] = {Kind::FloatIntArg, true};
    for (const char* n :
         {"clz", "popc", "brev", "ffs", "byte_perm", "mulhi", "umulhi", "mul24", "umul24", "sad",
          "usad", "hadd", "rhadd", "uhadd", "urhadd", "llmax", "llmin"})
      m[n] = {Kind::IntFn, true};
    for (const char* r : {"_rn", "_rz", "_rd", "_ru"}) {
      for (const char* f : {"float2int", "float2uint", "float2ll", "float2ull", "double2int",
                            "double2uint", "double2ll", "double2ull", "double2float", "int2float",
                            "uint2float", "ll2float", "ull2float", "ll2double", "ull2double"})
        m[std::string(f) + r] = {Kind::Convert, true};
    }
    for (const char* n : {"int2double_rn", "uint2double_rn", "int_as_float", "float_as_int",
                          "uint_as_float", "float_as_uint", "longlong_as_double",
                          "double_as_longlong", "hiloint2double", "double2loint", "double2hiint"})
      m[n] = {Kind::Convert, true};
    // Names Triton's libdevice does not have.
    m.erase("fmin");
    m.erase("fmax");
    m.erase("umulhi");
    m.erase("umul24");
    m.erase("usad");
    m.erase("uhadd");
    m.erase("urhadd");
    m.erase("llmax");
    m.erase("llmin");
    return m;
  }();
  return t;
}

[[noreturn]] void badArg(SourceLoc loc, const std::string& fn, const std::string& want,
                         const ir::Type& got) {
  raiseError(loc, "libdevice." + fn + " takes " + want + ", got " + got.str());
}

/// The float compute type for an argument: fp16 / bf16 through fp32; integers are refused.
ir::Value* floatArg(Specializer& sp, const std::string& fn, const Val& v, SourceLoc loc,
                    bool allowF64) {
  ir::Value* x = sp.requireTensorOrScalar(v, loc, "libdevice." + fn + "'s argument");
  DType d = x->type().elem;
  if (x->type().isPointer() || !ir::isFloat(d))
    badArg(loc, fn, "floating-point arguments (convert with x.to(tl.float32))", x->type());
  if (d == DType::F64 && !allowF64)
    raiseError(loc, "libdevice." + fn +
                        " is implemented for fp32 (and fp16 / bf16 through fp32), not fp64; "
                        "convert with x.to(tl.float32)");
  if (d != DType::F32 && d != DType::F64) x = sp.cast(x, DType::F32, loc);
  return x;
}

V unaryFloat(Ctx& c, const std::string& fn, V x) {
  if (fn == "asin") return asinv(x);
  if (fn == "acos") return acosv(x);
  if (fn == "atan") return odd(x, atanPos);
  if (fn == "sinh") return sinhv(x);
  if (fn == "cosh") return coshv(x);
  if (fn == "tanh") return tanhv(x);
  if (fn == "asinh") return asinhv(x);
  if (fn == "acosh") return acoshv(x);
  if (fn == "atanh") return atanhv(x);
  if (fn == "sin") return sinCos(x, false);
  if (fn == "cos") return sinCos(x, true);
  if (fn == "tan") return tanv(x);
  if (fn == "sinpi") return sinCosPi(x, false);
  if (fn == "cospi") return sinCosPi(x, true);
  if (fn == "expm1") return expm1v(x);
  if (fn == "log1p") return log1pv(x);
  if (fn == "log10") return logv(x) * 0.43429448190325182;
  if (fn == "exp10") {
    // 10^x = 2^n e^r with x log2(10) = n + f: r = (x - n log10(2)) ln 10.
    V x0 = x;
    x = c.f64() ? fmin(fmax(x, c.k(-330.0)), c.k(310.0)) : fmin(fmax(x, c.k(-50.0)), c.k(40.0));
    V n = floorv(fma(x, 3.3219280948873622, 0.5));
    auto [hi, lo] = split(c, 0.30102999566398120, -2.8037281277851704e-18);
    V f = fma(-n, c.k(hi), x);
    f = fma(-n, c.k(lo), f);
    V r = f * 2.302585092994046;
    V p = expmCore(r) + 1.0;
    auto [s1, s2] = pow2Pair(toInt(n, c.sintType()));
    V res = p * s1 * s2;
    return sel(isnan(x0), x0, res);
  }
  if (fn == "erf") return erfv(x);
  if (fn == "cyl_bessel_i0") return besselI(x, false);
  if (fn == "cyl_bessel_i1") return besselI(x, true);
  if (fn == "erfc") return erfcv(x);
  if (fn == "erfcx") return erfcxv(x);
  if (fn == "erfinv") return erfinvv(x);
  if (fn == "erfcinv") return erfcinvv(x);
  if (fn == "normcdf") return normcdfv(x);
  if (fn == "normcdfinv") return normcdfinvv(x);
  if (fn == "lgamma") return lgammav(x);
  if (fn == "tgamma") return tgammav(x);
  if (fn == "cbrt") return cbrtv(x);
  if (fn == "rcbrt") return 1.0 / cbrtv(x);
  if (fn == "round") return roundv(x);
  if (fn == "rint" || fn == "nearbyint") return rintv(x);
  if (fn == "trunc") return truncv(x);
  if (fn == "saturatef") return sel(x > 0.0, fmin(x, c.k(1.0)), 0.0); // NaN -> 0
  if (fn == "rsqrt_rn") return 1.0 / sqrtv(x);
  if (fn.starts_with("rcp_")) return roundedOp("div", c.k(1.0), x, fn.substr(4));
  if (fn.starts_with("sqrt_")) return roundedOp("sqrt", x, x, fn.substr(5));
  if (fn == "logb") {
    // The unbiased exponent; subnormals counted from their leading bit.
    int mb = mantBits(c);
    V xs = sel(fabs(x) < two(c.f64() ? -1022 : -126), x * two(mb + 1), x);
    I ex = (bits(xs) >> mb) & (c.f64() ? 0x7ff : 0xff);
    I adj = as(ex, c.sintType()) - (c.f64() ? 1023 : 127);
    adj = sel(fabs(x) < two(c.f64() ? -1022 : -126), adj - (mb + 1), adj);
    V r = toFloat(adj);
    r = sel(x == 0.0, -kInf, r);
    r = sel(isinfB(x), kInf, r);
    return sel(isnan(x), x, r);
  }
  // fast_*: the hardware approximations Tile IR's math ops lower to.
  auto op = [&](OpCode o, V a) { return V{&c, c.un(o, a.v)}; };
  if (fn == "fast_sinf") return op(OpCode::Sin, x);
  if (fn == "fast_cosf") return op(OpCode::Cos, x);
  if (fn == "fast_tanf") return op(OpCode::Sin, x) / op(OpCode::Cos, x);
  if (fn == "fast_log2f") return op(OpCode::Log2, x);
  if (fn == "fast_log10f") return op(OpCode::Log2, x) * 0.30102999566398120;
  if (fn == "fast_exp10f") return op(OpCode::Exp2, x * 3.3219280948873622);
  if (fn == "fast_expf") return op(OpCode::Exp, x);
  if (fn == "fast_logf") return op(OpCode::Log, x);
  throw std::logic_error("libdevice: no unary rule for " + fn);
}

V binaryFloat(Ctx& c, const std::string& fn, V x, V y) {
  if (fn == "atan2") return atan2v(x, y);
  if (fn == "hypot") return hypotv(x, y);
  if (fn == "rhypot") return 1.0 / hypotv(x, y);
  if (fn == "copysign") return copysignv(x, y);
  if (fn == "fdim") return sel(isnan(x) || isnan(y), kNan, sel(x > y, x - y, 0.0));
  if (fn == "nextafter") {
    V r = sel(y > x, stepv(x, true), sel(y < x, stepv(x, false), y));
    return sel(isnan(x) || isnan(y), kNan, r);
  }
  if (fn == "fmod" || fn == "remainder") {
    // In fp64 for fp32 operands: q's rounding to an integer and q y are then exact while
    // |x / y| < 2^29. fp64 operands use the same formula (exact while |x / y| < 2^24).
    Ctx d{c.sp, c.loc, c.type(DType::F64)};
    V xd{&d, c.sp.cast(x.v, DType::F64, c.loc)}, yd{&d, c.sp.cast(y.v, DType::F64, c.loc)};
    V q = xd / yd;
    q = fn == "fmod" ? truncv(q) : rintv(q);
    V r = fma(-q, yd, xd);
    V rr{&c, c.sp.cast(r.v, c.ft.elem, c.loc)};
    if (fn == "fmod") rr = copysignv(rr, x); // fmod keeps x's sign (-0 included)
    rr = sel(rr == 0.0, copysignv(c.k(0.0), x), rr);
    rr = sel(isinfB(y) && isfiniteB(x), x, rr);
    return sel(isnan(x) || isnan(y) || isinfB(x) || y == 0.0, kNan, rr);
  }
  if (fn == "fast_powf") return V{&c, c.bin(OpCode::Pow, x.v, y.v)};
  if (fn == "fast_dividef") {
    // __nv_fast_fdividef: div.approx.ftz.f32 on the GPU, as Triton links libdevice (Ops.def,
    // Div's fast). IEEE division would cost ptxas a slow-path call per element.
    std::vector<ir::NamedAttr> attrs;
    if (c.ft.elem == DType::F32) attrs.push_back(ir::attr::Div::make::fast(true));
    return V{&c, c.sp.b.create1(OpCode::Div, {x.v, y.v}, x.v->type(), std::move(attrs))};
  }
  size_t u = fn.find('_');
  std::string op = fn.substr(0, u), mode = fn.substr(u + 1);
  if (mode == "rn") {
    if (op == "add") return x + y;
    if (op == "sub") return x - y;
    if (op == "mul") return x * y;
  }
  return roundedOp(op, x, y, mode);
}

/// Integer result of a float: signbit / ilogb (i32), llrint / llround (i64).
ir::Value* floatToInt(Ctx& c, const std::string& fn, V x) {
  if (fn == "signbit")
    return as(sel(signbitB(x), c.ki(1, DType::I32), c.ki(0, DType::I32)), DType::I32).v;
  if (fn == "llrint") return toInt(rintv(x), DType::I64).v;
  if (fn == "llround") return toInt(roundv(x), DType::I64).v;
  // ilogb: logb as i32; 0 -> INT_MIN (FP_ILOGB0), NaN -> INT_MIN too, inf -> INT_MAX.
  V lb = unaryFloat(c, "logb", x);
  I r = toInt(sel(isfiniteB(lb), lb, 0.0), DType::I32);
  r = sel(x == 0.0 || isnan(x), c.ki(std::numeric_limits<int32_t>::min(), DType::I32), r);
  r = sel(isinfB(x), c.ki(std::numeric_limits<int32_t>::max(), DType::I32), r);
  return r.v;
}

// ---- integer functions -------------------------------------------------------------------------
I popcount(I x) { // x unsigned
  bool w64 = dt(x) == DType::U64;
  uint64_t m1 = 0x5555555555555555ull, m2 = 0x3333333333333333ull, m4 = 0x0f0f0f0f0f0f0f0full,
           h = 0x0101010101010101ull;
  auto k = [&](uint64_t v) { return int64_t(w64 ? v : (v & 0xffffffffu)); };
  x = x - ((x >> 1) & k(m1));
  x = (x & k(m2)) + ((x >> 2) & k(m2));
  x = (x + (x >> 4)) & k(m4);
  return (x * k(h)) >> (w64 ? 56 : 24);
}
I smear(I x) { // every bit below the highest set bit set
  int w = dt(x) == DType::U64 ? 64 : 32;
  for (int s = 1; s < w; s <<= 1) x = x | (x >> s);
  return x;
}
I bitReverse(I x) {
  bool w64 = dt(x) == DType::U64;
  auto k = [&](uint64_t v) { return int64_t(w64 ? v : (v & 0xffffffffu)); };
  const uint64_t masks[] = {0x5555555555555555ull, 0x3333333333333333ull, 0x0f0f0f0f0f0f0f0full,
                            0x00ff00ff00ff00ffull, 0x0000ffff0000ffffull, 0x00000000ffffffffull};
  int steps = w64 ? 6 : 5;
  for (int i = 0; i < steps; ++i) {
    int s = 1 << i;
    x = ((x >> s) & k(masks[i])) | ((x & k(masks[i])) << s);
  }
  return x;
}

Val intFunction(Specializer& sp, const std::string& fn, CallSite& call) {
  SourceLoc loc = call.loc;
  auto intArg = [&](const Val& v, SourceLoc l) {
    ir::Value* x = sp.requireTensorOrScalar(v, l, "libdevice." + fn + "'s argument");
    if (x->type().isPointer() || !ir::isInt(x->type().elem) || x->type().elem == DType::I1)
      badArg(l, fn, "integer arguments", x->type());
    return x;
  };
  auto need32or64 = [&](ir::Value* x, bool allow64) {
    DType d = x->type().elem;
    bool ok =
        d == DType::I32 || d == DType::U32 || (allow64 && (d == DType::I64 || d == DType::U64));
    if (!ok)
      badArg(loc, fn, allow64 ? "int32 / uint32 / int64 / uint64" : "int32 / uint32", x->type());
  };
  if (fn == "clz" || fn == "popc" || fn == "brev" || fn == "ffs") {
    BoundArgs a(call, {"arg0"});
    ir::Value* xv = intArg(a.get("arg0"), a.loc("arg0"));
    need32or64(xv, true);
    DType d = xv->type().elem;
    bool w64 = ir::bitWidth(d) == 64;
    Ctx c{sp, loc, xv->type().withElem(w64 ? DType::F64 : DType::F32)};
    I x = bitsAs(I{&c, xv}, w64 ? DType::U64 : DType::U32);
    I r{&c, nullptr};
    if (fn == "popc") r = popcount(x);
    if (fn == "clz") r = popcount(~smear(x));
    if (fn == "brev") return Val::runtime(bitsAs(bitReverse(x), d).v);
    if (fn == "ffs") {
      I low = x & (-x);
      r = popcount(smear(low)); // position of the lowest set bit, 1-based; 0 for x == 0
    }
    return Val::runtime(as(r, DType::I32).v);
  }
  if (fn == "mulhi" || fn == "mul24" || fn == "hadd" || fn == "rhadd") {
    BoundArgs a(call, {"arg0", "arg1"});
    intArg(a.get("arg0"), a.loc("arg0"));
    intArg(a.get("arg1"), a.loc("arg1"));
    auto [xv, yv] =
        sp.unify(a.get("arg0"), a.get("arg1"), loc, std::nullopt, ("libdevice." + fn).c_str());
    if (xv->type().elem != yv->type().elem)
      raiseError(loc, "libdevice." + fn + " needs two integer operands of one type, got " +
                          xv->type().str() + " and " + yv->type().str());
    need32or64(xv, fn == "mulhi");
    DType d = xv->type().elem;
    Ctx c{sp, loc, xv->type().withElem(DType::F32)};
    I x{&c, xv}, y{&c, yv};
    if (fn == "mulhi") {
      I u{&c, c.bin(OpCode::Umulhi, xv, yv)};
      if (ir::isSigned(d)) {
        // Signed high half from the unsigned one: subtract y where x < 0 and x where y < 0.
        I zero = c.ki(0, d);
        u = u - sel(icmp("lt", x, 0), y, zero) - sel(icmp("lt", y, 0), x, zero);
      }
      return Val::runtime(u.v);
    }
    if (fn == "mul24") {
      // The low 32 bits of the product of the low 24 bits (sign-extended for int32).
      I xl = !ir::isSigned(d) ? x & 0xffffff : (x << 8) >> 8;
      I yl = !ir::isSigned(d) ? y & 0xffffff : (y << 8) >> 8;
      return Val::runtime((xl * yl).v);
    }
    // (x + y) >> 1 and (x + y + 1) >> 1 without overflow.
    I r = fn == "hadd" ? (x & y) + ((x ^ y) >> 1) : (x | y) - ((x ^ y) >> 1);
    return Val::runtime(r.v);
  }
  if (fn == "sad") {
    BoundArgs a(call, {"arg0", "arg1", "arg2"});
    ir::Value* xv = intArg(a.get("arg0"), a.loc("arg0"));
    ir::Value* yv = intArg(a.get("arg1"), a.loc("arg1"));
    ir::Value* zv = intArg(a.get("arg2"), a.loc("arg2"));
    need32or64(xv, false);
    auto [x2, y2] =
        sp.unify(Val::runtime(xv), Val::runtime(yv), loc, xv->type().elem, "libdevice.sad");
    auto [x3, z3] =
        sp.unify(Val::runtime(x2), Val::runtime(zv), loc, xv->type().elem, "libdevice.sad");
    y2 = sp.broadcastTo(y2, x3->type().shape, loc);
    Ctx c{sp, loc, x3->type().withElem(DType::F32)};
    I x{&c, x3}, y{&c, y2}, z{&c, z3};
    B gt = icmp("gt", x, y);
    I d = sel(gt, x - y, y - x);
    return Val::runtime((d + z).v);
  }
  if (fn == "byte_perm") {
    BoundArgs a(call, {"arg0", "arg1", "arg2"});
    for (const char* n : {"arg0", "arg1", "arg2"}) need32or64(intArg(a.get(n), a.loc(n)), false);
    auto [x2, y2] = sp.unify(a.get("arg0"), a.get("arg1"), loc, DType::U32, "libdevice.byte_perm");
    auto [x3, s3] =
        sp.unify(Val::runtime(x2), a.get("arg2"), loc, DType::U32, "libdevice.byte_perm");
    y2 = sp.broadcastTo(y2, x3->type().shape, loc);
    Ctx c{sp, loc, x3->type().withElem(DType::F32)};
    I x{&c, x3}, y{&c, y2}, s{&c, s3};
    I r = c.ki(0, DType::U32);
    for (int i = 0; i < 4; ++i) {
      I sel3 = (s >> (4 * i)) & 7;
      I fromX = (x >> ((sel3 & 3) * 8)) & 0xff;
      I fromY = (y >> ((sel3 & 3) * 8)) & 0xff;
      I byte = sel(icmp("lt", sel3, 4), fromX, fromY);
      r = r | (byte << (8 * i));
    }
    DType out = a.get("arg0").isRuntime() ? a.get("arg0").type().elem : DType::I32;
    return Val::runtime(bitsAs(r, out == DType::U32 ? DType::U32 : DType::I32).v);
  }
  throw std::logic_error("libdevice: no integer rule for " + fn);
}

// ---- conversions -------------------------------------------------------------------------------
Val convert(Specializer& sp, const std::string& fn, CallSite& call) {
  SourceLoc loc = call.loc;
  auto arg = [&](const char* n, DType want) {
    BoundArgs a(call, {"arg0"});
    ir::Value* x =
        sp.requireTensorOrScalar(a.get("arg0"), a.loc("arg0"), "libdevice." + fn + "'s argument");
    (void)n;
    DType d = x->type().elem;
    bool ok = ir::isFloat(want)
                  ? d == want
                  : (ir::isInt(d) && d != DType::I1 && ir::bitWidth(d) == ir::bitWidth(want));
    if (x->type().isPointer() || !ok)
      badArg(a.loc("arg0"), fn, std::string(ir::tlName(want)), x->type());
    return x;
  };
  if (fn == "hiloint2double") {
    BoundArgs a(call, {"arg0", "arg1"});
    auto [hi, lo] =
        sp.unify(a.get("arg0"), a.get("arg1"), loc, DType::I32, "libdevice.hiloint2double");
    Ctx c{sp, loc, hi->type().withElem(DType::F64)};
    I h = as(bitsAs(I{&c, hi}, DType::U32), DType::U64),
      l = as(bitsAs(I{&c, lo}, DType::U32), DType::U64);
    return Val::runtime(fromBits((h << 32) | l).v);
  }
  struct Re {
    const char* name;
    DType from, to;
  };
  static const Re reinterpret[] = {{"int_as_float", DType::I32, DType::F32},
                                   {"uint_as_float", DType::U32, DType::F32},
                                   {"float_as_int", DType::F32, DType::I32},
                                   {"float_as_uint", DType::F32, DType::U32},
                                   {"longlong_as_double", DType::I64, DType::F64},
                                   {"double_as_longlong", DType::F64, DType::I64}};
  for (const Re& r : reinterpret)
    if (fn == r.name) return Val::runtime(sp.cast(arg("arg0", r.from), r.to, loc, true));
  if (fn == "double2loint" || fn == "double2hiint") {
    ir::Value* x = arg("arg0", DType::F64);
    Ctx c{sp, loc, x->type()};
    I b = bits(V{&c, x});
    if (fn == "double2hiint") b = b >> 32;
    return Val::runtime(bitsAs(as(b & int64_t(0xffffffff), DType::U32), DType::I32).v);
  }
  // X2Y_mode.
  size_t two_ = fn.find('2'), us = fn.rfind('_');
  std::string from = fn.substr(0, two_), to = fn.substr(two_ + 1, us - two_ - 1),
              mode = fn.substr(us + 1);
  auto dtypeOf = [](const std::string& s) {
    if (s == "float") return DType::F32;
    if (s == "double") return DType::F64;
    if (s == "int") return DType::I32;
    if (s == "uint") return DType::U32;
    if (s == "ll") return DType::I64;
    return DType::U64; // ull
  };
  DType df = dtypeOf(from), dto = dtypeOf(to);
  ir::Value* xv = arg("arg0", df);
  if (ir::isFloat(df) && !ir::isFloat(dto)) {
    Ctx c{sp, loc, xv->type()};
    V x{&c, xv};
    V r = mode == "rn" ? rintv(x) : mode == "rz" ? truncv(x) : mode == "rd" ? floorv(x) : ceilv(x);
    return Val::runtime(sp.cast(r.v, dto, loc));
  }
  ir::Value* rn = sp.cast(xv, dto, loc);
  if (mode == "rn") return Val::runtime(rn);
  // Directed: compare the round-to-nearest result with the exact value in a wider type and step.
  Ctx c{sp, loc, rn->type()};
  V r{&c, rn};
  V res{&c, nullptr};
  if (ir::isFloat(df)) { // double2float: the exact value is the fp64 argument
    Ctx d{sp, loc, xv->type()};
    V xd{&d, xv};
    V diff = xd - V{&d, sp.cast(rn, DType::F64, loc)}; // exact
    B pos{&c, (diff > 0.0).v}, neg{&c, (diff < 0.0).v};
    res = sel(pos, c.k(1.0), sel(neg, c.k(-1.0), c.k(0.0)));
    B fin{&c, (fabs(xd) < kInf).v};
    return Val::runtime(directedOverflow(directed(r, res, mode), fin, mode).v);
  }
  // Integer to float: the integer minus the result converted back, in the integer's type
  // widened to 64 bits (exact: the result is within one ulp of the integer).
  Ctx ic{sp, loc, xv->type().withElem(DType::F64)};
  bool uns = !ir::isSigned(df);
  DType wide = uns ? DType::U64 : DType::I64;
  I xi = as(I{&ic, xv}, wide);
  // A result of 2^64 (ull2float rounding up) does not convert back: it is above every input.
  V big = c.k(uns ? two(64) : two(63));
  I back = as(I{&ic, sp.cast(sel(fabs(r) >= big, c.k(0.0), r).v, wide, loc)}, wide);
  B above = fabs(r) >= big;
  B less = uns ? icmp("lt", xi, back) : icmp("lt", xi, back);
  B more = icmp("gt", xi, back);
  less = less || above;
  more = more && !above;
  res = sel(less, c.k(-1.0), sel(more, c.k(1.0), c.k(0.0)));
  if (uns) res = sel(above && r > 0.0, -1.0, res);
  return Val::runtime(directed(r, res, mode).v);
}

} // namespace

const std::vector<std::string>& libdeviceFunctions() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [n, s] : table()) v.push_back(n);
    return v;
  }();
  return names;
}

ir::Value* float64Math(Specializer& sp, ir::OpCode code, ir::Value* x, SourceLoc loc) {
  if (x->type().elem != DType::F64) return nullptr;
  Ctx c{sp, loc, x->type()};
  V v{&c, x};
  switch (code) {
  case ir::OpCode::Exp:
    return expv(v).v;
  case ir::OpCode::Exp2:
    return exp2v(v).v;
  case ir::OpCode::Log:
    return logv(v).v;
  case ir::OpCode::Log2:
    return log2v64(v).v;
  case ir::OpCode::Sin:
    return sinCos(v, false).v;
  case ir::OpCode::Cos:
    return sinCos(v, true).v;
  case ir::OpCode::Erf:
    return erf64(v).v;
  default:
    return nullptr;
  }
}

bool isLibdeviceFunction(const std::string& name) {
  return table().count(name) != 0;
}

Val callLibdevice(Specializer& sp, const std::string& fn, CallSite& call) {
  const Spec& spec = table().at(fn);
  SourceLoc loc = call.loc;
  if (spec.kind == Kind::IntFn) return intFunction(sp, fn, call);
  if (spec.kind == Kind::Convert) return convert(sp, fn, call);
  std::vector<const char*> names;
  int n = spec.kind == Kind::FloatBinary || spec.kind == Kind::FloatIntArg ? 2
          : spec.kind == Kind::FloatTernary                                ? 3
          : spec.kind == Kind::FloatQuad                                   ? 4
                                                                           : 1;
  static const char* const argNames[] = {"arg0", "arg1", "arg2", "arg3"};
  BoundArgs a = n == 1   ? BoundArgs(call, {"arg0"})
                : n == 2 ? BoundArgs(call, {"arg0", "arg1"})
                : n == 3 ? BoundArgs(call, {"arg0", "arg1", "arg2"})
                         : BoundArgs(call, {"arg0", "arg1", "arg2", "arg3"});
  if (spec.kind == Kind::FloatIntArg) {
    ir::Value* x = floatArg(sp, fn, a.get("arg0"), a.loc("arg0"), spec.f64);
    DType orig = a.get("arg0").type().elem;
    const Val& nv = a.get("arg1");
    if (nv.isRuntime() && (!ir::isInt(nv.type().elem) || nv.type().isPointer()))
      badArg(a.loc("arg1"), fn, "an integer exponent", nv.type());
    auto [xb, nb] = sp.unify(Val::runtime(x), nv, loc, std::nullopt, ("libdevice." + fn).c_str());
    xb = sp.broadcastTo(x, nb->type().shape, loc);
    Ctx c{sp, loc, xb->type()};
    V r = ldexpv(V{&c, xb}, I{&c, nb});
    r = sel(isnan(V{&c, xb}) || isinfB(V{&c, xb}) || V{&c, xb} == 0.0, V{&c, xb}, r);
    ir::Value* out = r.v;
    if (orig != out->type().elem) out = sp.cast(out, orig, loc);
    return Val::runtime(out);
  }
  // Float operands, broadcast to one shape and one type (fp64 if any is fp64).
  std::vector<ir::Value*> xs;
  DType orig = DType::F32;
  bool anyF64 = false, anyRuntime = false;
  for (int i = 0; i < n; ++i) {
    const Val& v = a.get(argNames[i]);
    if (v.isRuntime()) {
      anyRuntime = true;
      if (!ir::isFloat(v.type().elem) && ir::isInt(v.type().elem))
        badArg(a.loc(argNames[i]), fn, "floating-point arguments (convert with x.to(tl.float32))",
               v.type());
      anyF64 |= v.type().elem == DType::F64;
      if (i == 0 || orig == DType::F32) orig = v.type().elem;
    }
  }
  if (!anyRuntime) orig = DType::F32;
  DType compute = anyF64 ? DType::F64 : DType::F32;
  std::vector<int64_t> shape;
  for (int i = 0; i < n; ++i) {
    const Val& v = a.get(argNames[i]);
    ir::Value* x = v.isRuntime() ? floatArg(sp, fn, v, a.loc(argNames[i]), spec.f64)
                                 : sp.toRuntime(v, a.loc(argNames[i]), compute);
    if (x->type().elem != compute) x = sp.cast(x, compute, loc);
    shape = sp.broadcastShapes(shape, x->type().shape, loc, ("libdevice." + fn).c_str());
    xs.push_back(x);
  }
  for (ir::Value*& x : xs) x = sp.broadcastTo(x, shape, loc);
  if (orig != DType::F64 && orig != DType::F16 && orig != DType::BF16) orig = DType::F32;
  if (anyF64) orig = DType::F64;
  Ctx c{sp, loc, xs[0]->type()};
  std::vector<V> vs;
  for (ir::Value* x : xs) vs.push_back(V{&c, x});
  ir::Value* out = nullptr;
  switch (spec.kind) {
  case Kind::FloatUnary:
    out = unaryFloat(c, fn, vs[0]).v;
    break;
  case Kind::FloatBinary:
    out = binaryFloat(c, fn, vs[0], vs[1]).v;
    break;
  case Kind::FloatTernary:
    if (fn == "fma_rn") {
      out = fma(vs[0], vs[1], vs[2]).v;
      break;
    }
    [[fallthrough]];
  case Kind::FloatQuad: {
    V h = norm3or4(vs);
    out = (fn[0] == 'r' ? 1.0 / h : h).v;
    break;
  }
  case Kind::FloatToInt:
    return Val::runtime(floatToInt(c, fn, vs[0]));
  case Kind::FloatPred: {
    V x = vs[0];
    B r = fn == "isinf" ? isinfB(x) : fn == "isnan" ? isnan(x) : isfiniteB(x);
    return Val::runtime(r.v);
  }
  default:
    throw std::logic_error("libdevice: unhandled kind");
  }
  if (out->type().elem != orig) out = sp.cast(out, orig, loc);
  return Val::runtime(out);
}

} // namespace ww::specialize
