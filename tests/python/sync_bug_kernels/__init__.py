"""Kernels with planted synchronization bugs that the interpreter must report (test material)."""
