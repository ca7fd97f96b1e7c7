"""Smoke tests of ``research/oddmap_search.py`` (odd-map certificates against Bernstein widths)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pysat")
ROOT = Path(__file__).resolve().parents[1]

from research import oddmap_families as fam
from research import oddmap_geom as geom
from research import oddmap_search


def _example():
    return next((A, Aq) for name, A, Aq in fam.generate("graph", 0, None) if name == "example4x4")


def test_math_example_certificate_is_exact_and_the_row_side_is_not():
    """MATH.md section 2: at eps 9/20 the odd map proves 3 on sd(octahedron), not on the octahedron."""
    A, Aq = _example()
    eps = Fraction(9, 20)
    faces, mnf = geom.primal_nerve(A, float(eps))
    cx = geom.cross(3)
    sd = geom.subdivide(cx)
    assert (len(sd[0]), len(sd[1])) == (26, 48)
    assert geom.sat_vertex(cx, 8, mnf) is None          # the row side (d distinct rows) stops at 2
    lab = geom.sat_vertex(sd, 8, mnf)
    holds = geom.primal_holds(Aq, eps)
    assert geom.exact_check_vertex(holds, sd, lab, faces)
    v = next(iter(lab))
    bad = dict(lab)
    bad[v] = lab[v] ^ 1                                  # breaks oddness
    assert not geom.exact_check_vertex(holds, sd, bad, faces)
    # rank A = 3: no odd map from S^3, and the height filter sees it
    assert geom.height_at_least(faces, 2) and not geom.height_at_least(faces, 3)


def test_facet_form_and_a_false_certificate_at_a_larger_eps():
    A, Aq = _example()
    faces, mnf = geom.primal_nerve(A, 0.45)
    sd = geom.subdivide(geom.cross(3))
    lab = geom.sat_facet(sd, 8, mnf)
    assert geom.exact_check_facet(geom.primal_holds(Aq, Fraction(9, 20)), sd, lab, faces)
    # at eps 1/2 the error of rank 2 is reached (||A - B|| = 1/2), so nothing may prove 3
    assert not geom.exact_check_facet(geom.primal_holds(Aq, Fraction(1, 2)), sd, lab, faces)


def test_cycle5_show_and_bad_input(capsys):
    assert oddmap_search.main(["--show", "cycle5", "--eps", "999/1000"]) == 0
    out = capsys.readouterr().out
    assert "exact re-check of the certificate (fractions): True" in out
    assert "every row subset of size 3 refuted exactly at eps: True" in out
    assert oddmap_search.main(["--show", "nope"]) == 2
    assert oddmap_search.main(["--show", "cycle5", "--eps", "3/2"]) == 2
    assert oddmap_search.main(["--categories", "nope"]) == 2


def test_search_smoke_two_matrices(capsys):
    rc = oddmap_search.main(["--categories", "support", "--count", "2", "--steps", "4", "--starts", "1",
                             "--rounds", "2", "--seed", "3", "--json"])
    assert rc == 0
    import json
    res = json.loads(capsys.readouterr().out)
    cases = res["cases"]
    assert cases and {c["status"] for c in cases} <= {"closed", "open", "no-odd-map", "found"}
    assert res["summary"]["support"]["matrices"] == 2
    for c in cases:                                     # a width can never exceed the rank-(d-1) error
        assert max(c["g_rowsub"], c["g_row"], c["g_col"]) <= c["high"] + 1e-6


def test_cycle5_column_side_proof_and_its_inputs():
    from research import oddmap_cycle5
    assert oddmap_cycle5.lemma_b(Fraction(1, 5)) and not oddmap_cycle5.lemma_b(Fraction(22, 100))
    assert oddmap_cycle5.main(["--eps", "99/100"]) == 0
    assert oddmap_cycle5.main(["--eps", "3/2"]) == 2
    assert oddmap_cycle5.main(["--eps", "3/4", "--max-boxes", "50"]) == 1     # not proved within 50 boxes


def test_row_certificate_lp_is_weaker_than_geometric_gamma_row():
    from research import oddmap_widths as wid
    A = np.array([[0, 1, 0, 1, 1], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]) / 3
    assert abs(wid.gamma_row(A, np.eye(3)) - 7 / 27) < 1e-9
    assert abs(wid.gamma_row_geo(A, np.eye(3)) - 1 / 3) < 1e-9


@pytest.mark.parametrize("d", [2, 3, 4])
def test_height_of_the_cross_polytope_sphere_is_d_minus_one(d):
    """The boundary of the d-cross-polytope is S^{d-1}: w1^{d-1} != 0 and w1^d = 0 (Yang's criterion)."""
    import itertools
    verts, facets, _ = geom.cross(d)
    lab = [2 * k + (0 if s > 0 else 1) for (k, s) in verts]
    faces = {tuple(sorted(lab[v] for v in c)): None for f in facets
             for r in range(1, d + 1) for c in itertools.combinations(f, r)}
    assert geom.height_at_least(faces, d - 1) and not geom.height_at_least(faces, d)
