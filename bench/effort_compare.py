"""Default and thorough, before and after a change, side by side: the upper search's "done when" table.

Four sides on the same heads (logits saved by ``bench/save_heads.py``, read without pickle):
default and thorough of a git ref (``before``, extracted with ``git archive``) and of the working
tree (``after``). Each run is ``bench/cpu_compare.py``'s search process (one BLAS thread, the
process CPU time of each head's search, the upper work units) for one side and one head,
``--jobs`` at a time, each pinned to its own core. With ``--reuse`` a head whose bracket file a
side's directory already holds is not run again for that side (the search is deterministic: a
rerun writes the same file; its CPU time is the one recorded in ``DIR/SIDE.jsonl``, if any). Every
bracket file is re-verified with the working tree's exact tier and only verified brackets are
compared. Prints per head and tolerance the four brackets, flags

- ``T>D``: a thorough U above the default U of the same code, ``T<D L``: a thorough L below the default
  L of the same code (the thorough preset must never be worse than default, on either side);
- ``wider (L lost)``, ``wider (U lost)``: an after bracket wider than the before bracket of the same
  preset, on the lower or the upper side;

and per preset and group (the head name's prefix up to ``_``) the median U/L before and after,
and the CPU seconds of each side. Exit status 1 when any of these flags is raised.

    python -m bench.effort_compare --ref 5d20121 --heads-npz HEADS.npz --heads q256_l4h2,demo0_l3h8 --out DIR
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench.common import add_heads_args, extract_ref, start, verified_brackets

ROOT = Path(__file__).resolve().parents[1]

SIDES = (("before", "default"), ("before", "thorough"), ("after", "default"), ("after", "thorough"))


def _name(code: str, effort: str) -> str:
    return f"{code}-{effort}"


def _missing(out: Path, heads: list[str]) -> list[str]:
    return [h for h in heads if not (out / f"{h}.safetensors").is_file()]


def run_sides(args, heads: list[str], out: Path) -> None:
    """Run the sides of ``--sides`` (with ``--reuse``, only the heads without a bracket file yet), one
    process per side and head, ``--jobs`` at a time, each on its own core; the run records are appended
    to ``DIR/SIDE.jsonl``."""
    todo = []
    for c, e in SIDES:
        name = _name(c, e)
        if name in args.sides.split(","):
            todo += [(c, e, h) for h in (_missing(out / name, heads) if args.reuse else heads)]
    tree = extract_ref(args.ref, out / "before_tree") if any(c == "before" for c, _, _ in todo) else None
    free, running = list(range(args.jobs)), {}
    while todo or running:
        while todo and free:
            c, e, h = todo.pop(0)
            core = free.pop(0)
            one = argparse.Namespace(**{**vars(args), "heads": h})
            running[start(tree if c == "before" else ROOT, core, one, e, out / _name(c, e) / h)] = (c, e, h, core)
        p = next(iter(running))
        for q in running:                 # the first to finish
            if q.poll() is not None:
                p = q
                break
        else:
            time.sleep(1)
            continue
        c, e, h, core = running.pop(p)
        free.append(core)
        text, _ = p.communicate()
        name = _name(c, e)
        if p.returncode != 0:
            raise SystemExit(f"{name} {h}: exited {p.returncode} (see {out / name / h}.log)")
        (out / name / h / f"{h}.safetensors").replace(out / name / f"{h}.safetensors")
        with open(out / f"{name}.jsonl", "a") as f:
            f.write(text)


def _runs_on_disk(out: Path) -> dict:
    got = {}
    for c, e in SIDES:
        path = out / f"{_name(c, e)}.jsonl"
        if path.is_file():
            got[_name(c, e)] = {r["head"]: r for r in map(json.loads, path.read_text().splitlines())}
    return got


def compare(got: dict, heads: list[str]) -> tuple[list, dict]:
    """(rows, medians): per head and tolerance the four brackets and the flags; per side and group
    and tolerance the median U/L (cells with L > 0)."""
    keys = sorted({k for side in got.values() for k in side}, key=lambda k: (heads.index(k[0]), k[1]))
    rows = []
    for k in keys:
        b = {name: side.get(k) for name, side in got.items()}
        flags = []
        for code in ("before", "after"):
            d, t = b.get(_name(code, "default")), b.get(_name(code, "thorough"))
            if d and t and t[1] > d[1]:
                flags.append(f"T>D {code}")
            if d and t and t[0] < d[0]:
                flags.append(f"T<D L {code}")
        for effort in ("default", "thorough"):
            x, y = b.get(_name("before", effort)), b.get(_name("after", effort))
            if x and y and y[0] < x[0]:
                flags.append(f"wider {effort} (L lost)")
            if x and y and y[1] > x[1]:
                flags.append(f"wider {effort} (U lost)")
        rows.append({"head": k[0], "eps": k[1], "brackets": b, "flags": flags})
    med = {}
    for name, side in got.items():
        groups: dict = {}
        for (h, e), (lo, up) in side.items():
            if lo > 0:
                groups.setdefault((h.split("_")[0], e), []).append(up / lo)
        med[name] = {f"{g} {e}": statistics.median(v) for (g, e), v in sorted(groups.items())}
    return rows, med


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.effort_compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_heads_args(ap)
    ap.add_argument("--jobs", type=int, default=2, help="sides run at a time, one core each")
    ap.add_argument("--reuse", action="store_true", help="keep a side whose bracket files are all there")
    ap.add_argument("--sides", default=",".join(_name(c, e) for c, e in SIDES),
                    help="the sides to run now (the table shows every side found in --out)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    heads = args.heads.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_sides(args, heads, out)
    runs = _runs_on_disk(out)
    got = {_name(c, e): verified_brackets(out / _name(c, e)) for c, e in SIDES}
    got = {name: {k: v for k, v in side.items() if k[0] in heads} for name, side in got.items()}
    rows, med = compare(got, heads)
    cpu = {name: {h: r["cpu"] for h, r in side.items() if h in heads} for name, side in runs.items()}
    bad = [r for r in rows if r["flags"]]
    if args.json:
        print(json.dumps({"ref": args.ref, "rows": rows, "medians": med, "cpu": cpu, "flagged": len(bad)},
                         indent=1, default=list))
        return 1 if bad else 0
    names = [_name(c, e) for c, e in SIDES]
    fmt = lambda b: f"[{b[0]}, {b[1]}]" if b else "-"
    print(f"before = {args.ref}, after = working tree")
    print(f"{'head':<14} {'eps':>5} " + " ".join(f"{n:>16}" for n in names) + "  flags")
    for r in rows:
        print(f"{r['head']:<14} {r['eps']:>5} " + " ".join(f"{fmt(r['brackets'].get(n)):>16}" for n in names)
              + "  " + ", ".join(r["flags"]))
    print("\nmedian U/L (group eps: " + " / ".join(names) + "):")
    for k in sorted({k for m in med.values() for k in m}):
        print(f"  {k}: " + " / ".join(f"{med[n].get(k, float('nan')):.3f}" for n in names))
    print("\nCPU s of the searches (process time; '-': side reused, not run now):")
    for n in names:
        c = cpu.get(n, {})
        total = f"{sum(c.values()):.1f}" if len(c) == len(heads) else "-"
        print(f"  {n:<16} total {total:>8}  " + ", ".join(f"{h} {c[h]:.1f}" for h in heads if h in c))
    print(f"\n{len(rows)} cells, {len(bad)} flagged (T>D / T<D L: thorough U above / L below default; wider: after wider than before, the side lost named)")
    return 1 if bad else 0


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)
