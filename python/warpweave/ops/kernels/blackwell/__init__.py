"""The Blackwell (sm_100) kernels of warpweave.ops: TLX warp-specialized GEMMs with tensor-memory
accumulators (tcgen05), block-scaled fp8 GEMM and attention. No Blackwell GPU has run them: they
are checked by ptxas for sm_100a and in the interpreter (docs/status.md)."""
