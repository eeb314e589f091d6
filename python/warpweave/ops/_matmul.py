"""Matmul: the tl kernel (kernels/matmul.py, software-pipelined on sm_90a, any GPU), the Hopper
TLX GEMMs (kernels/hopper/gemm_ws.py, gemm_ws_pingpong.py, gemm_pipelined.py: sm_90 GPUs, or
the interpreter, through host TMA descriptors) and the Blackwell TLX GEMM
(kernels/blackwell/gemm_ws.py: sm_100 GPUs compiling for sm_100a, or the interpreter)."""

from __future__ import annotations

import warpweave as ww

from . import _common, _tuning
from ._common import (_HALF_FLOATS, _Place, _check_dtype, _check_ndim, _contiguous,
                      _descriptor, _dtype_name, _planned, _strides, _tma_operand)
from .kernels import matmul as matmul_kernels
from .kernels.blackwell import gemm_ws as bw_gemm_ws_kernels
from .kernels.hopper import gemm_pipelined as gemm_pipelined_kernels
from .kernels.hopper import gemm_ws as gemm_ws_kernels
from .kernels.hopper import gemm_ws_pingpong as gemm_ws_pingpong_kernels


def _matmul_operands(op: str, a, b):
    """Checks the two operands of a matmul (2-D, fp16 or bf16, one dtype, inner dims equal):
    returns where the result lives, its dtype and M, N, K."""
    place = _Place(op, {"a": a, "b": b})
    dt = _check_dtype(op, "a", a, _HALF_FLOATS)
    if _dtype_name(b) != dt:
        raise ValueError(f"{op}: 'b' has dtype {_dtype_name(b)} but 'a' has {dt}; both must be "
                         f"float16 or both bfloat16")
    _check_ndim(op, "a", a, (2,))
    _check_ndim(op, "b", b, (2,))
    M, K = a.shape
    if b.shape[0] != K:
        raise ValueError(f"{op}: 'b' has shape {tuple(b.shape)} but 'a' has {tuple(a.shape)}; "
                         f"b's first dimension must equal a's second ({K})")
    return place, dt, M, b.shape[1], K


_ACTIVATIONS = {None: "", "relu": "relu", "leaky_relu": "leaky_relu"}


# Where ops.matmul may take the TLX GEMMs (TLX_GEMM_CONFIGS; "ws" is the fixed choice) instead of
# the tl kernel: on sm_90 GPUs, for calls they take (no activation, K and N multiples of 8,
# K > 0). The issue-21 measurements on the H200: the TLX GEMM 1.0x cuBLAS, the tl kernel
# 0.83-0.93x.
MATMUL_TLX_ON_SM90 = True

# Where ops.matmul takes the Blackwell TLX GEMM (BW_GEMM_CONFIGS["bw_ws"], untuned: no Blackwell
# GPU has run it, so there are no measurements to choose among configurations) instead of the tl
# kernel: on compute capability 10.x GPUs compiling for sm_100a, for calls it takes (no
# activation, K and N multiples of 8, K > 0, 16-byte aligned bases).
MATMUL_TLX_ON_SM100 = True
_common.routing_switches(__name__, "MATMUL_TLX_ON_SM90", "MATMUL_TLX_ON_SM100")

# The tl kernel's fixed GPU configuration: on sm_90a the loop is software-pipelined, 5 stages of
# 128x32 + 32x256 tiles (cp.async, 3 k-steps loaded ahead of the MMA), two warp groups of wgmma
# splitting BLOCK_M. The interpreter's is small (it executes every lane of a block).
MATMUL_GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, num_warps=8,
                         num_stages=5)
_INTERPRETER_CONFIG = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_warps=4)


def _takes_tlx_gemm(place, a, b, activation, N, K) -> bool:
    """Whether ops.matmul may launch the TLX GEMMs (its operands must be addressable by TMA:
    16-byte rows and bases)."""
    return (MATMUL_TLX_ON_SM90 and activation is None and _common._is_sm90(place) and K > 0
            and K % 8 == 0 and N % 8 == 0 and _common._address(a) % 16 == 0
            and _common._address(b) % 16 == 0)


def _takes_bw_gemm(place, a, b, activation, N, K) -> bool:
    """Whether ops.matmul may launch the Blackwell TLX GEMM (TMA-addressable operands, as
    _takes_tlx_gemm)."""
    return (MATMUL_TLX_ON_SM100 and activation is None and _common._is_sm100(place) and K > 0
            and K % 8 == 0 and N % 8 == 0 and _common._address(a) % 16 == 0
            and _common._address(b) % 16 == 0)


@_planned
def matmul(a, b, activation=None, kernel=None):
    """activation(a @ b) for fp16 or bf16 a [M, K] and b [K, N] (any strides), accumulated in fp32
    and returned in a's dtype. activation: None, "relu" or "leaky_relu" (slope 0.01). kernel:
    None picks (on GPUs the fastest for the shape of the tl kernel's and, on sm_90 where they
    apply (MATMUL_TLX_ON_SM90), the TLX GEMMs' configurations, tuned once per shape:
    warpweave.ops._tuning; WARPWEAVE_OPS_TUNING=0 takes the TLX warp-specialized GEMM where it
    applies and the tl kernel elsewhere; the tl kernel in the interpreter), "tl" takes the tl
    kernel, "tlx" a TLX GEMM (sm_90 CUDA tensors, no activation; "ws" untuned). On compute
    capability 10.x GPUs compiling for sm_100a, kernel None or "tlx" takes the Blackwell TLX GEMM
    (matmul_tlx's "bw_ws", untuned) where it applies (MATMUL_TLX_ON_SM100; "tlx" always)."""
    op = "matmul"
    if activation not in _ACTIVATIONS:
        raise ValueError(f"{op}: 'activation' must be None, 'relu' or 'leaky_relu', got "
                         f"{activation!r}")
    if kernel not in (None, "tl", "tlx"):
        raise ValueError(f"{op}: 'kernel' must be None, 'tl' or 'tlx', got {kernel!r}")
    place, dt, M, N, K = _matmul_operands(op, a, b)
    if kernel == "tlx" and activation is not None:
        raise ValueError(f"{op}: the TLX GEMM (kernel='tlx') takes no activation, got "
                         f"{activation!r}")
    gpu = place.on_gpu and M > 0 and N > 0
    if gpu and not _common._is_sm90(place) and (
            kernel == "tlx" and _common._is_sm100(place) or
            kernel is None and _takes_bw_gemm(place, a, b, activation, N, K)):
        return _matmul_tlx(op, a, b, "bw_ws", None, compile_only=False)
    tlx = kernel == "tlx" or (kernel is None and gpu and
                              _takes_tlx_gemm(place, a, b, activation, N, K))
    if kernel == "tlx" and not (gpu and _common._is_sm90(place)):
        # The interpreter, empty products and other GPUs (whose compile refuses it).
        return _matmul_tlx(op, a, b, "ws", None, compile_only=False)
    c = place.empty((M, N), dt)
    if M == 0 or N == 0:
        return c
    if min(_strides(a)) < 0:
        a = _contiguous(a)
    if min(_strides(b)) < 0:
        b = _contiguous(b)
    if not place.on_gpu:
        _launch_tl(place.launch, a, b, c, activation, _INTERPRETER_CONFIG)
        return c
    candidates = _candidates(place, dt, M, N, tl=kernel != "tlx", tlx=tlx)
    default = candidates[0]

    def launch(candidate, go):
        if candidate.kernel == "tl":
            _launch_tl(go, a, b, c, activation, candidate.config)
        else:
            ta, tb, tc = (_tma_operand(op, name, t, place) for name, t in (("a", a), ("b", b),
                                                                           ("c", c)))
            _launch_tlx(place, go, ta, tb, tc, candidate.kernel[4:], candidate.config)

    chosen = _tuning.choose(place, op, (dt, M, N, K, activation or ""), candidates, default,
                            launch, [_KERNELS[name] for name in
                                     dict.fromkeys(c.kernel for c in candidates)])
    launch(chosen, place.launch)
    return c


def _launch_tl(go, a, b, c, activation, config):
    (M, K), N = a.shape, b.shape[1]
    sa, sb, sc = _strides(a), _strides(b), _strides(c)
    go(matmul_kernels.matmul_kernel,
       lambda m: (ww.cdiv(M, m["BLOCK_M"]) * ww.cdiv(N, m["BLOCK_N"]),),
       a, b, c, M, N, K, sa[0], sa[1], sb[0], sb[1], sc[0], sc[1],
       ACTIVATION=_ACTIVATIONS[activation], **config)


# ------------------------------------------------------------------------------------------------
# Candidates (warpweave.ops._tuning): the fixed configuration first
# ------------------------------------------------------------------------------------------------

# The tl kernel: its fixed tiles; 128x128x64 in 4 stages (more programs, deeper k-steps);
# 128x256x64 in 3; one warp group on 64x128 tiles (short or skinny products).
_TL_CONFIGS = [
    MATMUL_GPU_CONFIG,
    dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4),
]

# Tile shapes of the TLX GEMMs: 64x256 wgmma tiles per consumer where two consumers share a
# tile. Chosen with bench/sweep_gemm.py on the H200 (2026-11-30, fp16/bf16 at 4096^3 and 8192^3,
# median ratio to cuBLAS timed beside each): the cooperative kernel stores C in four 64-column
# chunks, which leaves shared memory for a 4th stage of 128x256x64 (geomean 0.88x -> 0.99x
# cuBLAS; the chunks alone, at 3 stages, 0.90x), and takes 16 tile-rows per group (1.02x; 16
# rows without the 4th stage: 0.89x). The 2-CTA cluster variants measured 0.67x (A shared) and
# 0.72x (B shared) at 3 stages and slower with 4 (they keep 3); those measurements ran with a
# MEMBAR.ALL.GPU before each stage release and an L1 invalidation after each producer wait
# (cluster-scoped barriers, removed in session 34). Without them (H200, session 35, kernel time
# beside cuBLAS) B shared on 128x256 tiles in 4 stages ran 1.02x / 1.18x / 1.06x at
# 1024x4096x4096 / 4096^3 / 8192^3 against 1.04x / 1.19x / 1.06x for one CTA: no faster.
TLX_GEMM_CONFIGS = {
    # Two consumer warp groups split a 128x256 tile along M.
    "ws": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4,
               SMEM_EPILOGUE=True, EPI_SUBTILE=4),
    # "ws" in 2-CTA clusters on N-neighbour tiles: each CTA multicasts one A half to both.
    "ws_cluster": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3,
                       SMEM_EPILOGUE=True, CLUSTER_N=2),
    # "ws" in 2-CTA clusters on M-neighbour tiles: each CTA multicasts one column half of B.
    "ws_cluster_m": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3,
                         SMEM_EPILOGUE=True, CLUSTER_M=2),
    # Each consumer owns whole 128x128 tiles (two m64n128 wgmmas a step); the two alternate.
    "pingpong": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4),
    # No specialization: two warp groups (num_warps=8) split a 128x256 tile.
    "pipelined": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3),
}


# The Blackwell GEMM (kernels/blackwell/gemm_ws.py): 128x256x64 tiles, two TMEM accumulators (all
# 512 columns), C stored in four 64-column chunks. One CTA: 4 stages of 48 KB (229,776 bytes of
# shared memory in all for fp16 / bf16 C); CTA pairs hold half of B's columns each (32 KB
# stages): 6. Tiles from cluster launch control (USE_CLC; USE_CLC=False: static persistence,
# min(SMs, tiles) programs). No Blackwell GPU has run it: checked by ptxas for sm_100a (248
# registers, no spills) and in the interpreter (tests/python/test_blackwell_gemm_ws.py).
BW_GEMM_CONFIGS = {
    # One CTA per 128x256 tile.
    "bw_ws": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4, NUM_ACC=2,
                  EPI_SUBTILE=4, USE_CLC=True, PAIR=False),
    # CTA pairs (clusters of 2): one 256x256 tcgen05.mma.cta_group::2 per k-step over the two
    # CTAs' M-neighbour tiles, each CTA loading half of B's columns.
    "bw_ws_2cta": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=6,
                       NUM_ACC=2, EPI_SUBTILE=4, USE_CLC=True, PAIR=True),
}


def matmul_tlx(a, b, variant="ws", config=None):
    """a @ b with a TLX GEMM. Hopper (fp16 or bf16 CUDA tensors on an sm_90 GPU): variant "ws"
    (persistent, warp-specialized, cooperative: kernels/hopper/gemm_ws.py), "ws_cluster" /
    "ws_cluster_m" (the same in 2-CTA clusters that share A / B through multicast TMA),
    "pingpong" (persistent, warp-specialized, consumers alternate tiles:
    kernels/hopper/gemm_ws_pingpong.py) or "pipelined" (kernels/hopper/gemm_pipelined.py).
    Blackwell (CUDA tensors on a compute capability 10.x GPU, compiled for sm_100a): "bw_ws"
    (persistent, warp-specialized, TMEM accumulators, tiles from cluster launch control:
    kernels/blackwell/gemm_ws.py) or "bw_ws_2cta" (the same over CTA pairs). NumPy arrays run
    any variant in the interpreter; rows must be multiples of 16 bytes (K and N multiples of 8).
    `config` overrides entries of TLX_GEMM_CONFIGS[variant] or BW_GEMM_CONFIGS[variant] (e.g.
    USE_CLC=False for static persistence, BLOCK_N, NUM_STAGES, EPI_SUBTILE)."""
    return _matmul_tlx("matmul_tlx", a, b, variant, config, compile_only=False)


def compile_matmul_tlx(a, b, variant="ws", config=None):
    """Compiles the kernel that matmul_tlx(a, b, variant, config) would launch, without launching
    it (sweeps compile their configurations in parallel threads first)."""
    _matmul_tlx("compile_matmul_tlx", a, b, variant, config, compile_only=True)


def _matmul_tlx(op, a, b, variant, config, compile_only):
    if variant not in TLX_GEMM_CONFIGS and variant not in BW_GEMM_CONFIGS:
        raise ValueError(f"{op}: 'variant' must be one of "
                         f"{sorted(TLX_GEMM_CONFIGS) + sorted(BW_GEMM_CONFIGS)}, got {variant!r}")
    if variant in BW_GEMM_CONFIGS:
        return _matmul_bw(op, a, b, variant, config, compile_only)
    place, dt, M, N, K = _matmul_operands(op, a, b)
    a = _tma_operand(op, "a", a, place)
    b = _tma_operand(op, "b", b, place)
    c = place.empty((M, N), dt)
    if M == 0 or N == 0:
        return c
    c = _tma_operand(op, "c", c, place)
    go = _tuning.compile_only if compile_only else _tuning.direct
    _launch_tlx(place, go, a, b, c, variant, dict(TLX_GEMM_CONFIGS[variant], **(config or {})))
    return c


def _bw_grid(place, M, N, cfg) -> int:
    """The Blackwell GEMMs' grid: with USE_CLC one program per tile (cluster launch control
    cancels the programs not started yet that a persistent one takes), else one persistent
    program per SM, or per tile where there are fewer; with PAIR CTA tiles over tile-rows
    rounded up to even, whole clusters."""
    pair = cfg.get("PAIR", False)
    rows = ww.cdiv(M, cfg["BLOCK_M"])
    if pair:
        rows = ww.cdiv(rows, 2) * 2
    tiles = rows * ww.cdiv(N, cfg["BLOCK_N"])
    if cfg.get("USE_CLC", True):
        return tiles
    if pair:
        return min(place.num_sms() // 2, tiles // 2) * 2
    return min(place.num_sms(), tiles)


def _check_bw_tiles(op, cfg):
    """The tile shapes the Blackwell GEMM's MMAs and TMA boxes take: a 128-row tile (one CTA's
    tcgen05.mma M), BLOCK_N a multiple of 16 up to 256 (of which a CTA pair's half is B's box),
    BLOCK_K a multiple of 16, and EPI_SUBTILE column chunks of whole 16-byte rows of C."""
    bm, bn, bk, sub = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["EPI_SUBTILE"]
    if bm != 128:
        raise ValueError(f"{op}: BLOCK_M must be 128 (one CTA's tcgen05 MMA rows), got {bm}")
    if bn % 16 or not 16 <= bn <= 256 or (cfg["PAIR"] and bn % 32):
        raise ValueError(f"{op}: BLOCK_N must be a multiple of 16 in 16..256 (of 32 with PAIR), "
                         f"got {bn}")
    if bk % 16 or bk <= 0:
        raise ValueError(f"{op}: BLOCK_K must be a positive multiple of 16, got {bk}")
    if sub <= 0 or bn % sub or (bn // sub) % 8:
        raise ValueError(f"{op}: EPI_SUBTILE must split BLOCK_N={bn} into chunks of a multiple "
                         f"of 8 columns (16-byte rows of C), got {sub}")


def _matmul_bw(op, a, b, variant, config, compile_only):
    """matmul_tlx's Blackwell variants: kernels/blackwell/gemm_ws.py on TMA descriptors."""
    place, dt, M, N, K = _matmul_operands(op, a, b)
    unknown = set(config or {}) - set(BW_GEMM_CONFIGS[variant])
    if unknown:
        raise ValueError(f"{op}: unknown config entries {sorted(unknown)} for variant "
                         f"{variant!r}; it takes {sorted(BW_GEMM_CONFIGS[variant])}")
    cfg = dict(BW_GEMM_CONFIGS[variant], **(config or {}))
    _check_bw_tiles(op, cfg)
    a = _tma_operand(op, "a", a, place)
    b = _tma_operand(op, "b", b, place)
    c = place.empty((M, N), dt)
    if M == 0 or N == 0:
        return c
    if K == 0:
        # No MMA would write the accumulator: the product of empty operands is zero.
        c[...] = 0
        return c
    c = _tma_operand(op, "c", c, place)
    b_cols = cfg["BLOCK_N"] // (2 if cfg["PAIR"] else 1)
    go = _tuning.compile_only if compile_only else _tuning.direct
    extra = {"ctas_per_cga": (2, 1, 1)} if cfg["PAIR"] else {}
    go(bw_gemm_ws_kernels.gemm_ws_kernel, (_bw_grid(place, M, N, cfg),),
       _descriptor(a, [cfg["BLOCK_M"], cfg["BLOCK_K"]]), _descriptor(b, [cfg["BLOCK_K"], b_cols]),
       _descriptor(c, [cfg["BLOCK_M"], cfg["BLOCK_N"] // cfg["EPI_SUBTILE"]]), M, N, K, **cfg,
       num_warps=4, **extra)
    return c


def _launch_tlx(place, go, a, b, c, variant, config):
    """Launches TLX GEMM `variant` ("ws*" / "pingpong" / "pipelined") with configuration
    `config` on TMA-addressable a, b, c through go(kernel, grid, *args, **meta)."""
    (M, K), N = a.shape, b.shape[1]
    cfg = dict(config)
    block_m, block_n, block_k = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    tiles = ww.cdiv(M, block_m) * ww.cdiv(N, block_n)
    if variant.startswith("ws"):
        half = block_m // 2
        cluster_m, cluster_n = cfg.get("CLUSTER_M", 1), cfg.get("CLUSTER_N", 1)
        cluster = cluster_m * cluster_n
        # The epilogue stores C in EPI_SUBTILE column chunks when it goes through shared memory.
        c_cols = block_n // cfg.get("EPI_SUBTILE", 1) if cfg.get("SMEM_EPILOGUE") else block_n
        a_desc = _descriptor(a, [half, block_k])
        b_desc = _descriptor(b, [block_k, block_n // cluster_m])
        c_desc = _descriptor(c, [half, c_cols])
        # Whole clusters: NUM_SMS counts the CTAs of the clusters that fit on the GPU. A config
        # may ask for fewer persistent programs (sweeps use it to see whether every cluster of
        # the grid is resident at once).
        sms = cfg.pop("NUM_SMS", None) or place.num_sms()
        sms = sms // cluster * cluster
        work = ww.cdiv(ww.cdiv(M, block_m), cluster_m) * ww.cdiv(ww.cdiv(N, block_n), cluster_n)
        extra = {"ctas_per_cga": (cluster, 1, 1)} if cluster > 1 else {}
        go(gemm_ws_kernels.gemm_ws_kernel, (min(sms // cluster, work) * cluster,),
           a_desc, b_desc, c_desc, M, N, K, **cfg, NUM_SMS=sms, num_warps=4, **extra)
    elif variant == "pingpong":
        a_desc = _descriptor(a, [block_m, block_k])
        b_desc = _descriptor(b, [block_k, block_n])
        c_desc = _descriptor(c, [block_m, block_n])
        sms = place.num_sms()
        go(gemm_ws_pingpong_kernels.gemm_ws_pingpong_kernel, (min(sms, tiles),),
           a_desc, b_desc, c_desc, M, N, K, **cfg, NUM_SMS=sms, num_warps=4)
    else:
        a_desc = _descriptor(a, [block_m, block_k])
        b_desc = _descriptor(b, [block_k, block_n])
        c_desc = _descriptor(c, [block_m, block_n])
        # One warp group per 64 rows of the tile.
        go(gemm_pipelined_kernels.gemm_pipelined_kernel, (tiles,),
           a_desc, b_desc, c_desc, M, N, K, **cfg, num_warps=max(4, block_m // 16))


# The TLX GEMMs: each variant's fixed tiles; the cooperative kernel also with 8 tile-rows per
# group, with tile-columns grouped instead (RASTER_N), and on 128x128 tiles (more tiles for
# products that do not fill the GPU: 5 stages, C in two chunks). The 2-CTA cluster variants
# are not candidates: no faster than one CTA (above).
# The cooperative GEMM on 128x128 tiles: also the fixed configuration of products whose 128x256
# tiles would leave more than half the SMs idle (_candidates).
_TLX_WS_128x128 = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=16, NUM_STAGES=5,
                       SMEM_EPILOGUE=True, EPI_SUBTILE=2)
# On 128x64 tiles in 8 stages: the fixed configuration of products whose 128x128 tiles would
# still leave more than half the SMs idle. H200, session 35 (.gpurun/small34.py, kernel time from
# the profiler beside cuBLAS in the same run): 256x4096x8192 1.08x cuBLAS (wall 1.05x) against
# 0.70x on 128x128 tiles (64 programs for 132 SMs); 6 stages 0.92x; in 2-CTA clusters sharing A
# 0.77x. Where 128x128 tiles fill the GPU it loses (512x4096x4096: 0.90x against 0.99x).
_TLX_WS_128x64 = dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=16, NUM_STAGES=8,
                      SMEM_EPILOGUE=True, EPI_SUBTILE=1)

_TLX_CONFIGS = [
    ("tlx_ws", TLX_GEMM_CONFIGS["ws"]),
    ("tlx_ws", dict(TLX_GEMM_CONFIGS["ws"], GROUP_M=8)),
    ("tlx_ws", dict(TLX_GEMM_CONFIGS["ws"], RASTER_N=True)),
    ("tlx_ws", _TLX_WS_128x128),
    ("tlx_ws", _TLX_WS_128x64),
    ("tlx_pingpong", TLX_GEMM_CONFIGS["pingpong"]),
    ("tlx_pipelined", TLX_GEMM_CONFIGS["pipelined"]),
]

_KERNELS = {"tl": matmul_kernels.matmul_kernel, "tlx_ws": gemm_ws_kernels.gemm_ws_kernel,
            "tlx_pingpong": gemm_ws_pingpong_kernels.gemm_ws_pingpong_kernel,
            "tlx_pipelined": gemm_pipelined_kernels.gemm_pipelined_kernel}


def _shared_bytes(candidate, itemsize) -> int:
    """The shared memory of a candidate's buffers (as ptxas reports it for sm_90a, less the
    barriers): its stages of A and B tiles, and the TLX kernels' C buffers."""
    cfg = candidate.config
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    stages = cfg.get("num_stages", cfg.get("NUM_STAGES"))
    total = stages * (bm * bk + bk * bn) * itemsize
    if candidate.kernel == "tlx_ws" and cfg.get("SMEM_EPILOGUE"):
        sub = cfg.get("EPI_SUBTILE", 1)
        total += (2 * (bm // 2) * bn if sub == 1 else 4 * (bm // 2) * (bn // sub)) * itemsize
    elif candidate.kernel == "tlx_pingpong" and cfg.get("SMEM_EPILOGUE", True):
        total += 2 * bm * bn * itemsize
    elif candidate.kernel == "tlx_pipelined":  # C's tile on its way to the descriptor's store
        total += bm * bn * itemsize
    return total


def _candidates(place, dt, M, N, tl, tlx) -> list:
    """The configurations ops.matmul may launch for an [M, K] x [K, N] product on the call's GPU,
    the fixed one first (the TLX warp-specialized GEMM where `tlx`, else the tl kernel): those
    that fit its shared memory, without tiles larger than the product where a smaller tile
    covers it (N <= 128: no 256-wide tiles; M <= 64: no 128-row ones). The TLX GEMM's fixed
    tiles are 128x256, or 128x128 where the product has at most half as many 128x256 tiles as
    the GPU has SMs (at 512x4096x4096 on an H100, 64 tiles for 132 SMs, 128x256 ran 0.69x
    cuBLAS, session 30), or 128x64 where it has at most half as many 128x128 tiles."""
    out = []
    if tlx:
        out += [_tuning.Candidate(name, **cfg) for name, cfg in _TLX_CONFIGS]
        sms = place.num_sms()
        if 2 * ww.cdiv(M, 128) * ww.cdiv(N, 256) <= sms:
            narrow = 2 * ww.cdiv(M, 128) * ww.cdiv(N, 128) <= sms
            small = _tuning.Candidate("tlx_ws", **(_TLX_WS_128x64 if narrow else _TLX_WS_128x128))
            out.remove(small)
            out.insert(0, small)
    if tl:
        out += [_tuning.Candidate("tl", **cfg) for cfg in _TL_CONFIGS]
    default = out[0]
    itemsize = 2  # fp16 / bf16

    def keep(c):
        if c == default:
            return True
        if c["BLOCK_N"] > max(_tuning.pow2_bucket(N), 128):
            return False
        if c["BLOCK_M"] > max(_tuning.pow2_bucket(M), 64):
            return False
        return _tuning.fits(place, _shared_bytes(c, itemsize))

    return [c for c in out if keep(c)]
