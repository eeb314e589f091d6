"""Host-side microscaling (OCP MX) formats for tests and tutorials, with PyTorch tensors:
`MXFP4Tensor` (E2M1 four-bit floats, one code per uint8 until packed) and `MXScaleTensor` (E8M0
power-of-two block scales). Importing this module does not need PyTorch; using the classes does.
"""

from __future__ import annotations

__all__ = ["MXFP4Tensor", "MXScaleTensor"]

# E2M1 magnitudes by the three low bits of a code (exponent bits 2..1, mantissa bit 0, bias 1).
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _torch():
    import torch

    return torch


class MXFP4Tensor:
    """E2M1 values held as one code (0..15: sign bit 3, exponent bits 2..1, mantissa bit 0) per
    uint8 element of `data`. Built from a float tensor (`data=`, rounded to nearest, ties to an
    even mantissa, magnitudes above 6 saturating) or as zeros of a `size`."""

    def __init__(self, data=None, size=None, device=None):
        torch = _torch()
        if data is not None:
            if not isinstance(data, torch.Tensor):
                data = torch.tensor(data)
            self.device = data.device if device is None else device
            self.data = self._from_float(data.to(self.device))
        elif size is not None:
            self.device = device
            self.data = torch.zeros(size, dtype=torch.uint8, device=device)
        else:
            raise ValueError("MXFP4Tensor needs data= (values to encode) or size= (a shape)")
        self.size = tuple(self.data.shape)

    def random(self):
        """Fills `data` with uniformly random codes; returns self."""
        torch = _torch()
        self.data = torch.randint(0, 16, self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype):
        """The decoded values as a float tensor of `dtype`."""
        torch = _torch()
        table = torch.tensor(_E2M1, dtype=torch.float32, device=self.data.device)
        codes = self.data.to(torch.int64)
        mag = table[codes & 7]
        return torch.where((codes & 8) != 0, -mag, mag).to(dtype)

    @staticmethod
    def _from_float(values):
        torch = _torch()
        x = values.to(torch.float32)
        sign = (torch.signbit(x)).to(torch.uint8) << 3
        mag = torch.nan_to_num(x.abs(), nan=0.0).clamp(max=6.0)
        table = torch.tensor(_E2M1, dtype=torch.float32, device=x.device)
        dist = (mag.unsqueeze(-1) - table).abs()
        best = dist.min(dim=-1, keepdim=True).values
        # Among equally near codes (a tie) take the one with an even mantissa bit.
        tied = dist == best
        even = torch.tensor([c % 2 == 0 for c in range(8)], device=x.device)
        choice = torch.where(tied & even, 0, torch.where(tied, 1, 2))
        code = choice.argmin(dim=-1).to(torch.uint8)
        return sign | code

    def to_packed_tensor(self, dim):
        """Two codes a byte along `dim` (the even-indexed element in the low nibble); an odd
        length is padded with a zero code."""
        torch = _torch()
        codes = self.data
        if codes.shape[dim] % 2:
            pad_shape = list(codes.shape)
            pad_shape[dim] = 1
            codes = torch.cat([codes, torch.zeros(pad_shape, dtype=codes.dtype,
                                                  device=codes.device)], dim=dim)
        low = codes.narrow(dim, 0, codes.shape[dim] // 2 * 2)
        idx_even = torch.arange(0, low.shape[dim], 2, device=codes.device)
        even = low.index_select(dim, idx_even)
        odd = low.index_select(dim, idx_even + 1)
        return (even | (odd << 4)).to(torch.uint8)

    def unpack_packed_tensor(self, packed_tensor, dim, original_shape):
        """The codes of a tensor made by to_packed_tensor, cut back to `original_shape`."""
        torch = _torch()
        low = packed_tensor & 0x0F
        high = (packed_tensor >> 4) & 0x0F
        stacked = torch.stack([low, high], dim=dim + 1 if dim >= 0 else dim)
        shape = list(packed_tensor.shape)
        shape[dim] *= 2
        codes = stacked.reshape(shape)
        return codes.narrow(dim, 0, original_shape[dim]).to(torch.uint8)


class MXScaleTensor:
    """E8M0 block scales: one uint8 code a scale, value 2**(code - 127), code 255 is NaN. Built
    from positive floats (`data=`, each rounded to the nearest power of two in log2) or as codes
    of 1.0 of a `size`."""

    def __init__(self, data=None, size=None, device=None):
        torch = _torch()
        if data is not None:
            if not isinstance(data, torch.Tensor):
                data = torch.tensor(data)
            self.device = data.device if device is None else device
            self.data = self._from_float(data.to(self.device))
        elif size is not None:
            self.device = device
            self.data = torch.full(size, 127, dtype=torch.uint8, device=device)
        else:
            raise ValueError("MXScaleTensor needs data= (scales to encode) or size= (a shape)")
        self.size = tuple(self.data.shape)

    def random(self, low=None, high=None):
        """Fills `data` with scales whose exponents are uniform between log2(low) and log2(high)
        (defaults: the whole E8M0 range); returns self."""
        import math

        torch = _torch()
        lo = -127 if low is None else math.ceil(math.log2(low))
        hi = 127 if high is None else math.floor(math.log2(high))
        if lo > hi:
            raise ValueError(f"MXScaleTensor.random: no power of two in [{low}, {high}]")
        exps = torch.randint(lo, hi + 1, self.size, device=self.device)
        self.data = (exps + 127).to(torch.uint8)
        return self

    def to(self, dtype):
        torch = _torch()
        codes = self.data.to(torch.float32)
        values = torch.exp2(codes - 127.0)
        return torch.where(self.data == 255, torch.full_like(values, float("nan")),
                           values).to(dtype)

    @staticmethod
    def _from_float(values):
        torch = _torch()
        x = values.to(torch.float32)
        exps = torch.round(torch.log2(x)).clamp(-127, 127)
        codes = (exps + 127).to(torch.uint8)
        bad = torch.isnan(x) | (x <= 0)
        return torch.where(bad, torch.full_like(codes, 255), codes)
