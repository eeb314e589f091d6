"""The Hopper (sm_90) kernels of warpweave.ops: TLX warp-specialized GEMMs and attention, TMA row
streaming and thread-block-cluster row kernels."""
