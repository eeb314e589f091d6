"""Small kernels of our own for tests/python/test_blackwell_clc.py: persistent loops over tiles
with TLX's cluster launch control (tlx.clc_create_context / clc_producer / clc_consumer), written
as TLX's Blackwell GEMMs drive it (the producer's phase starts at 1, the consumer's at 0), plus
flags that plant synchronization bugs."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def clc_tiles(x_ptr, out_ptr, count_ptr, owner_ptr, BLOCK: tl.constexpr,
              WRONG_CONSUMER_PHASE: tl.constexpr, ASK_AFTER_FAILURE: tl.constexpr):
    # One agent: it asks for the next tile, processes the current one, then takes the answer.
    ctx = tlx.clc_create_context(num_consumers=1, num_stages=1)
    pid = tl.program_id(0)
    tile = pid
    p_producer = 1
    p_consumer = 1 if WRONG_CONSUMER_PHASE else 0
    while tile != -1:
        tlx.clc_producer(ctx, p_producer)
        p_producer ^= 1
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0 + 1.0)
        tl.atomic_add(count_ptr + tile, 1)
        tl.store(owner_ptr + tile, pid)
        tile = tlx.clc_consumer(ctx, p_consumer)
        p_consumer ^= 1
    if ASK_AFTER_FAILURE:
        # (the phase of the wait that passes: nobody arrives after a failed response)
        tlx.clc_producer(ctx, p_producer ^ 1)


@ww.jit
def clc_tiles_ws(x_ptr, out_ptr, count_ptr, owner_ptr, BLOCK: tl.constexpr,
                 PRODUCER_SKIPS_EMPTY_WAIT: tl.constexpr):
    # Warp-specialized: the default task asks and stores, a 4-warp task counts; both consume
    # every response (num_consumers=2), as the tasks of TLX's blackwell_gemm_ws.py do.
    ctx = tlx.clc_create_context(num_consumers=2, num_stages=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tile = tl.program_id(0)
            p_producer = 1
            p_consumer = 0
            while tile != -1:
                tlx.clc_producer(ctx, 1 if PRODUCER_SKIPS_EMPTY_WAIT else p_producer)
                p_producer ^= 1
                offs = tile * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0 + 1.0)
                tl.store(owner_ptr + tile, tl.program_id(0))
                tile = tlx.clc_consumer(ctx, p_consumer)
                p_consumer ^= 1
        with tlx.async_task(num_warps=4):
            tile = tl.program_id(0)
            p_consumer = 0
            while tile != -1:
                tl.atomic_add(count_ptr + tile, 1)
                tile = tlx.clc_consumer(ctx, p_consumer)
                p_consumer ^= 1


@ww.jit
def clc_tiles_pair(x_ptr, out_ptr, count_ptr, owner_ptr, BLOCK: tl.constexpr):
    # A cluster of 2 CTAs: CTA 0 asks for both, every CTA waits for its own copy of the
    # response and arrives on CTA 0's empty barrier; each takes x + its rank.
    ctx = tlx.clc_create_context(num_consumers=2, num_stages=1)
    pid = tl.program_id(0)
    tile = pid
    p_producer = 1
    p_consumer = 0
    while tile != -1:
        tlx.clc_producer(ctx, p_producer, multi_ctas=True)
        p_producer ^= 1
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0 + 1.0)
        tl.atomic_add(count_ptr + tile, 1)
        tl.store(owner_ptr + tile, pid)
        tile = tlx.clc_consumer(ctx, p_consumer, multi_ctas=True)
        p_consumer ^= 1
    tlx.cluster_barrier()
