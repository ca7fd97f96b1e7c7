"""A small panel directory of real bracket files, and panel rows, shared by the report's tests (and by the
``clean`` and ``panel`` fixtures of ``tests/conftest.py``): ``build_panel`` searches random 8 x 8 softmax heads with
``search_brackets`` and writes their bracket files, head files and records; ``row`` is one record row;
``geometry_rows`` are rows with real descriptor columns of small random heads."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np

from numeric.geometry import cell_descriptors, native_features
from numeric.panel.provenance import write_run
from numeric.panel.schema import PanelRow
from numeric.panel.table import write_record
from numeric.search.effort import package_versions

IDENTITY = {"effort": "quick", "eps": ["1/4", "1/2"], "versions": package_versions(),
            "code": {"version": package_versions()["softrank-verify"], "source_sha256": "ab" * 32}}
CODE_VERSION = {"version": "0.1.0", "commit": "c0ffee", "dirty": False}
N_CELLS = 3
EPS = ("1/4", "1/2")


def row(layer, head, source, eps, L, U, *, verified=True, family="encoder", n=16, status="ok", **kw):
    r = {"family": family, "model": "m", "layer": layer, "head": head, "source": f"text:{source}",
         "eps": str(Fraction(eps)), "n_rows": n, "n_cols": n, "L": L, "U": U, "lower_witness": "row_reconstruction",
         "upper_witness": "factors", "seconds": 1.5, "slack": 1e-12, "mass": 1.0, "min_mass": 1.0,
         "local_mass": None, "status": status, "verified": verified, "lower_verified": verified,
         "upper_verified": True, "attack_run": L is not None and L >= 2, "attack_success": False,
         "direct_checked": True, "direct_passed": True, "hf_max_abs_diff": 1e-7, "cell_id": f"L{layer}H{head}-{eps}",
         "file": f"brackets/L{layer}H{head}.safetensors"}
    r.update(kw)
    return r


def build_panel(out, heads=N_CELLS, seed=0):
    """A panel directory of real bracket files (searched with their logits, as the panel does), head files
    and records; the ranks are those the files claim."""
    from safetensors.numpy import save_file

    from numeric.heads.extract import softmax_rows
    from numeric.search import search_brackets
    from numeric.search.export import write_bracket_file

    write_run(out, IDENTITY, argv=[], summary=None)
    run = json.loads((out / "panel.json").read_text())
    (out / "panel.json").write_text(json.dumps(dict(run, code_version=CODE_VERSION)))
    for head in range(heads):
        key = f"L0H{head}_s00"
        logits = 3.0 * np.random.default_rng(head + seed).standard_normal((8, 8))
        A = softmax_rows(logits)
        prov = {"model": "m", "family": "encoder", "cell_kind": "full", "layer": 0, "head": head, "source": "text:0"}
        res = search_brackets(A, list(EPS), logits=logits, id_prefix=key, attack=False, effort="quick",
                              provenance=prov)
        write_bracket_file(out / "brackets" / f"{key}.safetensors", res.cells, res.tensors)
        (out / "heads").mkdir(exist_ok=True)
        save_file({"logits": logits, "matrix": A, "Q": logits[:, :2].copy(), "K": logits[:, 2:4].copy()},
                  str(out / "heads" / f"{key}.safetensors"))
        rows = [row(0, head, 0, c.eps, c.lower.rank, c.upper.rank, n=8, cell_id=c.id,
                    file=f"brackets/{key}.safetensors", cell_kind="full",
                    lower_witness=c.lower.kind, upper_witness=c.upper.kind,
                    slack=float(Fraction(c.target.slack))) for c in res.cells]
        write_record(out, key, {"signature": {"identity": IDENTITY}, "rows": rows})
    return out


def geometry_rows() -> list[PanelRow]:
    """Panel-like rows with real descriptor columns from small random heads.
    L and U are placeholders for the certified ranks the panel would carry."""
    rows = []
    rng = np.random.default_rng(0)
    for fam in ("bert", "vit"):
        for layer in range(2):
            Q = rng.standard_normal((10, 4)) * (1 + layer)
            K = rng.standard_normal((9, 4))
            geo = cell_descriptors(0.5 * Q @ K.T, None, ranks=(1, 2))
            nat = native_features(Q, K, 0.5)
            for eps in ("1/10", "1/4"):
                rows.append(PanelRow(family=fam, model=fam, layer=layer, head=0, source="text:0", eps=eps, status="ok",
                                     L=1 + layer, U=3 + 2 * layer, descriptors={**geo, **nat}))
    return rows
