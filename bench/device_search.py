"""The bracket search on CPU and on CUDA, side by side, on real MiniLM heads.

For each head and device: ``numeric.search.search_brackets`` at the given
tolerances (softmax targets with their slack), the bracket file it exports,
and the exact re-verification of that file (``exact.verify``). Prints the
brackets, the seconds per head on each device and their ratio. Devices that
torch does not see are skipped with a note.

    python -m bench.device_search [--heads-npz FILE] [--eps 0.1,0.25,0.5] [--devices cpu,cuda]
                                  [--sizes 128,256,512,1024] [--effort default]

``--sizes``: the scaling cases of the scaling suite (``bench/suites/scaling.py``) instead (synthetic sharp and diffuse
heads at each n), so the same growth in n is measured on each device.

``--heads-npz`` reads logits saved with ``np.savez`` (read with
``allow_pickle=False``); without it the heads are extracted from the packaged
all-MiniLM-L6-v2 (source 0, 256 tokens).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


from exact.verify import verify_file
from numeric.search.export import write_bracket_file
from numeric.heads.extract import softmax_rows
from numeric.search import search_brackets

DEFAULT_HEADS = [(0, 0), (1, 3), (2, 0), (3, 7)]


def load_heads(path):
    if path:
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k], dtype=np.float64) for k in data.files}
    from numeric.heads.extract import extract_heads, source_for
    from numeric.heads.models import load_model

    lm = load_model("minilm")
    src = source_for(lm, 0, length=256)
    return {f"l{l}h{h}": cap.logits for cap, (l, h) in zip(extract_heads(lm, src, DEFAULT_HEADS), DEFAULT_HEADS)}


def scaling_heads(sizes: str) -> dict:
    """The synthetic heads of the scaling suite (``bench/suites/scaling.py``) (sharp and diffuse) at each n."""
    from bench.suites.scaling import synthetic

    return {f"{kind}{n}": synthetic(kind, int(n)) for n in sizes.split(",") for kind in ("sharp", "diffuse")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.device_search", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads-npz")
    ap.add_argument("--eps", default="0.1,0.25,0.5")
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--sizes", help="run the scaling cases of the scaling suite at these n instead")
    ap.add_argument("--effort", default="default")
    args = ap.parse_args(argv)
    import torch

    eps = [float(e) for e in args.eps.split(",")]
    devices = []
    for d in args.devices.split(","):
        if d == "cuda" and not torch.cuda.is_available():
            print("cuda: not available, skipped")
            continue
        devices.append(d)
    if "cuda" in devices:
        print(f"cuda device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    heads = scaling_heads(args.sizes) if args.sizes else load_heads(args.heads_npz)
    seconds = {d: 0.0 for d in devices}
    ok = True
    print(f"{'head':<12} {'device':<6} " + " ".join(f"{'eps=' + str(e):>14}" for e in eps) + "  seconds  verified")
    with tempfile.TemporaryDirectory() as tmp:
        for name, H in heads.items():
            A = softmax_rows(H)
            for d in devices:
                t0 = time.perf_counter()
                out = search_brackets(A, eps, logits=H, id_prefix=f"{name}-{d}", device=d, effort=args.effort)
                dt = time.perf_counter() - t0
                seconds[d] += dt
                path = write_bracket_file(os.path.join(tmp, f"{name}-{d}.safetensors"), out.cells, out.tensors)
                reports = verify_file(path)
                verified = all(r.verified for r in reports)
                ok &= verified
                cols = " ".join(f"{f'[{r.lower}, {r.upper}]':>14}" for r in out.results)
                print(f"{name:<12} {d:<6} {cols}  {dt:7.1f}  {sum(r.verified for r in reports)}/{len(reports)}",
                      flush=True)
    if len(devices) == 2:
        a, b = devices
        print(f"total seconds: {a} {seconds[a]:.1f}, {b} {seconds[b]:.1f}, ratio {a}/{b} {seconds[a] / seconds[b]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    from exact.errors import run_command

    run_command(main)
