"""``python -m numeric.heads.zoo``: train or verify the shipped models (see train.py)."""
from exact.errors import run_command
from numeric.heads.zoo.train import main

run_command(main)
