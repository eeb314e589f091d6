"""Helpers the Blackwell interpreter tests share: host descriptors over NumPy arrays, operands
whose products sum exactly in fp32, and the source line of a kernel statement (where the
interpreter's reports must point)."""
import inspect

import numpy as np

import warpweave as ww


def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


def eighths(rng, shape):
    # Multiples of 1/8 in [-1, 1]: products and their sums over K are exact in fp32.
    return (rng.integers(-8, 9, shape) / 8).astype(np.float16)


def line_of(fn, text):
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, l in enumerate(src) if text in l)
