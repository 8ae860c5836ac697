"""Weight formats with block scales, byte for byte: what a matrix of ``rows x cols`` takes in memory.

Each format stores its elements packed (a 4-bit element is half a byte) and one scale per block of ``block_rows x
block_cols`` elements (a partial block at an edge has its own scale), and some a scale for the whole tensor too:

- ``nvfp4``: FP4 (E2M1) elements, one FP8 (E4M3) scale per 16 consecutive elements of a row, one FP32 scale per
  tensor (NVIDIA's NVFP4).
- ``mxfp4`` / ``mxfp8``: FP4 (E2M1) or FP8 (E4M3) elements, one E8M0 (one byte) scale per 32 consecutive elements
  of a row (the OCP Microscaling formats; gpt-oss's experts are MXFP4).
- ``fp8-block``: FP8 elements, one FP32 scale per 128 x 128 block (DeepSeek-V3's checkpoint).
- ``fp8``: FP8 elements, one FP32 scale per output row.
- ``int8`` / ``int4``: one fp16 scale per group of ``group`` (default 128) consecutive elements of a row, symmetric
  (GPTQ/AWQ with zero points add half a byte a group for int4: not counted).

>>> nvfp4 = FORMATS["nvfp4"]
>>> nvfp4.bytes(4096, 4096)  # 8,388,608 of elements + 1,048,576 of E4M3 scales + 4 of FP32
Fraction(9437188, 1)
>>> FORMATS["mxfp4"].bytes(4096, 4096)
Fraction(8912896, 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from archcalc.errors import UsageError


@dataclass(frozen=True)
class Format:
    name: str
    element: Fraction  # bytes an element
    block_rows: int | None  # None: the whole dimension
    block_cols: int | None
    scale: Fraction  # bytes a block's scale
    tensor_scale: Fraction = Fraction(0)  # bytes of the scale of the whole tensor
    doc: str = ""

    def bytes(self, rows: int, cols: int) -> Fraction:
        """Bytes of a rows x cols matrix: its elements, packed (whole bytes), and its scales."""
        blocks = -(-rows // (self.block_rows or rows)) * -(-cols // (self.block_cols or cols))
        elements = Fraction(-(-rows * cols * self.element.numerator // self.element.denominator))
        return elements + blocks * self.scale + self.tensor_scale

    def scale_bytes(self, rows: int, cols: int) -> Fraction:
        return self.bytes(rows, cols) - Fraction(-(-rows * cols * self.element.numerator // self.element.denominator))


FORMATS = {f.name: f for f in (
    Format("nvfp4", Fraction(1, 2), 1, 16, Fraction(1), Fraction(4), "FP4 E2M1, an E4M3 scale per 16, FP32 per tensor"),
    Format("mxfp4", Fraction(1, 2), 1, 32, Fraction(1), doc="FP4 E2M1, an E8M0 scale per 32"),
    Format("mxfp8", Fraction(1), 1, 32, Fraction(1), doc="FP8 E4M3, an E8M0 scale per 32"),
    Format("fp8-block", Fraction(1), 128, 128, Fraction(4), doc="FP8, an FP32 scale per 128 x 128 block"),
    Format("fp8", Fraction(1), 1, None, Fraction(4), doc="FP8, an FP32 scale per row"),
    Format("int8", Fraction(1), 1, 128, Fraction(2), doc="int8, an fp16 scale per 128"),
    Format("int4", Fraction(1, 2), 1, 128, Fraction(2), doc="int4, an fp16 scale per 128"),
)}


def weight_format(name: str) -> Format:
    """A format by name; ``int4-g64`` / ``int8-g32`` give another group size."""
    base, _, group = name.partition("-g")
    if group and base in ("int4", "int8"):
        if not group.isdigit() or not 1 <= int(group) <= 2**20:
            raise UsageError(f"weight format {name!r}: expected a group size from 1 to 1,048,576 after -g, e.g. int4-g64")
        f = FORMATS[base]
        return Format(name, f.element, 1, int(group), f.scale, doc=f"{base}, an fp16 scale per {int(group)}")
    if name not in FORMATS:
        raise UsageError(f"weight format {name!r}: expected one of {', '.join(FORMATS)} (or int4-gN / int8-gN)")
    return FORMATS[name]
