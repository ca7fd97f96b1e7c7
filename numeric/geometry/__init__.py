"""Interaction geometry: intrinsic C, its canonical form, kappa/q/tau, native features.

Owns: the descriptors of one cell (``cell_descriptors``), the enclosing-ball
solver, gauge optimisation, residuals, their rigorous bounds and the native
(historical) features with their gauge audit.

May import: numpy, ``exact`` and the float helpers of ``numeric.heads`` and
``numeric.search``. Never ``numeric.panel``.
"""
