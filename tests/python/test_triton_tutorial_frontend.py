"""Front-end behaviours Triton's tutorials 03, 06 and 09 rely on (issue 17): `tl.assume` as a
promise whose condition must be a boolean, `isinstance` in kernels with Triton's answers (06's
`_maybe_make_tensor_desc` picks a descriptor or builds one), and a called @jit function whose
`tl.constexpr` parameter receives a run-time value (06 passes `offs_m` and `N_CTX` that way): the
value decides, as in Triton. Run in the interpreter and compiled for sm_90a."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.tools.tensor_descriptor import TensorDescriptor

pytest.importorskip("warpweave._native")


def compile_ptx(kernel, signature, constexprs):
    from warpweave.backends.compiler import GPUTarget

    src = ww.compiler.ASTSource(kernel, signature=signature, constexprs=constexprs)
    return ww.compiler.compile(src, target=GPUTarget("cuda", 90, 32), options={}).asm["ptx"]


@ww.jit
def assume_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.assume(pid >= 0)
    tl.assume(stride > 0)
    tl.assume(BLOCK > 0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.assume(offs >= 0)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=mask) * 2, mask=mask)


def test_assume_is_a_promise_that_changes_nothing():
    x = np.arange(40, dtype=np.float32)
    out = np.zeros(20, np.float32)
    assume_kernel[(2,)](x, out, 20, 2, BLOCK=16)
    np.testing.assert_array_equal(out, x[::2] * 2)
    ptx = compile_ptx(assume_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                      "stride": "i32"}, {"BLOCK": 16})
    assert "st.global" in ptx


@ww.jit
def assume_false(x_ptr, BLOCK: tl.constexpr):
    tl.assume(BLOCK < 0)  # a broken promise, accepted as Triton does: nothing checks it
    tl.store(x_ptr, 1.0)


@ww.jit
def assume_not_bool(x_ptr, n):
    tl.assume(n + 1)


@ww.jit
def assume_constexpr_int(x_ptr, BLOCK: tl.constexpr):
    tl.assume(BLOCK)


def test_assume_false_at_compile_time_is_accepted_as_triton():
    x = np.zeros(4, np.float32)
    assume_false[(1,)](x, BLOCK=4)
    assert x[0] == 1.0


@pytest.mark.parametrize("kernel,args,message", [
    (assume_not_bool, dict(n=3), r"tl.assume expects a boolean condition \(a comparison\), got a "
                                 r"scalar \(i32\)"),
    (assume_constexpr_int, dict(BLOCK=4),
     r"tl.assume expects a boolean condition \(a comparison\), got an int"),
])
def test_assume_needs_a_boolean(kernel, args, message):
    x = np.zeros(4, np.float32)
    with pytest.raises(ww.CompilationError, match=r"test_triton_tutorial_frontend\.py:\d+:\d+: "
                                                  r"error: " + message):
        kernel[(1,)](x, **args)


@ww.jit
def _maybe_descriptor(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@ww.jit
def isinstance_kernel(x, out, n, BLOCK: tl.constexpr):
    d = _maybe_descriptor(x, [n, BLOCK], [BLOCK, 1], [1, BLOCK])
    t = d.load([0, 0])
    # One bit per question; Triton's answers: a constexpr reaches builtins unwrapped (an int, not
    # a tl.constexpr), run-time scalars and tensors are tl.tensor, descriptors are not.
    flags = (isinstance(BLOCK, int) * 1 + isinstance(BLOCK, tl.constexpr) * 2
             + isinstance(x, tl.tensor) * 4 + isinstance(t, (tl.tensor_descriptor, tl.tensor)) * 8
             + isinstance(tl.float16, tl.dtype) * 16 + isinstance(x.dtype, tl.pointer_type) * 32
             + isinstance(n, tl.tensor) * 64 + isinstance(1.5, float) * 128
             + isinstance(True, int) * 256 + isinstance(d, tl.tensor_descriptor) * 512
             + isinstance((1, 2), tuple) * 1024 + isinstance(BLOCK, (float, bool)) * 2048)
    tl.store(out + tl.arange(0, BLOCK)[None, :] + tl.zeros([1, BLOCK], tl.int32), t + flags)


@pytest.mark.parametrize("as_descriptor", [False, True])
def test_isinstance_answers_as_triton(as_descriptor):
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    out = np.zeros(16, np.float32)
    arg = TensorDescriptor.from_tensor(x, [1, 16]) if as_descriptor else x
    isinstance_kernel[(1,)](arg, out, 1, BLOCK=16)
    expected = 1 + 8 + 16 + 64 + 128 + 256 + 512 + 1024 + (0 if as_descriptor else 4 + 32)
    np.testing.assert_array_equal(out - x[0], np.full(16, expected, np.float32))


@ww.jit
def isinstance_bad(x):
    if isinstance(x, 3):
        pass


def test_isinstance_needs_a_type():
    with pytest.raises(ww.CompilationError,
                       match=r"isinstance's second argument must be a type or a tuple of types: "
                             r"int, float, bool, tuple, tl.tensor, tl.tensor_descriptor, tl.dtype, "
                             r"tl.pointer_type or tl.constexpr; got 3"):
        isinstance_bad[(1,)](np.zeros(4, np.float32))


@ww.jit
def _scale_rows(acc, offs_m: tl.constexpr, n: tl.constexpr, BLOCK: tl.constexpr):
    # offs_m and n arrive as run-time values although annotated tl.constexpr (tutorial 06 does
    # this); BLOCK is a real constant.
    return tl.where(offs_m[:, None] < n, acc * 2, acc) + tl.arange(0, BLOCK)[None, :] * 0


@ww.jit
def constexpr_annotated_helper_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.full([BLOCK, BLOCK], 1.0, tl.float32)
    acc = _scale_rows(acc, offs_m, n, BLOCK)
    tl.store(out_ptr + offs_m[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], acc)


def test_runtime_value_into_a_constexpr_annotated_helper_parameter():
    out = np.zeros((8, 8), np.float32)
    constexpr_annotated_helper_kernel[(1,)](out, 5, BLOCK=8)
    expected = np.ones((8, 8), np.float32)
    expected[:5] = 2
    np.testing.assert_array_equal(out, expected)
    ptx = compile_ptx(constexpr_annotated_helper_kernel, {"out_ptr": "*fp32", "n": "i32"},
                      {"BLOCK": 8})
    assert "st.global" in ptx


@ww.jit
def _needs_constant(x, SIZE: tl.constexpr):
    return tl.arange(0, SIZE) + x


@ww.jit
def runtime_size_kernel(out_ptr, n):
    tl.store(out_ptr + tl.arange(0, 4), _needs_constant(0, n)[:4])


def test_runtime_value_used_where_a_constant_is_needed_reports_the_use():
    with pytest.raises(ww.CompilationError, match=r"tl.arange's end must be a compile-time "
                                                  r"constant"):
        runtime_size_kernel[(1,)](np.zeros(4, np.int32), 4)
