"""`warpweave.tools`: host-side helpers under Triton's `triton.tools` names
(`tools.tensor_descriptor.TensorDescriptor`, `tools.mxfp`)."""
