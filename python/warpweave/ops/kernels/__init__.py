"""The kernels of warpweave.ops, in the kernel language: one file per op family (tl kernels that
run on any target), and hopper/ for the TLX warp-specialized, TMA and cluster kernels of sm_90.
The host wrappers that check arguments, route and launch them are the modules above
(warpweave.ops._softmax, ...)."""
