"""`warpweave.language.extra.cuda`: CUDA-specific kernel helpers under Triton's module path
(`triton.language.extra.cuda`)."""
