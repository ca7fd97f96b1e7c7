"""Probe: how much does an exact per-row l1 refit on span(Q) lower the rows over eps?

For 4 MiniLM heads (source 0, 256 x 256) and eps 1/10, 1/4, 1/2, a rank-k
smooth-max descent (1,500 steps from the truncated SVD, k = half and 0.7 of
the SVD rank) is followed by ``l1fit.refit_rows``-style refits of every row
above 0.98 eps; prints the max row error before and after and the time per
row LP (docs/benchmarks.md 7.2).

    python -m research.refit_probe
"""
import os
import time
os.environ.setdefault("OMP_NUM_THREADS","1")
import numpy as np
import scipy.sparse as sp
from numeric.search.lp import solve_lp
from numeric.search.starts import svd_factors
from numeric.search.upper import svd_baseline
from numeric.search.refine import refine
from numeric.search.budget import Budget
from numeric.search.norms import row_l1_error

def l1_fit(a, Q):  # the dual LP of numeric.search.l1fit
    # dual: max a.y  s.t. Q^T y = 0, -1<=y<=1 ; primal p = -duals (check)
    n, k = Q.shape
    y, v, d = solve_lp(-a, A_eq=sp.csr_matrix(Q.T), b_eq=np.zeros(k), lb=-np.ones(n), ub=np.ones(n), row_duals=True)
    return d, -v

from numeric.heads.extract import extract_heads, source_for
from numeric.heads.models import load_model
lm = load_model("minilm")
src = source_for(lm, 0, length=256)
heads=[(0, 0), (1, 3), (2, 5), (3, 7)]
for cap,(l,h) in zip(extract_heads(lm, src, heads), heads):
    A=cap.matrix
    svd, errs = svd_baseline(A)
    for eps in (0.1,0.25,0.5):
        ksvd=int(np.nonzero(errs<=eps)[0][0])
        for k in (max(1,ksvd//2), max(1,int(ksvd*0.7))):
            P,Q,err=refine(A,*svd_factors(*svd,k),eps,iters=1500,budget=Budget(10**9))
            R=A-P@Q.T
            rowerr=np.abs(R).sum(1)
            t=time.perf_counter()
            P2=P.copy()
            bad=np.nonzero(rowerr>eps*0.98)[0]
            for i in bad:
                p,v=l1_fit(A[i],Q)
                for cand in (p,-p):
                    if np.abs(A[i]-Q@cand).sum() < np.abs(A[i]-Q@P2[i]).sum():
                        P2[i]=cand
            dt=time.perf_counter()-t
            err2=row_l1_error(A,P2,Q)
            print(f"l{l}h{h} eps={eps} ksvd={ksvd} k={k} adam={err:.4f} rows>{len(bad)} refit={err2:.4f} ({dt:.2f}s, {dt/max(1,len(bad))*1000:.1f} ms/row)", flush=True)
