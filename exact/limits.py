"""Resource limits of the exact tier, documented in ``docs/bracket-format.md``.

Each limit is checked before the work it bounds is done, and a test feeds
each one limit + 1.
"""

__all__ = [
    "MAX_FILE_BYTES", "MAX_HEADER_BYTES", "MAX_NUMBER_CHARS", "MAX_DECIMAL_EXPONENT",
    "MAX_MATRIX_SIDE", "MAX_MATRIX_ENTRIES", "MAX_CELLS", "MAX_TENSORS",
]

#: A bracket file: 4 GiB covers many 4096 x 4096 cells; beyond it, split the file.
MAX_FILE_BYTES = 4 * 2**30
#: The safetensors JSON header (tensor table and the ``softrank`` document): 16 MiB.
MAX_HEADER_BYTES = 16 * 2**20
#: Characters in one rational string ("1/4", "0.25", "1e-3"): 1,000.
MAX_NUMBER_CHARS = 1000
#: |exponent| of a decimal in scientific notation: 1,000 (1e-1000 is far below any tolerance).
MAX_DECIMAL_EXPONENT = 1000
#: Rows or columns of one tensor: 8,192 (a head on 8k tokens).
MAX_MATRIX_SIDE = 8192
#: Entries of one tensor: 2^24 (128 MiB of float64).
MAX_MATRIX_ENTRIES = 2**24
#: Cells in one file.
MAX_CELLS = 100_000
#: Tensors in one file.
MAX_TENSORS = 1_000_000
