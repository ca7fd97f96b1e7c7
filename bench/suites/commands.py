"""The commands a user waits for, end to end: the report of a panel, the held-out study's comparisons, and (in
the ``large`` size) the README's main job.

- ``report``: a small MiniLM panel (``python -m numeric panel --model minilm --heads 0.1,3.8 --sources 1
  --eps 1/4 --effort quick --workers 1 --no-report``) is written first (not timed), then
  ``python -m numeric report DIR --workers 1`` runs on it with the second checker and without it
  (``--no-independent``): the CPU seconds of each report process (``os.wait4``), its exit status and peak RSS.
- ``study``: the study's comparisons (``numeric.study.compare.compare``) on a synthetic table of the
  recorded four-family shape (``numeric.study.calibrate``; 1,088 rows: 24 + 16 + 16 heads on 16 text
  sources, 12 on 16 image sources), one process, with the secondary bootstrap off (at 200 resamples in the
  ``large`` size): process CPU seconds.
- ``demo`` (large): the README's main job, ``python -m numeric panel --model minilm --demo --out DIR``,
  in a child process: its CPU seconds, wall seconds and peak RSS (the panel's own worker processes
  included), and its exit status (0: every bracket verified by the report).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench.common import fmt, python, run_child, table
from bench.runner import Case, Suite

RECORDED = "encoder=24x16@text,docgpt2=16x16@text,docqwen2=16x16@text,digitvit=12x16@image"
PANEL = ["--model", "minilm", "--heads", "0.1,3.8", "--sources", "1", "--eps", "1/4", "--effort", "quick",
         "--workers", "1", "--no-report", "--quiet"]
#: The smoke size's panel: one head at 8 tokens, one tolerance, no attack.
SMOKE_PANEL = ["--model", "minilm", "--heads", "0.1", "--sources", "1", "--length", "8", "--eps", "1/2", "--effort",
               "quick", "--workers", "1", "--no-attack", "--no-report", "--quiet"]


def cases(size: str) -> list[Case]:
    if size == "smoke":
        return [Case("smoke-study", {"what": "study", "shape": "encoder=3x4@text,digitvit=3x4@image",
                                     "replicates": [0]}),
                Case("smoke-report", {"what": "report", "panel": SMOKE_PANEL})]
    out = [Case("report", {"what": "report", "panel": PANEL}),
           Case("study", {"what": "study", "shape": RECORDED, "replicates": [0]})]
    if size == "large":
        out += [Case("study-bootstrap", {"what": "study", "shape": RECORDED, "replicates": [200]}),
                Case("demo", {"what": "demo"})]
    return out


def _report(p: dict, tmp: Path) -> dict:
    panel = tmp / "panel"
    made = run_child(python("-m", "numeric", "panel", *p["panel"], "--out", str(panel)))
    if made["rc"] != 0:
        raise RuntimeError(f"the panel failed: exit {made['rc']}: {made['stderr_tail']}")
    rows = {}
    for label, extra in (("with the second checker", []), ("exact tier only (--no-independent)",
                                                            ["--no-independent"])):
        r = run_child(python("-m", "numeric", "report", str(panel), "--workers", "1", *extra))
        rows[label] = {"rc": r["rc"], "cpu_s": round(r["cpu_s"], 2), "peak_rss_gib": round(r["peak_rss_bytes"] / 2**30, 3)}
    brackets = len(list((panel / "brackets").glob("*.safetensors")))
    return {"panel_cpu_s": round(made["cpu_s"], 2), "bracket_files": brackets, "reports": rows}


def _study(p: dict) -> dict:
    from numeric.study.calibrate import parse_shape, synthetic
    from numeric.study.compare import compare
    from numeric.study.protocol import comparisons

    data = synthetic(parse_shape(p["shape"]), "null", np.random.default_rng(0), np.random.default_rng(1),
                     rng_extra=np.random.default_rng(2))
    runs = []
    for reps in p["replicates"]:
        t0 = time.process_time()
        res = compare(data, comparisons(), replicates=reps, seed=1, jobs=1)
        runs.append({"replicates": reps, "cpu_s": round(time.process_time() - t0, 2),
                     "rows_run": sum(r.reason is None for r in res), "rows": len(res)})
    return {"table_rows": len(data), "runs": runs}


def _demo(tmp: Path) -> dict:
    t0 = time.perf_counter()
    r = run_child(python("-m", "numeric", "panel", "--model", "minilm", "--demo", "--quiet", "--out", str(tmp / "demo")))
    return {"rc": r["rc"], "cpu_s": round(r["cpu_s"], 1), "wall_s": round(time.perf_counter() - t0, 1),
            "peak_rss_gib": round(r["peak_rss_bytes"] / 2**30, 3)}


def run(case: Case, tmp: Path) -> dict:
    what = case.params["what"]
    if what == "report":
        return _report(dict(case.params), tmp)
    if what == "study":
        return _study(dict(case.params))
    return _demo(tmp)


def tables(results: list[dict]) -> dict[str, str]:
    rows = []
    for r in sorted(results, key=lambda r: (["report", "study", "demo"].index(r["params"]["what"]), r["case"])):
        p, rec = r["params"], r["record"]
        if p["what"] == "report":
            for label, x in rec["reports"].items():
                rows.append([f"`numeric report` on a {rec['bracket_files']}-file panel, {label}", fmt(x["cpu_s"], 1),
                             f"exit {x['rc']}, peak RSS {x['peak_rss_gib']:.2f} GiB"])
        elif p["what"] == "study":
            for x in rec["runs"]:
                rows.append([f"study comparisons, {rec['table_rows']:,}-row synthetic table, "
                             f"{x['replicates']} bootstrap resamples", fmt(x["cpu_s"], 1),
                             f"{x['rows_run']} of {x['rows']} comparison rows run"])
        else:
            rows.append(["the README's main job (`numeric panel --model minilm --demo`), all processes",
                         fmt(rec["cpu_s"], 1), f"exit {rec['rc']}, {rec['wall_s']:.0f} s wall, "
                         f"peak RSS {rec['peak_rss_gib']:.2f} GiB"])
    return {"times": table(["command", "CPU s", "outcome"], rows, "lrl")}


SUITE = Suite("commands", "report, study and main-job times", cases, run, tables, "python -m bench run commands")
