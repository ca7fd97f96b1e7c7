"""``python -m numeric report DIR --check-heads`` on a real panel of a tiny ViT saved to disk: every head
re-extracted from the model here is byte-identical (bound); a capture moved by a little noise is transferred
with its delta printed; moved by more, or from other weights, it is an error (exit 1). numeric.panel.binding."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("matplotlib")

from numeric.heads.extract import softmax_rows
from numeric.panel import binding
from numeric.panel.cli import main as panel_main
from numeric.panel.report import main as report_main

PROG = "python -m numeric report:"


def save_vit(path: Path, seed: int = 1) -> Path:
    torch.manual_seed(seed)
    cfg = transformers.ViTConfig(image_size=16, patch_size=8, hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32)
    transformers.ViTModel(cfg, add_pooling_layer=False).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def vit_panel(tmp_path_factory):
    model = save_vit(tmp_path_factory.mktemp("models") / "tinyvit")
    out = tmp_path_factory.mktemp("panel") / "run"
    rc = panel_main(["--model", str(model), "--heads", "0.0,0.1", "--sources", "1", "--eps", "1/4",
                     "--effort", "quick", "--workers", "1", "--no-geometry", "--no-attack", "--no-report",
                     "--quiet", "--out", str(out)])
    assert rc == 0
    return model, out


@pytest.fixture
def panel(vit_panel, tmp_path):
    model, out = vit_panel
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    return model, copy


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    monkeypatch.setattr("numeric.panel.report.plot_all", lambda rows, figdir, root=None: {})


def report(out, capsys, *extra):
    rc = report_main([str(out), "--workers", "1", "--no-independent", "--check-heads", *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(line.startswith(PROG) for line in err.strip().splitlines()), err
    return rc, err, (out / "report.md").read_text()


def test_heads_re_extracted_here_are_bound(panel, capsys):
    _, out = panel
    rc, err, text = report(out, capsys)
    assert rc == 0, err
    assert "2 byte-identical (bound to the model)" in "\n".join(text.splitlines()[:6])
    section = text[text.index("## Heads re-extracted"):]
    assert section.count("| bound | 0 |") == 2


def test_a_head_recorded_for_other_weights_is_not_bound(panel, capsys):
    """The model on this machine now has other weights (the head files record the old SHA-256): exit 1."""
    model, out = panel
    save_vit(model, seed=2)
    try:
        rc, err, _ = report(out, capsys)
    finally:
        save_vit(model, seed=1)
    assert rc == 1 and err.count("is not the one the head files record") == 2, err


@pytest.mark.parametrize("noise, status", [(1e-9, "transferred"), (1e-1, "differs")])
def test_a_head_that_moved_is_transferred_or_refused(panel, capsys, monkeypatch, noise, status):
    """The capture moved by noise in its logits, as on another machine's BLAS: within the tolerance its
    brackets are transferred (delta and eps +- delta printed), beyond it the head is an error."""
    _, out = panel
    real = binding.extract_heads

    def moved(*a, **kw):
        caps = real(*a, **kw)
        rng = np.random.default_rng(0)
        moved = []
        for c in caps:
            logits = c.logits + noise * rng.standard_normal(c.logits.shape)
            moved.append(replace(c, logits=logits, matrix=softmax_rows(logits)))
        return moved

    monkeypatch.setattr(binding, "extract_heads", moved)
    rc, err, text = report(out, capsys)
    section = text[text.index("## Heads re-extracted"):]
    assert section.count(f"| {status} |") == 2
    if status == "transferred":
        assert rc == 0, err
        assert "r_(eps+delta)(A') <=" in section and "r_(eps-delta)(A') >=" in section
    else:
        assert rc == 1 and err.count("is not the model's head") == 2, err


def test_two_heads_swapped_consistently(panel, capsys):
    """The attack the audit cannot see: heads 0.0 and 0.1 swap their head files and bracket files, with every
    id and label rewritten to match (the report without --check-heads exits 0); re-extracted from the model,
    neither is the head its row names."""
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    _, out = panel
    files = {}
    for h in (0, 1):
        path = out / "brackets" / f"L0H{h}_s00.safetensors"
        with safe_open(str(path), "np") as f:
            files[h] = (json.loads(f.metadata()["softrank"]), load_file(str(path)),
                        (out / "heads" / f"L0H{h}_s00.safetensors").read_bytes())
    for h in (0, 1):
        meta, tensors, head = files[1 - h]
        for cell in meta["cells"]:
            cell["id"] = cell["id"].replace(f"L0H{1 - h}_", f"L0H{h}_")
            cell["provenance"]["head"] = h
        save_file(tensors, str(out / "brackets" / f"L0H{h}_s00.safetensors"), metadata={"softrank": json.dumps(meta)})
        (out / "heads" / f"L0H{h}_s00.safetensors").write_bytes(head)
    for h in (0, 1):
        rec = json.loads((out / "cells" / f"L0H{1 - h}_s00.json").read_text())
        for r in rec["rows"]:
            r.update(head=h, cell_id=r["cell_id"].replace(f"L0H{1 - h}_", f"L0H{h}_"),
                     file=f"brackets/L0H{h}_s00.safetensors")
        files[h] = files[h] + (rec,)
    for h in (0, 1):
        (out / "cells" / f"L0H{h}_s00.json").write_text(json.dumps(files[h][3]))
    assert report_main([str(out), "--workers", "1", "--no-independent"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    rc, err, _ = report(out, capsys)
    assert rc == 1 and err.count("is not the model's head") == 2, err
