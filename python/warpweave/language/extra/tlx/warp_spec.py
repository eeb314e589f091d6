"""Helpers of warp-specialized pipelines (`tlx.warp_spec`, as in Triton's TLX): kernel-callable
@jit functions, compiled into the kernels that call them."""

import warpweave.language as tl
from warpweave.jit import jit


@jit
def get_bufidx_phase(accum_cnt, NUM_BUFFERS: tl.constexpr):
    """(slot, phase) of the `accum_cnt`-th use of a ring of NUM_BUFFERS buffers: the slot is the
    count modulo the ring size, and the phase (0 or 1) flips each time the ring wraps, which is
    the parity a consumer waits for on that slot's barrier."""
    slot = accum_cnt % NUM_BUFFERS
    wraps = accum_cnt // NUM_BUFFERS
    return slot, wraps & 1
