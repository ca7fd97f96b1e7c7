"""A long run stopped by Ctrl-C (the clean stop; bad input): announce, stop cleanly, write what is certified.

Writes seeded random logits of size N x N (default 4096: the largest legal
target), starts ``python -m numeric bracket --logits ... --effort thorough``
as a child process, waits until it has announced its cost and then
``--after`` more seconds, sends SIGINT (one Ctrl-C), and reports: the
announcement, the exit status (130 expected), the wall time from the signal
to the exit, the child's peak resident memory, and the written file
re-verified by the exact tier.

    python -m research.clean_stop [--n 4096] [--after 60] [--eps 1/4] [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--after", type=float, default=60.0, help="seconds between the announcement and Ctrl-C")
    ap.add_argument("--eps", default="1/4")
    ap.add_argument("--out", help="work directory (default: a temporary one)")
    args = ap.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="clean_stop_"))
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    d = 64
    H = rng.normal(size=(args.n, d)) @ rng.normal(size=(d, args.n)) / np.sqrt(d)
    np.save(work / "logits.npy", H)
    out = work / "brackets.safetensors"
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "numeric", "bracket", "--logits", str(work / "logits.npy"), "--eps", args.eps,
           "--effort", "thorough", "--no-attack", "--out", str(out)]
    t0 = time.monotonic()
    child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    announcement = child.stderr.readline().strip()
    t_ann = time.monotonic() - t0
    time.sleep(args.after)
    t_sig = time.monotonic()
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate()
    t_exit = time.monotonic()
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"command: {' '.join(cmd)}")
    print(f"announcement after {t_ann:.1f} s: {announcement}")
    print(f"Ctrl-C at {t_sig - t0:.1f} s; exit status {child.returncode} {t_exit - t_sig:.1f} s later; "
          f"peak RSS {peak_kib / 2**20:.2f} GiB")
    for line in stderr.strip().splitlines():
        print(f"stderr: {line}")
    print(stdout.strip())
    if out.exists():
        from exact.verify import verify_file

        t = time.monotonic()
        reports = verify_file(out, max_work=2**40)      # the bracket command's own re-check limit
        print(f"{out}: {len(reports)} cell(s), verified: {[r.verified for r in reports]}, "
              f"ranks: {[(r.lower.rank, r.upper.rank) for r in reports]} ({time.monotonic() - t:.1f} s)")
    else:
        print(f"{out}: not written")
    return 0 if child.returncode == 130 and out.exists() else 1


if __name__ == "__main__":
    raise SystemExit(main())
