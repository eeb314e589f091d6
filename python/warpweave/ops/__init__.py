"""warpweave.ops: the kernel library, callable on NumPy arrays, CUDA tensors and, through
torch.library, from PyTorch models.

Two ways in:

    import warpweave.ops as ops
    y = ops.softmax(x)                      # x: np.ndarray -> interpreter, CUDA tensor -> GPU

    import torch, warpweave.ops            # registers torch.ops.warpweave.*
    y = torch.ops.warpweave.softmax(x)      # CPU tensor -> interpreter, CUDA tensor -> GPU;
                                            # autograd, fake tensors, torch.compile(fullgraph=True)

The functions below check their arguments (a ValueError naming the op and the argument), route
each call to a kernel for the device and shape, and launch it; torch.ops.warpweave.<name> wraps
them as custom ops (warpweave.ops._library) with fake implementations and backward formulas.

Layout, one module per op family (host code: checks, routing, launch plans), beside the kernels
they launch, in the kernel language:

    _elementwise.py    add                          kernels/vector_add.py
    _softmax.py        softmax, softmax_bwd         kernels/softmax.py, hopper/softmax_tma.py,
                                                    hopper/rows_cluster.py, hopper/rows_smem.py
    _layernorm.py      layernorm_fwd, _bwd          kernels/layernorm.py, hopper/layernorm_tma.py
    _matmul.py         matmul, matmul_tlx           kernels/matmul.py, hopper/gemm_*.py,
                                                    blackwell/gemm_ws.py
    _scaled_mm.py      scaled_mm (fp8),             kernels/scaled_mm.py, hopper/scaled_mm_ws.py,
                       scaled_mm_mx (mxfp8)         blackwell/scaled_mm_mx.py
    _grouped_mm.py     grouped_mm (MoE)             kernels/grouped_mm.py, hopper/grouped_mm_ws.py
    _embedding_bag.py  embedding_bag, _bwd          kernels/embedding_bag.py
    _reduction.py      row_sum, row_max             kernels/reduction.py
    _attention.py      attention, attention_bwd,    kernels/attention.py,
                       attention_tlx,               kernels/attention_bwd.py,
                       attention_varlen, _bwd       hopper/attention_ws.py,
                                                    hopper/attention_bwd_ws.py,
                                                    blackwell/attention_ws.py,
                                                    blackwell/attention_bwd_ws.py,
                                                    kernels/attention_varlen.py
    _rows.py           routing the row ops share (TMA rows, clusters, shared-memory rows)
    _common.py         where arrays live, launch plans, argument checks, occupancy
    _tuning.py         per-shape tuning of the GPU configurations (candidates timed once)
    _library.py        the torch.library custom ops

Routing: on sm_90 GPUs the TLX warp-specialized kernels (kernels/hopper) take the calls they
apply to (matmul without activation, scaled_mm and grouped_mm (ragged M and ragged K) on
TMA-addressable operands, attention at HEAD_DIM 64 / 128 and N_CTX a multiple of 128, the TMA /
cluster row kernels for the row ops); on sm_100 GPUs compiling for sm_100a the Blackwell TLX
kernels (kernels/blackwell, tensor-memory accumulators) take matmul's calls without activation on
TMA-addressable operands and attention forward / backward at HEAD_DIM 64 / 128 and N_CTX a
multiple of 128 (never run on a Blackwell GPU: checked by ptxas and the interpreter); other GPUs, other shapes and the interpreter take the tl kernels. On GPUs the GEMMs and
attention (matmul, scaled_mm, grouped_mm, attention and its backward, attention_varlen) instead
time their candidate kernels and tiles on the first call of a shape and keep the fastest, in
memory and in the disk cache (_tuning.py; WARPWEAVE_OPS_TUNING=0 keeps the fixed choices above).
"""

from ._attention import (attention, attention_bwd, attention_tlx, attention_varlen,
                         attention_varlen_bwd)
from ._elementwise import add
from ._embedding_bag import embedding_bag, embedding_bag_bwd
from ._grouped_mm import grouped_mm
from ._layernorm import layernorm_bwd, layernorm_fwd
from ._matmul import TLX_GEMM_CONFIGS, compile_matmul_tlx, matmul, matmul_tlx
from ._reduction import row_max, row_sum
from ._scaled_mm import scaled_mm, scaled_mm_mx
from ._softmax import softmax, softmax_bwd

__all__ = [
    "add", "softmax", "softmax_bwd", "layernorm_fwd", "layernorm_bwd", "matmul", "embedding_bag",
    "embedding_bag_bwd", "row_sum", "row_max", "attention", "attention_bwd", "matmul_tlx",
    "compile_matmul_tlx", "attention_tlx", "TLX_GEMM_CONFIGS", "scaled_mm", "scaled_mm_mx",
    "grouped_mm",
    "attention_varlen", "attention_varlen_bwd",
]


def _register_torch_ops() -> bool:
    """Registers torch.ops.warpweave.* when PyTorch is installed (and not already registered)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    try:
        from . import _library
    except ImportError:
        return False
    _library.register()
    return True


_register_torch_ops()
