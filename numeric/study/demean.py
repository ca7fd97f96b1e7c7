"""Within-head demeaning for one cross-fitting fold (paper L.6).

The demeaned comparison asks whether a block tracks input-to-input variation
*within* a head. Three rules make it clean:

- the head means come from the fold's training rows only (the held-out rows
  are demeaned with their head's training mean: nothing of a test row enters
  its own transformation);
- a column with no within-head variation on the training rows (its
  within-head spread is rounding residue against its spread before demeaning,
  ``fit.negligible``) is left out: a head-constant column becomes exactly
  zero, not 1e-17 noise rescaled to unit variance;
- a gap (NaN) voids only its own cell: head means are means over the head's
  finite training values (a head with none keeps a gap in that column, which
  the model's median imputation fills).

Held-out rows whose head has no training row have no training mean: their
demeaned target is NaN and they carry no loss (never under source folds,
where every head is in every training fold).

>>> import numpy as np
>>> X = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 7.0], [5.0, 7.0]]); heads = np.array(["a", "a", "b", "b"])
>>> Xd, yd = fold_demeaned(X, X[:, 0], heads, np.array([True, True, True, True]))
>>> Xd.tolist(), yd.tolist()
([[-0.5], [0.5], [-1.0], [1.0]], [-0.5, 0.5, -1.0, 1.0])
"""
from __future__ import annotations

import numpy as np

from numeric.study.fit import negligible

__all__ = ["fold_demeaned", "head_means"]


def head_means(v: np.ndarray, heads: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row, the mean of its head's finite values of ``v`` (``[n]`` or ``[n, p]``) over the
    rows selected by the boolean ``rows`` (NaN where the head has no such value)."""
    v2 = v.reshape(v.shape[0], -1)
    _, inv = np.unique(heads, return_inverse=True)
    ok = np.isfinite(v2) & rows[:, None]
    n_h = inv.max() + 1 if inv.size else 0
    sums, counts = np.zeros((n_h, v2.shape[1])), np.zeros((n_h, v2.shape[1]))
    np.add.at(sums, inv, np.where(ok, v2, 0.0))
    np.add.at(counts, inv, ok.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan)
    return means[inv].reshape(v.shape)


def fold_demeaned(X: np.ndarray, y: np.ndarray, heads: np.ndarray, train: np.ndarray):
    """``(X_d, y_d)``: every row minus its head's mean over the training rows ``train``
    (boolean), the columns without within-head variation on the training rows left out."""
    X = np.asarray(X, dtype=np.float64)
    Xd = X - head_means(X, heads, train)
    yd = np.asarray(y, dtype=np.float64) - head_means(np.asarray(y, dtype=np.float64), heads, train)
    if X.shape[1] == 0:
        return Xd, yd
    with np.errstate(invalid="ignore"):
        within = np.sqrt(np.nanmean(np.where(train[:, None], Xd, np.nan) ** 2, axis=0))
        before = np.nanstd(np.where(train[:, None], X, np.nan), axis=0)
    within, before = np.nan_to_num(within), np.nan_to_num(before)
    return Xd[:, ~negligible(within, before)], yd
