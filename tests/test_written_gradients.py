"""The descents' written-out gradients are autograd's, to the last bit.

``refine._surrogate`` (the upper trial) and ``row_map._gradient`` (the row-side maps) compute
their losses' gradients by hand, in the operations autograd ran, so that the searches are the
same function as before and cheaper. Each is compared here with autograd on the formulation it
replaced (``F.huber_loss`` and a ``logsumexp`` of ``abs``), with ``torch.equal``; the controls
show that the comparison sees a change in the last bits.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from numeric.search import refine as rf
from numeric.search import row_map as rm


@pytest.fixture(scope="module")
def factors():
    rng = np.random.default_rng(3)
    h = rng.normal(size=(40, 40)) * 2
    A = np.exp(h - h.max(1, keepdims=True))
    A /= A.sum(1, keepdims=True)
    P, Q = rng.normal(size=(40, 6)) * 0.1, rng.normal(size=(40, 6)) * 0.1
    return tuple(torch.as_tensor(x, dtype=torch.float64) for x in (A, P, Q))


def _autograd_surrogate(A, P, Q, T, d):
    """The surrogate as ``refine`` wrote it before: ``T logsumexp(huber(P Q^T, A) / d / T)`` by autograd."""
    P, Q = P.clone().requires_grad_(True), Q.clone().requires_grad_(True)
    h = F.huber_loss(P @ Q.T, A, reduction="none", delta=d).sum(1) / d
    loss = T * torch.logsumexp(h / T, 0)
    loss.backward()
    return float(loss.detach()), P.grad, Q.grad


@pytest.mark.parametrize("eps,huber,frac", [(0.1, True, 0.0), (0.25, True, 0.6), (0.5, True, 1.0), (0.25, False, 0.3)])
def test_the_upper_surrogate_and_its_gradient_are_autograds(factors, eps, huber, frac):
    A, P, Q = factors
    t0, t1, d0, d1 = rf.schedule(eps, *A.shape, rf.Objective(huber=huber))
    T, d = t0 * (t1 / t0) ** frac, d0 * (d1 / d0) ** frac
    s, G = rf._surrogate(torch, P @ Q.T - A, T, d)
    s_ref, gP, gQ = _autograd_surrogate(A, P, Q, T, d)
    assert float(s) == s_ref
    assert torch.equal(G @ Q, gP) and torch.equal(G.T @ P, gQ)
    assert not torch.equal(rf._surrogate(torch, P @ Q.T - A, T, math.nextafter(d, 1))[1] @ Q, gP)   # control


def test_the_row_map_gradient_is_autograds(factors):
    A, _, _ = factors
    rng = np.random.default_rng(5)
    N = torch.as_tensor(np.linalg.qr(rng.normal(size=(40, 30)))[0], dtype=torch.float64)
    Gp = torch.as_tensor(rng.normal(size=(40, 7)), dtype=torch.float64)
    Y = torch.as_tensor(rng.normal(size=(30, 7)) * 0.1, dtype=torch.float64)
    G = Gp + N @ Y
    r = G.abs().sum(dim=1)
    v = float(r.max())
    Yg = Y.clone().requires_grad_(True)
    rg = (Gp + N @ Yg).abs().sum(dim=1)
    beta = rm.DESCENT_SHARPNESS / v
    (torch.logsumexp(beta * rg, 0) / beta).backward()
    assert torch.equal(rm._gradient(torch, N, G, r, v), Yg.grad)
    assert not torch.equal(rm._gradient(torch, N, G, r, math.nextafter(v, 0)), Yg.grad)   # control
