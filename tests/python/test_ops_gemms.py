"""warpweave.ops.scaled_mm (fp8) and grouped_mm (MoE) and their torch.ops.warpweave custom ops on
CPU tensors / NumPy arrays, which run in the interpreter.

scaled_mm against torch._scaled_mm's semantics computed in fp32 (a.float() @ b.float() * scales
+ bias, rounded once), and against torch._scaled_mm itself where PyTorch runs it on the CPU
(per-tensor scales); grouped_mm against a loop of torch.matmul over ragged groups, empty groups
included, and against torch._grouped_mm's CPU fallback; gradients of grouped_mm against
PyTorch's; opcheck (schema, fake tensors, autograd registration), torch.compile(fullgraph=True);
errors that name the op, the argument and what is accepted."""

import importlib

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

import warpweave.ops as ops  # noqa: E402  (registers torch.ops.warpweave)

W = torch.ops.warpweave
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(1234)


def fp8(shape, dtype, scale=1.0):
    return (torch.randn(shape) * scale).to(dtype)


def scaled_reference(a, b, scale_a, scale_b, bias, out_dtype):
    """torch._scaled_mm's result computed in fp32: the fp32 product, the scales, the bias, one
    rounding to out_dtype."""
    c = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    if bias is not None:
        c = c + bias.float()
    return c.to(out_dtype)


def assert_rounded_close(actual, expected_fp32, out_dtype):
    """actual within one rounding of out_dtype (plus fp32 summation-order noise) of the fp32
    reference."""
    ref = expected_fp32.float()
    tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}[out_dtype]
    torch.testing.assert_close(actual.float(), ref, atol=tol * ref.abs().max().item() + 1e-6,
                               rtol=tol)


# ------------------------------------------------------------------------------------------------
# scaled_mm
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3), (E5M2, E5M2)])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_scaled_mm_matches_torch_semantics(ta, tb, rowwise, out_dtype):
    M, N, K = 50, 72, 96  # partial tiles in M and N, K a multiple of 16 as torch requires
    a, bt = fp8((M, K), ta, 2.0), fp8((N, K), tb, 2.0)
    b = bt.t()  # column-major, as torch._scaled_mm takes it
    if rowwise:
        scale_a, scale_b = torch.rand(M, 1) + 0.5, torch.rand(1, N) + 0.5
    else:
        scale_a, scale_b = torch.tensor(0.75), torch.tensor(1.5)
    out = W.scaled_mm(a, b, scale_a, scale_b, None, out_dtype)
    assert out.dtype == out_dtype and out.shape == (M, N)
    expected = (a.float() @ b.float()) * scale_a * scale_b
    assert_rounded_close(out, expected, out_dtype)
    if not rowwise and not (ta == tb == E5M2):  # PyTorch's CPU _scaled_mm: per-tensor only
        theirs = torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype)
        assert_rounded_close(out, theirs.float(), out_dtype)


@pytest.mark.parametrize("bias_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_scaled_mm_bias_and_mixed_scales(bias_dtype):
    M, N, K = 33, 40, 64
    a, bt = fp8((M, K), E4M3), fp8((N, K), E4M3)
    bias = torch.randn(N).to(bias_dtype)
    scale_a, scale_b = torch.rand(M, 1) + 0.5, torch.tensor([2.0])  # rowwise A, per-tensor B
    out = W.scaled_mm(a, bt.t(), scale_a, scale_b, bias, torch.bfloat16)
    expected = scaled_reference(a, bt.t(), scale_a, scale_b, bias, torch.float32)
    assert_rounded_close(out, expected, torch.bfloat16)


def test_scaled_mm_exact_products_and_default_out_dtype():
    # Multiples of 1/8 in [-1, 1]: exact in e4m3, their sums exact in fp32.
    M, N, K = 64, 64, 128
    a = (torch.randint(-8, 9, (M, K)) / 8).to(E4M3)
    bt = (torch.randint(-8, 9, (N, K)) / 8).to(E4M3)
    out = W.scaled_mm(a, bt.t(), torch.tensor(1.0), torch.tensor(1.0), None, torch.float32)
    assert torch.equal(out, a.float() @ bt.float().t())
    assert ops.scaled_mm(a.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn),
                         bt.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn).T,
                         np.float32([1.0]), np.float32([1.0])).dtype.name == "bfloat16"


@pytest.mark.parametrize("kernel", [None, "tma"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_scaled_mm_numpy_in_interpreter(kernel, with_bias):
    # kernel="tma": A and B^T through host TMA descriptors (edges zero-filled by the copies).
    rng = np.random.default_rng(0)
    M, N, K = 17, 24, 48
    a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e5m2)
    bt = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn)
    sa, sb = rng.random((M, 1), np.float32) + 0.5, rng.random((1, N), np.float32) + 0.5
    bias = rng.standard_normal(N).astype(np.float32) if with_bias else None
    out = ops.scaled_mm(a, bt.T, sa, sb, out_dtype=np.float32, bias=bias, kernel=kernel)
    ref = (a.astype(np.float32) @ bt.astype(np.float32).T) * sa * sb
    if with_bias:
        ref = ref + bias
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_scaled_mm_empty_shapes():
    a, bt = fp8((0, 32), E4M3), fp8((16, 32), E4M3)
    assert W.scaled_mm(a, bt.t(), torch.tensor(1.0), torch.tensor(1.0)).shape == (0, 16)
    a, bt = fp8((8, 0), E4M3), fp8((16, 0), E4M3)
    out = W.scaled_mm(a, bt.t(), torch.tensor(1.0), torch.tensor(1.0), None, torch.float32)
    assert torch.equal(out, torch.zeros(8, 16))


@pytest.mark.parametrize("call,match", [
    (lambda a, b, s: W.scaled_mm(a.float(), b, s, s), r"warpweave::scaled_mm: 'a' has dtype "
     r"float32; expected float8_e4m3fn or float8_e5m2"),
    (lambda a, b, s: W.scaled_mm(a, b.contiguous(), s, s),
     r"scaled_mm: 'b' must be column-major \(K contiguous\).*bt\.t\(\)"),
    (lambda a, b, s: W.scaled_mm(a.t().contiguous().t(), b, s, s),
     r"scaled_mm: 'a' must be row-major \(K contiguous\)"),
    (lambda a, b, s: W.scaled_mm(a, b, torch.ones(16, 2), s),
     r"scaled_mm: 'scale_a' has shape \(16, 2\); expected one element \(per-tensor scaling\) "
     r"or \[M, 1\] = \[16, 1\] \(rowwise scaling\)"),
    (lambda a, b, s: W.scaled_mm(a, b, s.half(), s),
     r"warpweave::scaled_mm: 'scale_a' has dtype float16; expected float32"),
    (lambda a, b, s: W.scaled_mm(a, b, s, s, None, torch.float8_e4m3fn),
     r"warpweave::scaled_mm: 'out_dtype' must be bfloat16, float16 or float32"),
    (lambda a, b, s: W.scaled_mm(a, b[:16], s, s),
     r"warpweave::scaled_mm: 'b' has shape \(16, 24\) but 'a' has \(16, 32\)"),
    (lambda a, b, s: W.scaled_mm(a, b, s, s, torch.ones(5)),
     r"warpweave::scaled_mm: 'bias' must have shape \(24,\)"),
])
def test_scaled_mm_errors_name_op_and_what_is_accepted(call, match):
    a, bt = fp8((16, 32), E4M3), fp8((24, 32), E4M3)
    with pytest.raises(ValueError, match=match):
        call(a, bt.t(), torch.tensor(1.0))


def test_scaled_mm_opcheck_and_compile():
    a, bt = fp8((32, 64), E4M3), fp8((48, 64), E5M2)
    args = (a, bt.t(), torch.rand(32, 1), torch.rand(1, 48), torch.randn(48), torch.float16)
    # (test_schema is left out: it mutates the inputs with mul, which PyTorch lacks for fp8)
    torch.library.opcheck(W.scaled_mm.default, args,
                          test_utils=("test_faketensor", "test_aot_dispatch_static"))

    def f(a, b, sa, sb):
        return W.scaled_mm(a, b, sa, sb, None, torch.float32).relu()

    ref = f(*args[:4])
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(*args[:4]),
                               ref)


# ------------------------------------------------------------------------------------------------
# grouped_mm
# ------------------------------------------------------------------------------------------------

# Ragged group sizes: empty groups at the start, middle and end, groups of one row, groups
# spanning several tiles, rows past the last group.
SIZES = [[0, 5, 0, 17, 1, 40, 0], [64], [0], [3, 0, 0, 29], [33, 31, 2, 0]]


def offsets(sizes):
    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32)


def loop_reference(a, b, offs):
    """torch._grouped_mm's 2-D x 3-D semantics by a loop of torch.matmul, in fp32."""
    out = torch.zeros(a.shape[0], b.shape[2])
    start = 0
    for g, end in enumerate(offs.tolist()):
        out[start:end] = a[start:end].float() @ b[g].float()
        start = end
    return out


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 1e-2),
                                       (torch.float16, 2e-3)])
def test_grouped_mm_ragged_rows_vs_loop_of_matmul(sizes, dtype, tol):
    offs = offsets(sizes)
    M_total, K, N = sum(sizes) + 3, 48, 40  # 3 rows past the last group
    a, b = torch.randn(M_total, K, dtype=dtype), torch.randn(len(sizes), K, N, dtype=dtype)
    out = W.grouped_mm(a, b, offs)
    assert out.dtype == dtype and out.shape == (M_total, N)
    ref = loop_reference(a, b, offs)
    torch.testing.assert_close(out.float(), ref, atol=tol * 8, rtol=tol)
    assert torch.equal(out[sum(sizes):].float(), torch.zeros(3, N))  # rows of no group: zeros
    if dtype == torch.bfloat16:  # PyTorch's own (CPU fallback) on the rows it defines
        theirs = torch._grouped_mm(a[:, :K], b, offs)
        torch.testing.assert_close(out[:sum(sizes)].float(), theirs[:sum(sizes)].float(),
                                   atol=tol * 8, rtol=tol)


@pytest.mark.parametrize("sizes", SIZES)
def test_grouped_mm_ragged_k_vs_loop_of_matmul(sizes):
    offs = offsets(sizes)
    M, N, K_total = 24, 40, sum(sizes) + 5
    a, b = torch.randn(M, K_total), torch.randn(K_total, N)
    out = W.grouped_mm(a, b, offs)
    assert out.shape == (len(sizes), M, N)
    start = 0
    for g, end in enumerate(offs.tolist()):
        torch.testing.assert_close(out[g], a[:, start:end] @ b[start:end], atol=1e-4, rtol=1e-5)
        start = end


def test_grouped_mm_strided_operands():
    # a and b as transposed views (what the backward hands over).
    offs = offsets([7, 0, 25])
    a = torch.randn(48, 32).t()  # [32, 48], column-major
    b = torch.randn(3, 40, 48).transpose(1, 2)  # [3, 48, 40]
    torch.testing.assert_close(W.grouped_mm(a, b, offs), loop_reference(a, b, offs),
                               atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("sizes", [[0, 5, 0, 17, 1, 40, 0], [33, 31, 2, 0]])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
def test_grouped_mm_gradients_match_pytorch(sizes, dtype, tol):
    offs = offsets(sizes)
    M, K, N = sum(sizes), 32, 24
    a0, b0 = torch.randn(M, K, dtype=dtype), torch.randn(len(sizes), K, N, dtype=dtype)
    a1, b1 = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    a2, b2 = a0.float().requires_grad_(), b0.float().requires_grad_()
    out = W.grouped_mm(a1, b1, offs)
    ref = loop_reference(a2, b2, offs)
    g = torch.randn(M, N)
    out.backward(g.to(dtype))
    ref.backward(g.to(dtype).float())
    for mine, theirs in ((a1.grad, a2.grad), (b1.grad, b2.grad)):
        torch.testing.assert_close(mine.float(), theirs, atol=tol * 10, rtol=tol)


def test_grouped_mm_ragged_k_gradients_match_pytorch():
    sizes = [4, 0, 19, 9]
    offs = offsets(sizes)
    a0, b0 = torch.randn(16, 32), torch.randn(32, 12)
    a1, b1 = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    a2, b2 = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    out = W.grouped_mm(a1, b1, offs)
    start, refs = 0, []
    for end in offs.tolist():
        refs.append(a2[:, start:end] @ b2[start:end])
        start = end
    ref = torch.stack(refs)
    g = torch.randn_like(ref)
    out.backward(g)
    ref.backward(g)
    torch.testing.assert_close(a1.grad, a2.grad, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(b1.grad, b2.grad, atol=1e-4, rtol=1e-5)


def test_grouped_mm_opcheck_and_compile_fullgraph():
    offs = offsets([5, 0, 11])
    a = torch.randn(16, 32, requires_grad=True)
    b = torch.randn(3, 32, 24, requires_grad=True)
    torch.library.opcheck(W.grouped_mm.default, (a, b, offs),
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))

    def moe(x, w, offs):
        return torch.nn.functional.silu(W.grouped_mm(x, w, offs)).sum()

    expected = moe(a, b, offs)
    ga, gb = torch.autograd.grad(expected, (a, b))
    compiled = torch.compile(moe, fullgraph=True, backend="aot_eager")
    out = compiled(a, b, offs)
    ca, cb = torch.autograd.grad(out, (a, b))
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(ca, ga)
    torch.testing.assert_close(cb, gb)


def test_grouped_mm_out_of_range_offsets_stay_in_bounds():
    # Offsets past the rows are clamped to them: no access outside a or the result.
    a, b = torch.randn(10, 16), torch.randn(3, 16, 8)
    out = W.grouped_mm(a, b, torch.tensor([4, 4, 99], dtype=torch.int32))
    torch.testing.assert_close(out[:4], a[:4] @ b[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[4:], a[4:] @ b[2], atol=1e-5, rtol=1e-5)
    # Decreasing or negative offsets are undefined (as for torch), but stay in bounds.
    assert W.grouped_mm(a, b, torch.tensor([-5, 7, 2], dtype=torch.int32)).shape == (10, 8)
    assert W.grouped_mm(a.t(), a, torch.tensor([9, 3, 99], dtype=torch.int32)).shape == (3, 16, 16)


@pytest.mark.parametrize("call,match", [
    (lambda a, b, o: W.grouped_mm(a, b, o.long()),
     r"warpweave::grouped_mm: 'offs' has dtype int64; expected int32"),
    (lambda a, b, o: W.grouped_mm(a.half(), b, o),
     r"warpweave::grouped_mm: 'b' has dtype torch.float32 but 'a' has torch.float16"),
    (lambda a, b, o: W.grouped_mm(a, b[:2], o),
     r"warpweave::grouped_mm: 'b' has shape \(2, 16, 8\); with 'a' \(10, 16\) and 3 groups it "
     r"must be \[3, 16, N\]"),
    (lambda a, b, o: W.grouped_mm(a.int(), b.int(), o),
     r"warpweave::grouped_mm: 'a' has dtype int32; expected float16 or bfloat16 or float32"),
    (lambda a, b, o: W.grouped_mm(a, b[0][None, None], o),
     r"warpweave::grouped_mm: 'b' must be 3-D \[G, K, N\] or 2-D \[K_total, N\]"),
    (lambda a, b, o: W.grouped_mm(a, b, o[:0]), r"warpweave::grouped_mm: 'offs' is empty"),
    (lambda a, b, o: ops.grouped_mm(a.numpy(), b.numpy(), o.numpy().astype(np.int64)),
     r"^grouped_mm: 'offs' has dtype int64; expected int32"),
])
def test_grouped_mm_errors_name_op_and_what_is_accepted(call, match):
    a, b = torch.randn(10, 16), torch.randn(3, 16, 8)
    with pytest.raises(ValueError, match=match):
        call(a, b, torch.tensor([3, 3, 10], dtype=torch.int32))
