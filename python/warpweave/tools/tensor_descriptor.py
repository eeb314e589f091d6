"""`warpweave.tools.tensor_descriptor`: Triton's import path of the host-side TMA descriptor; the
class is warpweave's own `warpweave.TensorDescriptor`."""

from ..tensor_descriptor import TensorDescriptor  # noqa: F401

__all__ = ["TensorDescriptor"]
