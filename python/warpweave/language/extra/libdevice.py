"""`libdevice` (Triton's `triton.language.extra.libdevice`): CUDA math functions for kernels,
compiled by the C++ front end; calling one from ordinary Python raises a clear error.

The names warpweave's compiler implements are listed below; any other libdevice name still
imports (so files that import a whole set of them load), and a kernel using it gets the
compiler's error naming the function at the call."""

from .. import _kernel_only

# The names warpweave's compiler builds: src/specialize/TlLibdevice.cpp's table plus the ones
# TlBuiltins.cpp maps onto tl functions (docs/language.md gives each one's accuracy).
_BUILT = """
acos acosh asin asinh atan atan2 atanh cbrt cos cosh cospi erf erfc erfcinv erfcx erfinv exp10
expm1 hypot lgamma log10 log1p normcdf normcdfinv rcbrt rhypot sin sinh sinpi tan tanh tgamma
cyl_bessel_i0 cyl_bessel_i1
norm3d norm4d rnorm3d rnorm4d fmod remainder copysign nextafter fdim ldexp scalbn ilogb logb
round rint nearbyint trunc llrint llround signbit isinf isnan finitef isfinited saturatef
rsqrt_rn rcp_rn rcp_rz rcp_rd rcp_ru sqrt_rz sqrt_rd sqrt_ru fma_rn
add_rn add_rz add_rd add_ru sub_rn sub_rz sub_rd sub_ru mul_rn mul_rz mul_rd mul_ru
div_rz div_rd div_ru fast_dividef
fast_sinf fast_cosf fast_tanf fast_log2f fast_log10f fast_exp10f fast_powf
clz popc brev ffs byte_perm mulhi mul24 sad hadd rhadd
int_as_float float_as_int uint_as_float float_as_uint longlong_as_double double_as_longlong
hiloint2double double2loint double2hiint int2double_rn uint2double_rn
""".split()
for _src in ("float2int", "float2uint", "float2ll", "float2ull", "double2int", "double2uint",
             "double2ll", "double2ull", "double2float", "int2float", "uint2float", "ll2float",
             "ull2float", "ll2double", "ull2double"):
    _BUILT += [_src + _mode for _mode in ("_rn", "_rz", "_rd", "_ru")]
SUPPORTED = sorted(set(["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "floor", "ceil", "fma",
                        "fabs", "abs", "pow", "div_rn", "fast_expf", "fast_logf", "sqrt_rn"] +
                       _BUILT))

__all__ = list(SUPPORTED)
for _name in SUPPORTED:
    globals()[_name] = _kernel_only("libdevice", _name)
del _name, _src


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    return _kernel_only("libdevice", name)
