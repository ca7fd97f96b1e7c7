"""``python -m bench``: see ``bench.cli``."""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")          # one core per benchmark, before numpy loads
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloaded at run time

from bench.cli import main
from exact.errors import run_command

run_command(main)
