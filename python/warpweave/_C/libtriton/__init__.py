"""`triton._C.libtriton`: only the parts user scripts import (see warpweave._C)."""
