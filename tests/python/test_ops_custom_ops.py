"""torch.ops.warpweave.* (warpweave.ops._library) on CPU tensors, which run in the interpreter:
values and gradients against PyTorch's own ops, the fake implementations (torch.library.opcheck),
torch.compile(fullgraph=True) of a small model that calls them, and the errors a bad call gets
(the op, the argument and what is accepted)."""

import importlib

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

import warpweave.ops  # noqa: E402,F401  (registers torch.ops.warpweave)

W = torch.ops.warpweave
F = torch.nn.functional


def leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def close(actual, expected, tol):
    torch.testing.assert_close(actual.float(), expected.float(), atol=tol, rtol=tol)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(1234)


# ------------------------------------------------------------------------------------------------
# Values and gradients against PyTorch
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-3),
                                       (torch.bfloat16, 2e-2)])
def test_softmax_values_and_gradient(dtype, tol):
    x = torch.randn(3, 5, 70, dtype=dtype) * 3
    (a,), (b,) = leaves(x), leaves(x)
    y = W.softmax(a)
    ref = torch.softmax(b.float(), -1).to(dtype)
    close(y, ref, tol)
    g = torch.randn_like(y)
    y.backward(g)
    ref.backward(g)
    close(a.grad, b.grad, 4 * tol)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float16, 4e-3)])
def test_layernorm_values_and_gradients(dtype, tol):
    x = torch.randn(6, 100, dtype=dtype) * 2 + 1
    w, b = torch.randn(100, dtype=dtype), torch.randn(100, dtype=dtype)
    (x1, w1, b1), (x2, w2, b2) = leaves(x, w, b), leaves(x, w, b)
    y, mean, rstd = W.layernorm(x1, w1, b1, 1e-5)
    ref = F.layer_norm(x2.float(), (100,), w2.float(), b2.float(), 1e-5).to(dtype)
    close(y, ref, tol)
    close(mean, x.float().mean(-1), 1e-4)
    assert not mean.requires_grad and not rstd.requires_grad
    g = torch.randn_like(y)
    y.backward(g)
    ref.backward(g)
    for mine, theirs in ((x1, x2), (w1, w2), (b1, b2)):
        close(mine.grad, theirs.grad, 10 * tol)


@pytest.mark.parametrize("activation", [None, "relu", "leaky_relu"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_values_and_gradients(activation, with_bias):
    a = torch.randn(40, 48, dtype=torch.float16)
    b = torch.randn(48, 24, dtype=torch.float16)
    bias = torch.randn(24) if with_bias else None
    a1, b1 = leaves(a, b)
    a2, b2 = leaves(a, b)
    bias1, bias2 = leaves(bias) if with_bias else (None,), None
    bias1 = bias1[0] if with_bias else None
    if with_bias:
        (bias2,) = leaves(bias)
    c = W.matmul(a1, b1, bias1, activation)
    ref = a2.float() @ b2.float()
    if with_bias:
        ref = ref + bias2
    if activation == "relu":
        ref = torch.relu(ref)
    elif activation == "leaky_relu":
        ref = F.leaky_relu(ref, 0.01)
    assert c.dtype == torch.float16 and c.shape == (40, 24)
    close(c, ref, 3e-2)
    g = torch.randn(40, 24, dtype=torch.float16)
    c.backward(g)
    ref.backward(g.float())
    close(a1.grad, a2.grad, 5e-2)
    close(b1.grad, b2.grad, 5e-2)
    if with_bias:
        close(bias1.grad, bias2.grad, 5e-2)


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("sample_weights", [False, True])
def test_embedding_bag_values_and_gradients(mode, sample_weights):
    if mode == "mean" and sample_weights:
        pytest.skip("torch's embedding_bag takes per_sample_weights only with mode='sum'")
    weight = torch.randn(30, 20)
    indices = torch.randint(0, 30, (40,))
    offsets = torch.tensor([0, 7, 7, 19, 33, 40])  # an empty bag included
    psw = torch.randn(40) if sample_weights else None
    (w1,), (w2,) = leaves(weight), leaves(weight)
    p1, p2 = (leaves(psw)[0], leaves(psw)[0]) if sample_weights else (None, None)
    out = W.embedding_bag(w1, indices, offsets, p1, mode)
    ref = F.embedding_bag(indices, w2, offsets, mode=mode, per_sample_weights=p2,
                          include_last_offset=True)
    close(out, ref, 1e-5)
    g = torch.randn_like(out)
    out.backward(g)
    ref.backward(g)
    close(w1.grad, w2.grad, 1e-5)
    if sample_weights:
        close(p1.grad, p2.grad, 1e-4)


def test_add_and_row_sum_gradients():
    x, y = torch.randn(5, 33), torch.randn(5, 33)
    (x1, y1), (x2, y2) = leaves(x, y), leaves(x, y)
    s = W.row_sum(W.add(x1, y1))
    ref = (x2 + y2).sum(-1)
    close(s, ref, 1e-5)
    g = torch.randn(5)
    s.backward(g)
    ref.backward(g)
    close(x1.grad, x2.grad, 0)
    close(y1.grad, y2.grad, 0)
    values, indices = W.row_max(x)
    close(values, x.max(-1).values, 0)
    assert indices.dtype == torch.int32 and torch.equal(indices.long(), x.argmax(-1))


# ------------------------------------------------------------------------------------------------
# Fake implementations, registrations, torch.compile
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["softmax", "layernorm", "matmul", "embedding_bag"])
def test_opcheck(case):
    # Schema, fake tensor, autograd registration and AOT dispatch checks of torch.library.
    if case == "softmax":
        op, args = W.softmax.default, (torch.randn(4, 24, requires_grad=True),)
    elif case == "layernorm":
        op, args = W.layernorm.default, (torch.randn(4, 24, requires_grad=True),
                                         torch.randn(24, requires_grad=True),
                                         torch.randn(24, requires_grad=True), 1e-5)
    elif case == "matmul":
        op, args = W.matmul.default, (torch.randn(16, 32, dtype=torch.float16, requires_grad=True),
                                      torch.randn(32, 16, dtype=torch.float16, requires_grad=True),
                                      None, "relu")
    else:
        op, args = W.embedding_bag.default, (torch.randn(10, 16, requires_grad=True),
                                             torch.randint(0, 10, (9,)),
                                             torch.tensor([0, 4, 9]), None, "sum")
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_autograd_registration",
                                                "test_faketensor"))


class SmallModel(torch.nn.Module):
    """Embedding bag -> layer norm -> matmul with bias and relu -> softmax."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Parameter(torch.randn(50, 32))
        self.w = torch.nn.Parameter(torch.ones(32))
        self.b = torch.nn.Parameter(torch.zeros(32))
        self.proj = torch.nn.Parameter(torch.randn(32, 16, dtype=torch.float16) * 0.2)
        self.bias = torch.nn.Parameter(torch.zeros(16))

    def forward(self, indices, offsets):
        e = W.embedding_bag(self.emb, indices, offsets, None, "mean")
        h = W.layernorm(e, self.w, self.b, 1e-5)[0]
        z = W.matmul(h.to(torch.float16), self.proj, self.bias, "relu")
        return W.softmax(z.float())


def test_torch_compile_fullgraph_forward_and_backward():
    # aot_eager: Dynamo traces the whole model (fullgraph: a graph break would raise) through
    # the fake implementations, and AOTAutograd traces the backward through register_autograd.
    model = SmallModel()
    indices, offsets = torch.randint(0, 50, (24,)), torch.tensor([0, 5, 11, 18, 24])
    expected = model(indices, offsets)
    expected.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = compiled(indices, offsets)
    close(out, expected, 1e-5)
    out.square().sum().backward()
    for p, g in zip(model.parameters(), grads):
        close(p.grad, g, 1e-4)


def test_torch_compile_fullgraph_default_backend():
    # Inductor (the default backend) keeps the custom ops as calls in its generated code.
    def f(x, w, b):
        return W.softmax(W.layernorm(x, w, b, 1e-5)[0])

    x, w, b = torch.randn(4, 64), torch.randn(64), torch.randn(64)
    close(torch.compile(f, fullgraph=True)(x, w, b), f(x, w, b), 1e-6)


# ------------------------------------------------------------------------------------------------
# Errors: the op, the argument and what is accepted
# ------------------------------------------------------------------------------------------------


def test_wrong_dtype_names_op_argument_and_accepted_dtypes():
    with pytest.raises(ValueError, match=r"warpweave::softmax.*'x' has dtype int64; expected "
                                         r"float16 or bfloat16 or float32"):
        W.softmax(torch.ones(3, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"warpweave::matmul.*'a' has dtype float32; expected "
                                         r"float16 or bfloat16"):
        W.matmul(torch.ones(4, 4), torch.ones(4, 4))


def test_wrong_shape_names_op_and_argument():
    with pytest.raises(ValueError, match=r"warpweave::layernorm.*'w' must have shape \(8,\)"):
        W.layernorm(torch.ones(2, 8), torch.ones(7), torch.ones(8), 1e-5)
    with pytest.raises(ValueError, match=r"warpweave::attention.*'k' must have shape"):
        W.attention(torch.ones(1, 1, 16, 16, dtype=torch.float16),
                    torch.ones(1, 1, 8, 16, dtype=torch.float16),
                    torch.ones(1, 1, 16, 16, dtype=torch.float16), False, None)
    with pytest.raises(ValueError, match=r"warpweave::embedding_bag.*'mode' must be 'sum' or "
                                         r"'mean'"):
        W.embedding_bag(torch.ones(4, 4), torch.tensor([0]), torch.tensor([0, 1]), None, "max")


def test_wrong_device_names_op_and_argument():
    from warpweave.ops import _library

    # What the real implementations check first (the GPU tests check a CPU / CUDA mix).
    with pytest.raises(ValueError, match=r"warpweave::add: 'y' is on meta; the op takes"):
        _library._device_of("add", {"x": torch.ones(2), "y": torch.ones(2, device="meta")})
    with pytest.raises(ValueError, match=r"warpweave::add: 'x' is on meta; the op takes CPU "
                                         r"tensors \(run in the interpreter\) or CUDA tensors"):
        _library._device_of("add", {"x": torch.ones(2, device="meta")})
    # The plain API refuses CPU tensors (NumPy arrays or CUDA tensors, or WARPWEAVE_INTERPRET=1).
    with pytest.raises(ValueError, match=r"softmax: 'x' is a torch tensor on cpu; pass CUDA "
                                         r"tensors"):
        warpweave.ops.softmax(torch.ones(2, 3))


def test_errors_from_the_fake_implementation_under_torch_compile():
    def f(x):
        return W.softmax(x)

    with pytest.raises(Exception, match=r"warpweave::softmax: 'x' has dtype int32"):
        torch.compile(f, fullgraph=True, backend="aot_eager")(torch.ones(2, 3, dtype=torch.int32))
