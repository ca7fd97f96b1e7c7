"""What the side-by-side benches share (``bench/cpu_compare.py``, ``bench/effort_compare.py``,
``bench/scaling.py``): the work counter of a search process, and the command line of a run on
saved heads.
"""
from __future__ import annotations

import argparse

#: The head of a child script that counts the upper search's Adam work units (``refine.step_work``) by
#: wrapping ``driver.search_upper``: after it, ``drv`` is ``numeric.search.driver`` and ``sum(used)`` the units
#: spent so far. It travels as text, not as an import: the child may run in another version's tree
#: (a git ref extracted by ``compare_versions.extract_ref``), whose ``bench/`` need not have this module.
COUNT_UPPER = r"""
import numeric.search.driver as drv
used = []
real = drv.search_upper
def counted(A, e, budget, **kw):
    r = real(A, e, budget, **kw)
    used.append(budget.used)
    return r
drv.search_upper = counted
"""


def add_heads_args(ap: argparse.ArgumentParser) -> None:
    """The arguments of a before/after run on saved heads: ``--ref``, ``--heads-npz``, ``--heads``, ``--eps``,
    ``--out``."""
    ap.add_argument("--ref", required=True, help="git ref of the 'before' code")
    ap.add_argument("--heads-npz", required=True)
    ap.add_argument("--heads", required=True, help="comma-separated names in the npz")
    ap.add_argument("--eps", default="1/10,1/4,1/2")
    ap.add_argument("--out", required=True)
