"""``python -m numeric.heads.zoo``: train or verify the shipped models (see train.py)."""
from numeric.heads.zoo.train import main

raise SystemExit(main())
