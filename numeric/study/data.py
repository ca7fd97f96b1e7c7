"""The study's table: numeric columns, categories, target and clusters.

``StudyData`` holds one row per verified cell at the study's tolerance: the
numeric feature columns, the categorical ones, the target, and the cluster
labels (source, head, family). ``matrix(cols)`` assembles a design matrix,
one-hot encoding the categorical columns and optionally substituting other
columns (the gauge audit) or selecting rows (the bootstrap).

>>> d = StudyData.build({"x": [1.0, 2.0]}, {"c": ["a", "b"]}, [0.1, 0.2], ["s0", "s1"], ["h", "h"], ["f", "f"])
>>> d.matrix(("x", "c")).tolist()
[[1.0, 1.0, 0.0], [2.0, 0.0, 1.0]]
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from exact.errors import UserInputError

__all__ = ["StudyData", "StudyError"]


class StudyError(UserInputError):
    """Bad input to the study (exit 2 with a one-line message)."""


class PanelDisagreement(ValueError):
    """The panel directory disagrees with its own verification: its audit found an error (a record or
    table value the exact pass contradicts, a file of another head), or a cell is not verified (exit 1
    with a one-line message, as ``numeric report`` exits). A failed integrity check, not bad input: not a
    ``StudyError``."""


@dataclass(frozen=True)
class StudyData:
    """Rows of the study: ``numeric[col]`` and ``categorical[col]`` arrays, target ``y``,
    clusters ``sources``, ``heads``, ``families``, ``cell_ids`` for the predictions, and each row's
    source ``domains`` (``numeric.heads.domains``; None: not known, one domain)."""

    numeric: dict = field(repr=False)
    categorical: dict = field(repr=False)
    y: np.ndarray = field(repr=False)
    sources: np.ndarray = field(repr=False)
    heads: np.ndarray = field(repr=False)
    families: np.ndarray = field(repr=False)
    cell_ids: np.ndarray = field(repr=False)
    domains: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def build(cls, numeric, categorical, y, sources, heads, families, *, cell_ids=None, domains=None) -> "StudyData":
        y = np.asarray(y, dtype=np.float64)
        ids = np.arange(y.size).astype(str) if cell_ids is None else np.asarray(cell_ids, dtype=str)
        return cls({k: np.asarray(v, dtype=np.float64) for k, v in numeric.items()},
                   {k: np.asarray(v, dtype=str) for k, v in categorical.items()}, y,
                   np.asarray(sources, dtype=str), np.asarray(heads, dtype=str), np.asarray(families, dtype=str), ids,
                   None if domains is None else np.asarray(domains, dtype=str))

    def __len__(self) -> int:
        return int(self.y.size)

    def missing(self, cols) -> list:
        """The columns of ``cols`` that the table lacks."""
        return [c for c in cols if c not in self.numeric and c not in self.categorical]

    def column(self, col: str, replace: dict | None = None) -> np.ndarray:
        """One numeric column, or its replacement from ``replace``."""
        if replace and col in replace:
            return np.asarray(replace[col], dtype=np.float64)
        return self.numeric[col]

    def matrix(self, cols, rows=None, replace: dict | None = None) -> np.ndarray:
        """Design matrix of ``cols`` (categoricals one-hot over all levels) at ``rows``."""
        parts: list[np.ndarray] = []
        for c in cols:
            if c in self.categorical:
                v = self.categorical[c]
                parts.extend((v == level).astype(np.float64) for level in np.unique(v))
            else:
                parts.append(self.column(c, replace))
        X = np.column_stack(parts) if parts else np.zeros((len(self), 0))
        return X if rows is None else X[rows]

    def with_column(self, name: str, values) -> "StudyData":
        """A copy with one more numeric column (the placebo block)."""
        return replace(self, numeric={**self.numeric, name: np.asarray(values, dtype=np.float64)})
