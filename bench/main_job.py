"""The README's main job, measured: the MiniLM demo panel end to end (docs/benchmarks.md section 4).

Runs ``python -m numeric panel --model minilm --demo --out DIR`` (or the
panel arguments given after ``--``), then the same command again (every cell
resumed), then ``python -m exact verify`` on the bracket files, and prints:
wall times, the peak resident memory of the panel's processes, and the
bracket figures per tolerance. Counts and ranks come from the exact
re-verification of every file (``numeric.panel.audit``), never from the
panel's own records; the slack and HF-difference maxima are read from the
checked rows.

    python bench/main_job.py --out /tmp/demo [--json] [-- --effort quick]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from numeric.panel.audit import audit
from numeric.panel.report import summarise


def timed(cmd: list) -> tuple[float, int]:
    """Wall seconds and exit code of ``cmd`` run from the repository root."""
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL).returncode
    return time.perf_counter() - t0, rc


def _max(rows, key):
    vals = [float(r.column(key)) for r in rows if r.column(key) not in (None, "")]
    return max(vals) if vals else None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(prog="python bench/main_job.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="panel directory (must not exist yet)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        ap.error(f"{out} exists: the first run must compute every cell")
    panel = [sys.executable, "-m", "numeric", "panel", "--model", "minilm", "--demo", "--quiet", "--out", str(out),
             *extra]
    wall, rc = timed(panel)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    resumed, rc2 = timed(panel)
    files = sorted(str(p) for p in (out / "brackets").glob("*.safetensors"))
    exact_s, rc3 = timed([sys.executable, "-m", "exact", "verify", "--json", "--workers", "2", *files])
    checked = audit(out, workers=2)
    s = summarise(checked.rows)
    result = {
        "command": " ".join(panel[1:]), "exit_codes": [rc, rc2, rc3], "wall_seconds": round(wall, 1),
        "resumed_seconds": round(resumed, 1), "exact_verify_seconds": round(exact_s, 1),
        "peak_rss_mib": round(peak_mib), "audit_errors": len(checked.errors), "brackets": s["brackets"],
        "verified": s["verified"], "capped": len(s["capped"]), "attacks_run": s["attacks_run"],
        "attack_successes": s["attack_successes"], "direct_checked": s["direct_checked"],
        "direct_passed": s["direct_passed"], "max_slack": _max(checked.rows, "slack"),
        "max_hf_abs_diff": _max(checked.rows, "hf_max_abs_diff"),
        "per_eps": {str(e): {k: v for k, v in d.items()} for e, d in s["per_eps"].items()},
    }
    if args.json:
        print(json.dumps(result, indent=1, default=str))
        return 0 if not checked.errors else 1
    for k, v in result.items():
        if k != "per_eps":
            print(f"{k:<22} {v}")
    print(f"\n{'eps':>6} {'brackets':>8} {'closed':>6} {'med L':>6} {'med U':>6} {'med U/L':>8} {'med s':>6}")
    for e, d in result["per_eps"].items():
        ratio = "-" if d["median_U_over_L"] is None else f"{d['median_U_over_L']:.2f}"
        print(f"{e:>6} {d['brackets']:>8} {d['closed']:>6} {d['median_L']:>6} {d['median_U']:>6} {ratio:>8} "
              f"{d['median_seconds']:>6.1f}")
    return 0 if not checked.errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
