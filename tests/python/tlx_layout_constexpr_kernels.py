"""Small kernels of our own for tests/python/test_tlx_layout_constexpr.py: TLX shared layout
objects (tlx.swizzled_layout, tlx.swizzled_shared_layout_encoding,
tlx.padded_shared_layout_encoding) given as constexpr kernel arguments and used as
tlx.local_alloc's layout=, and tlx.dump_layout."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def roundtrip(out_ptr, SW: tl.constexpr):
    # Write r * 64 + c to a [128, 64] fp16 buffer in layout SW, read it back, store it.
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((128, 64), tl.float16, tl.constexpr(1), layout=SW)
    v = tlx.local_view(buf, 0)
    tlx.local_store(v, offs.to(tl.float16))
    tl.store(out_ptr + offs, tlx.local_load(v))


@ww.jit
def roundtrip_default(out_ptr):
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((128, 64), tl.float16, tl.constexpr(1))
    v = tlx.local_view(buf, 0)
    tlx.local_store(v, offs.to(tl.float16))
    tl.store(out_ptr + offs, tlx.local_load(v))


@ww.jit
def multibuffer(x_ptr, out_ptr, SW: tl.constexpr):
    # Two buffers of one allocation in layout SW: out = x + 2 x.
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    x = tl.load(x_ptr + offs)
    buf = tlx.local_alloc((64, 64), tl.float32, tl.constexpr(2), layout=SW)
    v0 = tlx.local_view(buf, 0)
    v1 = tlx.local_view(buf, 1)
    tlx.local_store(v0, x)
    tlx.local_store(v1, x * 2.0)
    a = tlx.local_load(v0)
    b = tlx.local_load(v1)
    tl.store(out_ptr + offs, a + b)


@ww.jit
def in_loop(x_ptr, out_ptr, SW: tl.constexpr, N: tl.constexpr):
    # A buffer in layout SW read N times in a loop: out = N x.
    offs = tl.arange(0, 64)[:, None] * 32 + tl.arange(0, 32)[None, :]
    buf = tlx.local_alloc((64, 32), tl.float32, tl.constexpr(1), layout=SW)
    v = tlx.local_view(buf, 0)
    tlx.local_store(v, tl.load(x_ptr + offs))
    acc = tl.zeros((64, 32), tl.float32)
    for _ in range(N):
        acc += tlx.local_load(v)
    tl.store(out_ptr + offs, acc)


@ww.jit
def literal_in_kernel(out_ptr):
    # The same objects written in the kernel.
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((128, 64), tl.float16, tl.constexpr(1),
                          layout=tlx.swizzled_layout(3, 0, 6, order=[1, 0]))
    v = tlx.local_view(buf, 0)
    tlx.local_store(v, offs.to(tl.float16))
    tl.store(out_ptr + offs, tlx.local_load(v))


@ww.jit
def tma_into(desc, out_ptr, SW: tl.constexpr):
    # A TMA load into a [64, 64] fp16 buffer in layout SW.
    buf = tlx.local_alloc((64, 64), tl.float16, tl.constexpr(1), layout=SW)
    bar = tlx.alloc_barriers(1, 1)
    v = tlx.local_view(buf, 0)
    b = tlx.local_view(bar, 0)
    tlx.barrier_expect_bytes(b, 64 * 64 * 2)
    tlx.async_descriptor_load(desc, v, [0, 0], b)
    tlx.barrier_wait(b, 0)
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tl.store(out_ptr + offs, tlx.local_load(v))


@ww.jit
def wgmma_from(out_ptr, SA: tl.constexpr, SB: tl.constexpr):
    # async_dot of a [64, 64] A in layout SA and a [64, 64] B in layout SB (fp16).
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_alloc((64, 64), tl.float16, tl.constexpr(1), layout=SA)
    b = tlx.local_alloc((64, 64), tl.float16, tl.constexpr(1), layout=SB)
    av = tlx.local_view(a, 0)
    bv = tlx.local_view(b, 0)
    tlx.local_store(av, (offs % 7).to(tl.float16))
    tlx.local_store(bv, (offs % 5).to(tl.float16))
    tlx.fence_async_shared()
    acc = tlx.async_dot(av, bv)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + offs, acc)


@ww.jit
def dump(BLOCK: tl.constexpr):
    x = tl.arange(0, BLOCK)
    tlx.dump_layout(x)
    buf = tlx.local_alloc((BLOCK, ), tl.int32, tl.constexpr(1))
    v = tlx.local_view(buf, 0)
    tlx.local_store(v, x)
    tlx.dump_layout(v)


@ww.jit
def dump_swizzled(SW: tl.constexpr):
    buf = tlx.local_alloc((128, 64), tl.float16, tl.constexpr(2), layout=SW)
    tlx.dump_layout(tlx.local_view(buf, 1))
    x = tl.zeros((128, 64), tl.float16)
    tlx.local_store(tlx.local_view(buf, 0), x)
    tlx.dump_layout(x)


@ww.jit
def sliced(out_ptr, SW: tl.constexpr):
    # A local_slice of a [64, 64] fp32 buffer in layout SW, read back.
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((64, 64), tl.float32, tl.constexpr(1), layout=SW)
    v = tlx.local_view(buf, 0)
    tlx.local_store(v, offs.to(tl.float32))
    half = tlx.local_slice(v, [0, 32], [64, 32])
    o = tl.arange(0, 64)[:, None] * 32 + tl.arange(0, 32)[None, :]
    tl.store(out_ptr + o, tlx.local_load(half))
