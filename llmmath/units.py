"""Element sizes of the number formats the book uses, and byte units for display.

Sizes are in *bits* so that 4-bit formats stay exact integers; a count of bytes is
``elements * bits // 8`` once the element count makes it whole. Display units: GB = 10⁹
bytes, GiB = 2³⁰ bytes (the book always says which).
"""

from __future__ import annotations

from llmmath.config import ConfigError

#: Bits per element of each number format (aliases map to the same size).
DTYPE_BITS = {
    "fp64": 64,
    "float64": 64,
    "fp32": 32,
    "float32": 32,
    "bf16": 16,
    "bfloat16": 16,
    "fp16": 16,
    "float16": 16,
    "fp8": 8,
    "float8": 8,
    "int8": 8,
    "int4": 4,
}

GB, GiB = 10**9, 2**30


def dtype_bits(dtype: str) -> int:
    """Bits per element of ``dtype`` (``"bf16"``, ``"fp32"``, ``"int4"``, ... see
    `DTYPE_BITS`).

    Raises:
        ConfigError: an unknown format; the message lists the known ones.
    """
    key = str(dtype).lower().removeprefix("torch.")
    if key not in DTYPE_BITS:
        from llmmath.messages import gettext as _
        from llmmath.messages import join

        raise ConfigError(
            _("dtype {dtype} is not known; use one of {known}").format(
                dtype=repr(dtype), known=join(DTYPE_BITS)
            )
        )
    return DTYPE_BITS[key]


def bytes_of(elements: int, dtype: str) -> int:
    """Bytes that ``elements`` values of ``dtype`` occupy, exactly (rounded up to a
    whole byte for an odd count of 4-bit values)."""
    return -(-elements * dtype_bits(dtype) // 8)


def human_bytes(n: int | float) -> str:
    """``n`` bytes in GB (10⁹) and GiB (2³⁰), e.g. ``'17.18 GB (16.00 GiB)'``."""
    return f"{n / GB:,.2f} GB ({n / GiB:,.2f} GiB)"
