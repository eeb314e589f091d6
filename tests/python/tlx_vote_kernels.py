"""tlx.vote_ballot_sync over tensor predicates (TLX's rule: each thread votes with the OR of the
elements it holds and every one of them gets its warp's ballot), as TLX's Blackwell attention
tutorials decide whether to rescale: for tests/python/test_tlx_vote.py."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def _or(x, y):
    return x | y


@ww.jit
def tmem_vote(x_ptr, ballot_ptr, COLS: tl.constexpr):
    """x [128, COLS] through tensor memory, where thread r holds row r: ballot of x < 0.5."""
    buf = tlx.local_alloc((128, COLS), tl.float32, 1, tlx.storage_kind.tmem)
    offs = tl.arange(0, 128)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    v = tlx.local_load(buf[0])
    tl.store(ballot_ptr + offs, tlx.vote_ballot_sync(0xFFFFFFFF, v < 0.5))


@ww.jit
def tmem_vote_any(x_ptr, flag_ptr):
    """flag = 1 when some alpha of a [128, 1] tile is below 1 (the tutorials' RESCALE_OPT): the
    ballots, != 0, OR-reduced and reshaped to a scalar that a run-time if tests."""
    buf = tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem)
    tlx.local_store(buf[0], tl.load(x_ptr + tl.arange(0, 128)[:, None]))
    alpha = tlx.local_load(buf[0])
    should = tlx.vote_ballot_sync(0xFFFFFFFF, alpha < 1.0) != 0
    red = tl.reduce(should, axis=0, combine_fn=_or)
    if tl.reshape(red, ()):
        tl.store(flag_ptr, 1)
    else:
        tl.store(flag_ptr, 0)
