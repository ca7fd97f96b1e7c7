"""Row-side decoder LP against the row-map descent, by set size (sets beyond 32 rows).

Takes the certified row set of one cell of a bracket file (a row-side witness, ``Z = I[:, S]``)
and, for its first d rows, solves the LP-optimal map (``lp.min_norm_row_decoder``, HiGHS IPM)
and runs the descent (``row_map.descend_row_map``, 1,500 Adam steps from the pseudo-inverse),
printing both norms ``||G||`` (a set certifies ``r_eps >= d`` when ``||G|| eps < 1``), the
seconds of each and the LP's work units (``lp.decoder_work``, about a millisecond each).

    python -m research.row_lp_size --file /work/runs/cmp-warm-default/after/minilm_l1h3.safetensors --eps 1/10 --d 16,24,32,40,49
"""
from __future__ import annotations

import argparse
import json
import sys
import time



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m research.row_lp_size", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", required=True, help="a bracket file with a row-side lower witness")
    ap.add_argument("--eps", required=True, help="the cell's tolerance as written in the file, e.g. 1/10")
    ap.add_argument("--d", default="16,24,32", help="set sizes (prefixes of the certified set)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import numpy as np
    from safetensors import safe_open

    from numeric.search.budget import Budget
    from numeric.search.lp import decoder_work, min_norm_row_decoder
    from numeric.search.norms import row_l1_norm
    from numeric.search.row_map import descend_row_map
    from numeric.runtime import pinned_threads

    with safe_open(args.file, "np") as h:
        cells = json.loads(h.metadata()["softrank"])["cells"]
        cell = next((c for c in cells if c["eps"] == args.eps), None)
        if cell is None or cell["lower"]["witness"].get("kind") != "row_reconstruction":
            print(f"python -m research.row_lp_size: no row-side cell at eps {args.eps} in {args.file}", file=sys.stderr)
            return 2
        A = h.get_tensor(cell["target"]["matrix"])
        S = [int(i) for i in np.argmax(h.get_tensor(cell["lower"]["witness"]["Z"]), axis=0)]
    rows = []
    with pinned_threads():
        for d in [int(x) for x in args.d.split(",") if 0 < int(x) <= len(S)]:
            AS = A[S[:d]]
            t0 = time.perf_counter()
            _, lp_norm = min_norm_row_decoder(AS, iterations=5000)
            t_lp = time.perf_counter() - t0
            G0 = np.linalg.pinv(AS)
            t0 = time.perf_counter()
            _, de_norm = descend_row_map(AS, G0, 0.0, Budget(1500))
            t_de = time.perf_counter() - t0
            rows.append({"d": d, "lp_norm": lp_norm, "lp_seconds": round(t_lp, 2),
                         "lp_units": decoder_work(A.shape[1], d), "descent_norm": de_norm,
                         "descent_seconds": round(t_de, 2), "pinv_norm": row_l1_norm(G0)})
            if not args.json:
                r = rows[-1]
                print(f"d={d}: LP {r['lp_norm']:.4f} in {r['lp_seconds']} s ({r['lp_units']} units); descent "
                      f"{r['descent_norm']:.4f} in {r['descent_seconds']} s; pseudo-inverse {r['pinv_norm']:.3f}",
                      flush=True)
    if args.json:
        print(json.dumps({"file": args.file, "eps": args.eps, "set": len(S), "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
