"""Re-extraction of a panel's heads on this machine (``numeric.panel.binding.check_heads``, the work of
``python -m numeric report DIR --check-heads``): how many are byte-identical, and the time per head.

With ``--fresh``, DIR is first filled with the demo roster's 16 MiniLM heads (8 heads x 2 sources),
each extracted in its own forward pass as a panel cell does, with no search; the check then extracts them
again, one forward pass per source for all its heads, in the same process. Without it, DIR is a panel
directory: every head file with a record is checked (``--all``: every head file, its row made from the
head file's provenance; a local measurement that trusts the directory, the report audits it first).

    python -m research.reextract_heads --fresh runs/reextract
    python -m research.reextract_heads runs/demo
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from safetensors.numpy import save_file

from numeric.panel.audit import head_arrays
from numeric.panel.binding import HeadFile, check_heads
from numeric.panel.schema import PanelRow
from numeric.panel.table import RecordError, read_record


def _fresh(out: Path) -> None:
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model
    from numeric.panel.presets import DEMO_HEADS

    lm = load_model("minilm")
    (out / "heads").mkdir(parents=True, exist_ok=True)
    (out / "panel.json").write_text(json.dumps({"identity": {"model": "minilm", "length": 256}}))
    for s in range(2):
        src = source_for(lm, s, length=256)
        for layer, head in DEMO_HEADS:
            cap = extract_heads(lm, src, [(layer, head)])[0]
            save_file({"logits": cap.logits, "matrix": cap.matrix},
                      str(out / "heads" / f"L{layer}H{head}_s{s:02d}.safetensors"),
                      metadata={"provenance": json.dumps(cap.provenance, sort_keys=True)})


def _heads(out: Path, every: bool) -> list[HeadFile]:
    heads = []
    for hp in sorted((out / "heads").glob("*.safetensors")):
        arrays = head_arrays(out, hp.stem)
        if arrays is None:
            continue
        logits, matrix, prov = arrays
        try:
            rows = read_record(out / "cells" / f"{hp.stem}.json")[1]
        except RecordError:
            if not every:
                continue            # no record (a cell still running)
            rows = [PanelRow(prov["family"], prov["model"], prov["layer"], prov["head"], prov["source"], "1/4", "ok",
                             cell_kind=prov["cell_kind"], L=1, U=1)]
        heads.append(HeadFile(hp.stem, tuple(rows), logits, matrix, prov))
    return heads


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--fresh", action="store_true", help="first extract the demo roster's heads into DIR")
    p.add_argument("--all", action="store_true", help="every head file, with or without a record")
    args = p.parse_args(argv)
    out = Path(args.dir)
    if args.fresh:
        _fresh(out)
    identity = json.loads((out / "panel.json").read_text())["identity"]
    heads = _heads(out, args.all or args.fresh)
    cpu, wall = time.process_time(), time.perf_counter()
    checks = check_heads(heads, identity)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    for c in checks:
        print(f"{c.key}: {c.status}, delta {c.delta if c.delta is None else float(c.delta):.3g}, "
              f"{c.seconds:.3f} s wall{' (' + c.note + ')' if c.note else ''}")
    n = len(checks)
    print(f"{n} heads: {sum(c.status == 'bound' for c in checks)} byte-identical, "
          f"{sum(c.status == 'transferred' for c in checks)} transferred, "
          f"{sum(not c.ok for c in checks)} not bound; {cpu:.1f} s CPU and {wall:.1f} s wall in all, the model's "
          f"load included; median wall per head (its share of a forward pass) "
          f"{statistics.median(c.seconds for c in checks) if n else 0:.3f} s")
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
