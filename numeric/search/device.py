"""The torch device of the float descents (``refine``, ``upper``, the driver).

Its own module so that ``refine`` and ``upper`` share it without importing each
other (``upper`` imports ``refine``; ``refine`` needs only the device).
"""
from __future__ import annotations

from typing import Any

from numeric._optional import require

__all__ = ["pick_device"]


def pick_device(device: Any = None) -> Any:
    """CUDA when torch sees one and no device is given, else CPU (a ``torch.device``; torch is loaded
    lazily, so the checker sees it as Any).

    >>> str(pick_device("cpu"))
    'cpu'
    """
    # torch takes 3 s to import: loaded by the first descent, not when numeric.search is imported
    # (the bracket command refuses bad input before it loads).
    torch = require("torch")

    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
