"""The held-out study's feature columns of one cell (docs/study.md, the feature blocks).

``study_columns(lm, cap, layer, eps)`` returns the B0, B1 and B2 columns that
``numeric.geometry`` does not already compute, plus the I-block audit columns
(the intrinsic profile recomputed under the diagonal gauges of Appendix
L.7). Every column is defined in one line in ``docs/study.md``;
prefixes: ``b0_``, ``b1_``, ``b2_``, ``iaudit_``. Descriptors only: no rank here
is ever a certificate.

>>> round(effective_rank(np.array([1.0, 1.0])), 12), stable_rank(np.array([2.0, 0.0]))
(2.0, 1.0)
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from numeric.geometry import AUDIT_RATIOS, SVD_RANKS, cell_descriptors, geometric_gauge, visible_interaction
from numeric.runtime import one_blas_thread
from numeric.heads.extract import softmax_rows

__all__ = ["study_columns", "stable_rank", "effective_rank", "weight_columns", "logit_rank_profile"]

#: Top singular values reported per weight-space matrix (the spectrum's head).
TOP_SV = 3
#: Retained ranks whose softmax error is reported (the proxy's profile head).
PROFILE_RANKS = (1, 2, 4, 8)
#: Top-k row masses of the concentration descriptors.
TOP_K = (1, 4)
#: Row quantiles of the worst-row-aware descriptors (0 = the worst row).
ROW_QUANTILES = (0.0, 0.1, 0.5)
#: Normalised attention singular values sigma_k / sigma_1 reported (B2).
ATTN_SV = (2, 4, 8, 16, 32)
#: Floor below which a singular value counts as zero in the spectral ratios.
SV_FLOOR = 1e-300
#: Projection module names (query, key) of the supported attention classes.
_QK_NAMES = (("query", "key"), ("q_proj", "k_proj"), ("q_lin", "k_lin"))


def stable_rank(s: np.ndarray) -> float:
    """``||M||_F^2 / ||M||_2^2`` from the singular values ``s``."""
    s = np.asarray(s, dtype=np.float64)
    return float((s**2).sum() / max(s.max() ** 2, SV_FLOOR))


def effective_rank(s: np.ndarray) -> float:
    """Roy-Vetterli effective rank ``exp(entropy(s / sum s))``."""
    p = np.asarray(s, dtype=np.float64)
    p = p[p > SV_FLOOR] / max(p.sum(), SV_FLOOR)
    return float(math.exp(-(p * np.log(p)).sum()))


def _spectrum(prefix: str, s: np.ndarray) -> dict:
    out = {f"{prefix}_sv{k + 1}": float(s[k]) if k < s.size else 0.0 for k in range(TOP_SV)}
    out[f"{prefix}_stable_rank"] = stable_rank(s)
    out[f"{prefix}_eff_rank"] = effective_rank(s)
    return out


def _head_weights(attn, head: int, kv_head: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``W_Q, W_K`` of one head as [model_dim, head_dim] (x -> x W), float64."""
    for qn, kn in _QK_NAMES:
        if hasattr(attn, qn) and hasattr(attn, kn):
            wq = getattr(attn, qn).weight.detach().double().numpy()
            wk = getattr(attn, kn).weight.detach().double().numpy()
            return wq[head * d:(head + 1) * d].T, wk[kv_head * d:(kv_head + 1) * d].T
    if hasattr(attn, "c_attn"):   # GPT-2: one Conv1D [model_dim, 3 * model_dim], x -> x W, q then k then v
        w = attn.c_attn.weight.detach().double().numpy()
        D = w.shape[1] // 3
        return w[:, head * d:(head + 1) * d], w[:, D + kv_head * d:D + (kv_head + 1) * d]
    raise ValueError(f"no query/key projections on {type(attn).__name__}")


def weight_columns(wq: np.ndarray, wk: np.ndarray) -> dict:
    """Spectra of ``W_Q``, ``W_K`` and ``W_Q W_K^T`` (through the R factors: same singular values)."""
    # mode "r" returns the R factor alone; numpy's stubs declare the (Q, R) result of every mode
    rq: np.ndarray = np.linalg.qr(wq, mode="r")  # type: ignore[assignment]
    rk: np.ndarray = np.linalg.qr(wk, mode="r")  # type: ignore[assignment]
    out = {}
    for name, m in (("wq", rq), ("wk", rk), ("wqk", rq @ rk.T)):
        out.update(_spectrum(f"b1_{name}", np.linalg.svd(m, compute_uv=False)))
    return out


def _cloud_columns(tag: str, X: np.ndarray) -> dict:
    """Mean norm, mean pairwise cosine, anisotropy (sigma_1^2 / sum sigma^2) of a row cloud."""
    norms = np.linalg.norm(X, axis=1)
    U = X / np.maximum(norms, SV_FLOOR)[:, None]
    n = X.shape[0]
    mean_cos = (np.linalg.norm(U.sum(axis=0)) ** 2 - n) / max(n * (n - 1), 1)
    s = np.linalg.svd(X, compute_uv=False)
    return {f"b1_{tag}_norm_mean": float(norms.mean()), f"b1_{tag}_cos_mean": float(mean_cos),
            f"b1_{tag}_anisotropy": float(s[0] ** 2 / max((s**2).sum(), SV_FLOOR))}


def _row_max_l1(A: np.ndarray, B: np.ndarray) -> float:
    return float(np.abs(A - B).sum(axis=1).max())


def logit_rank_profile(logits: np.ndarray, matrix: np.ndarray, eps: float) -> dict:
    """Same-criterion logit-rank proxy: the smallest r whose rank-r SVD of the
    row-centred logits gives a softmax within eps in max row-l1 (descriptor,
    not a certificate), and the softmax error at the ranks of ``PROFILE_RANKS``.

    >>> H = np.outer([1.0, 2.0, 3.0], [0.5, -1.0, 0.0])
    >>> logit_rank_profile(H, softmax_rows(H), 0.25)["b1_logit_rank"]
    1
    """
    Hc = logits - logits.mean(axis=1, keepdims=True)   # softmax is invariant to row shifts
    U, s, Vt = np.linalg.svd(Hc, full_matrices=False)
    out, proxy, acc = {}, None, np.zeros_like(Hc)
    for r in range(s.size + 1):
        if r:
            acc += s[r - 1] * np.outer(U[:, r - 1], Vt[r - 1])
        if r in PROFILE_RANKS or proxy is None:
            err = _row_max_l1(softmax_rows(acc), matrix)
            if r in PROFILE_RANKS:
                out[f"b1_logit_err_r{r}"] = err
            if proxy is None and err <= eps:
                proxy = r
        if proxy is not None and r >= max(PROFILE_RANKS):
            break
    out["b1_logit_rank"] = s.size if proxy is None else proxy
    return out


def _concentration(A: np.ndarray) -> dict:
    """Worst-row-aware concentration over rows: quantiles of the row entropy and
    top-k mass (low tail) and of the effective support exp(entropy) (high tail)."""
    ent = -(A * np.log(np.clip(A, SV_FLOOR, None))).sum(axis=1)
    srt = -np.sort(-A, axis=1)
    out = {}
    for q in ROW_QUANTILES:
        tag = "min" if q == 0 else f"q{round(100 * q)}"
        out[f"b1_entropy_{tag}"] = float(np.quantile(ent, q))
        for k in TOP_K:
            out[f"b1_top{k}_{tag}"] = float(np.quantile(srt[:, :k].sum(axis=1), q))
        out[f"b1_support_{'max' if q == 0 else f'q{round(100 * (1 - q))}'}"] = float(np.quantile(np.exp(ent), 1 - q))
    return out


def _centred_logits(logits: np.ndarray) -> dict:
    s = np.linalg.svd(visible_interaction(logits), compute_uv=False)
    out = _spectrum("b1_dc", s)
    out["b1_dc_top1_share"] = float(s[0] ** 2 / max((s**2).sum(), SV_FLOOR))
    return out


def _attention_spectrum(A: np.ndarray) -> dict:
    s = np.linalg.svd(A, compute_uv=False)
    out = {f"b2_a_sv{k}": float(s[k - 1] / max(s[0], SV_FLOOR)) if k <= s.size else 0.0 for k in ATTN_SV}
    out["b2_a_stable_rank"] = stable_rank(s)
    out["b2_a_eff_rank"] = effective_rank(s)
    return out


#: The intrinsic columns recomputed under each audit gauge: the I block and
#: every column its profile score is computed from (numeric.geometry.shape).
IAUDIT_COLUMNS = ("q_residual", "tau0", "kappa_lower", "kappa_upper", "c_rank") + tuple(
    f"svd_r{r}_{k}" for r in SVD_RANKS for k in ("kappa", "tau"))


def _gauge_audit(cap) -> dict:
    """The whole intrinsic profile recomputed from the logits under each audit gauge.

    The gauge is :func:`~numeric.geometry.geometric_gauge` (non-dyadic
    entries), so the gauged logits differ from the panel's by rounding and the
    audit tests invariance in floating point: q, tau0, both kappa bounds and
    the J.2 family (``cell_descriptors`` without its rigorous ``*_cert``
    columns, which the audit does not use).
    """
    out = {}
    base = cap.scale * (cap.Q @ cap.K.T)
    for c in AUDIT_RATIOS:
        g = geometric_gauge(cap.Q.shape[1], c)
        Hg = cap.logits + (cap.scale * ((cap.Q * g) @ (cap.K / g).T) - base)
        d = cell_descriptors(Hg, None, certify=False)
        for k in IAUDIT_COLUMNS:
            if k in d:
                out[f"iaudit_{k}_g{c:g}"] = d[k]
    return out


def study_columns(lm, cap, layer: int, eps) -> tuple[dict, dict]:
    """The study columns of one cell: those common to every tolerance, and
    ``{eps: columns}`` for the logit-rank proxy at each tolerance in ``eps``
    (exact rational strings)."""
    with one_blas_thread():
        out = {"b0_depth": layer / max(lm.num_layers - 1, 1),
               "b0_domain": "image" if lm.family == "vit" else "text"}
        attn = lm.model.get_submodule(cap.module_path)
        kv = int(cap.provenance.get("kv_head", cap.head))
        out.update(weight_columns(*_head_weights(attn, cap.head, kv, cap.Q.shape[1])))
        out.update(_cloud_columns("q", cap.Q))
        out.update(_cloud_columns("k", cap.K))
        out.update(_centred_logits(cap.logits))
        out.update(_concentration(cap.matrix))
        out.update(_attention_spectrum(cap.matrix))
        out.update(_gauge_audit(cap))
        per_eps = {e: logit_rank_profile(cap.logits, cap.matrix, float(Fraction(e))) for e in eps}
    return out, per_eps
