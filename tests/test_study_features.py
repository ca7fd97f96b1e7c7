"""The panel's study columns (numeric.panel.features) against known answers."""
from __future__ import annotations

import numpy as np
import pytest

from numeric.heads.extract import softmax_rows
from numeric.panel.features import _head_weights, effective_rank, logit_rank_profile, stable_rank, weight_columns

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def test_spectral_ranks_of_known_spectra():
    assert stable_rank(np.array([3.0, 3.0, 3.0])) == pytest.approx(3.0)
    assert effective_rank(np.array([1.0, 1.0, 1.0, 1.0])) == pytest.approx(4.0)
    assert effective_rank(np.array([5.0, 0.0])) == pytest.approx(1.0)


def test_weight_spectra_are_those_of_the_product():
    rng = np.random.default_rng(0)
    wq, wk = rng.normal(size=(20, 4)), rng.normal(size=(20, 4))
    cols = weight_columns(wq, wk)
    s = np.linalg.svd(wq @ wk.T, compute_uv=False)
    assert cols["b1_wqk_sv1"] == pytest.approx(s[0]) and cols["b1_wqk_sv3"] == pytest.approx(s[2])
    assert cols["b1_wq_sv1"] == pytest.approx(np.linalg.svd(wq, compute_uv=False)[0])


def test_logit_rank_proxy_known_answers():
    H = np.zeros((6, 5))
    assert logit_rank_profile(H, softmax_rows(H), 0.25)["b1_logit_rank"] == 0       # uniform rows: rank 0
    rng = np.random.default_rng(1)
    H = 3 * rng.normal(size=(8, 2)) @ rng.normal(size=(2, 7))                      # rank 2, far from uniform
    out = logit_rank_profile(H, softmax_rows(H), 1e-9)
    assert out["b1_logit_rank"] == 2 and out["b1_logit_err_r2"] < 1e-9 < out["b1_logit_err_r1"]


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_head_weights_reproduce_the_projections(kind):
    torch.manual_seed(0)
    if kind == "bert":
        cfg = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                      intermediate_size=16)
        att = transformers.BertModel(cfg).encoder.layer[0].attention.self
        proj = lambda x: (att.query(x), att.key(x))
    else:
        cfg = transformers.GPT2Config(vocab_size=50, n_embd=32, n_layer=1, n_head=4, n_positions=16)
        att = transformers.GPT2Model(cfg).h[0].attn
        proj = lambda x: att.c_attn(x).split(32, dim=-1)[:2]
    x = torch.randn(5, 32)
    q, k = (t.detach().double().numpy() for t in proj(x))
    wq, wk = _head_weights(att, 2, 2, 8)
    X = x.double().numpy()
    bias_q, bias_k = q[:, 16:24] - X @ wq, k[:, 16:24] - X @ wk
    assert np.allclose(bias_q, bias_q[0], atol=1e-5) and np.allclose(bias_k, bias_k[0], atol=1e-5)
