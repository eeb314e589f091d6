"""`warpweave.compiler.compiler`: where Triton code imports ASTSource and compile from."""

from . import ASTSource, CompiledKernel, compile  # noqa: F401,A004

__all__ = ["ASTSource", "CompiledKernel", "compile"]
