"""The second ViT arm (paper Appendix L.3): the preset
``digitvit-rot90`` (``digitvit`` fine-tuned on rotated digits) and the two-arm
qualification ``python -m numeric.panel.arms`` (docs/models.md).
"""
from __future__ import annotations

import json
import math
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sklearn")

from numeric.heads.models import ModelInputError, load_model
from numeric.heads.zoo import digits
from numeric.heads.zoo.common import MANIFEST, TrainingError, file_sha256
from numeric.heads.zoo.train import WEIGHTS_DIR, main as zoo_main
from numeric.heads.zoo.vit_shift import NAME, shifted, train_shifted_vit
from numeric.panel import arms

EVAL_TOL = 1e-3          # re-evaluated loss vs the manifest (float32, another thread schedule)
MIN_ACCURACY = 0.9       # on the shifted task, after fine-tuning
MAX_INITIAL = 0.2        # the base on the shifted task: the shift must be real (chance is 0.1)


def manifest(name):
    return json.loads((WEIGHTS_DIR / name / MANIFEST).read_text())


def test_preset_loads_with_verified_hashes():
    lm = load_model(NAME)
    doc = lm.extra["manifest"]
    assert lm.family == "vit" and lm.name == NAME and (lm.num_layers, lm.num_heads) == (3, 4)
    assert doc["files"]["model.safetensors"] == file_sha256(WEIGHTS_DIR / NAME / "model.safetensors")
    # the fine-tune names the exact base it started from
    assert doc["base"]["files"] == manifest("digitvit")["files"]
    assert doc["threads"] == 1 and doc["sources"] == "digits" and doc["data"]["tiny"] is False
    assert lm.weights_sha256 != load_model("digitvit").weights_sha256


def test_shifted_task_learned_and_metrics_reproduce():
    """Accuracy re-evaluated on rotated held-out digits equals the manifest's; upright digits
    (the control) give the manifest's much lower upright accuracy."""
    from transformers import ViTForImageClassification

    from numeric.heads.zoo.vit import evaluate

    m = manifest(NAME)["metrics"]
    assert m["heldout_accuracy"] >= MIN_ACCURACY and m["heldout_accuracy_initial"] <= MAX_INITIAL
    clf = ViTForImageClassification.from_pretrained(WEIGHTS_DIR / NAME, local_files_only=True)
    x, y = digits.digits()
    held = digits.split()[1]
    loss, acc = evaluate(clf, digits.pixels(shifted(x[held])), y[held])
    assert abs(acc - m["heldout_accuracy"]) <= 1 / len(held) and abs(loss - m["heldout_loss"]) < EVAL_TOL
    _, upright = evaluate(clf, digits.pixels(x[held]), y[held])
    assert abs(upright - m["upright_heldout_accuracy"]) <= 1 / len(held) and upright < MIN_ACCURACY


def test_damaged_preset_refused(tmp_path, capsys):
    path = tmp_path / NAME
    shutil.copytree(WEIGHTS_DIR / NAME, path)
    w = path / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 1
    w.write_bytes(bytes(data))
    with pytest.raises(ModelInputError, match="stale or damaged"):
        load_model(str(path))
    assert zoo_main(["verify", str(path)]) == 2
    assert zoo_main(["verify", NAME]) == 0
    assert "match" in capsys.readouterr().out


def test_tiny_finetune_is_deterministic(tmp_path):
    a = train_shifted_vit(tmp_path / "a", tiny=True)
    b = train_shifted_vit(tmp_path / "b", tiny=True)
    assert a["files"] == b["files"] and a["metrics"] == b["metrics"]
    assert a["metrics"]["heldout_images"] == 60 and a["recipe"]["steps"] == 4
    assert load_model(str(tmp_path / "a")).extra["manifest"]["name"] == NAME


def test_damaged_base_refused(tmp_path, monkeypatch, capsys):
    base = tmp_path / "weights" / "digitvit"
    shutil.copytree(WEIGHTS_DIR / "digitvit", base)
    (base / "config.json").write_text((base / "config.json").read_text() + " ")
    with pytest.raises(TrainingError, match="base model digitvit"):
        train_shifted_vit(tmp_path / "o", tiny=True, base_dir=base)
    from numeric.heads.zoo import common

    monkeypatch.setattr(common, "WEIGHTS_DIR", tmp_path / "weights")
    assert zoo_main(["train", NAME, "--tiny", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: base model digitvit") and "stale or damaged" in err[0]
    assert not (tmp_path / "o").exists()


def _row(layer, head, src, L, U, verified=True, eps="1/4"):
    from numeric.panel.schema import PanelRow

    return PanelRow("vit", "digitvit", layer, head, src, eps, "ok", L=L, U=U, verified=verified)


def test_compare_arms_counts():
    cells = [(0, 0, "s0"), (1, 0, "s0"), (2, 0, "s0"), (2, 1, "s0"), (2, 2, "s0")]
    a = [_row(0, 0, "s0", 3, 4), _row(1, 0, "s0", 4, 5), _row(2, 0, "s0", 5, 6), _row(2, 1, "s0", 6, 7),
         _row(2, 2, "s0", 2, 2, verified=False)]
    b = [_row(0, 0, "s0", 3, 4), _row(1, 0, "s0", 5, 6), _row(2, 0, "s0", 7, 8), _row(2, 1, "s0", 8, 9),
         _row(2, 2, "s0", 2, 2)]
    (c,) = arms.compare_arms(a, b, cells, ["0.25"])
    assert (c.eps, c.cells, c.excluded) == ("1/4", 4, 1)       # the unverified cell is left out
    assert c.spearman_U == pytest.approx(1.0) and c.spearman_L == pytest.approx(1.0)
    assert (c.b_above, c.a_above, c.equal) == (0.75, 0.0, 0.25)
    assert (c.b_certified_above, c.a_certified_above) == (0.5, 0.0)   # L_B > U_A on layer 2's two cells
    assert [(s.layer, s.cells, s.b_above) for s in c.by_layer] == [(0, 1, 0.0), (1, 1, 1.0), (2, 2, 1.0)]
    (r,) = arms.compare_arms(b, a, cells, ["1/4"])                  # swapping the arms swaps the shares
    assert (r.b_above, r.a_above, r.a_certified_above) == (0.0, 0.75, 0.5)
    # reversed order in one arm: Spearman -1 (the statistic can fail)
    rev = [_row(l, h, s, 1, 10 - i) for i, (l, h, s) in enumerate(cells[:4])]
    (n,) = arms.compare_arms(a, rev, cells, ["1/4"])
    assert n.spearman_U == pytest.approx(-1.0)
    (none,) = arms.compare_arms(a, [], cells, ["1/4"])
    assert none.cells == 0 and none.excluded == 5 and math.isnan(none.spearman_U) and math.isnan(none.b_above)


def test_two_arm_run(tmp_path, capsys):
    """Both arms on three cells (one source, eps 1/2), each in its own panel directory,
    every bracket verified by the exact tier; finite Spearman and fractions."""
    rc = arms.main(["--out", str(tmp_path), "--heads", "0.0,1.3,2.2", "--sources", "1", "--eps", "1/2", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0 and "Spearman U" in out
    doc = json.loads((tmp_path / arms.JSON_NAME).read_text())
    (c,) = doc["comparisons"]
    assert c["cells"] == 3 and c["excluded"] == 0 and doc["sources"] == ["digits:0"]
    assert math.isfinite(c["spearman_U"]) and -1 <= c["spearman_U"] <= 1
    assert c["b_above"] + c["a_above"] + c["equal"] == pytest.approx(1.0)
    from numeric.panel.table import read_rows

    for arm in doc["arms"]:     # never pooled: one model per directory, every row verified
        rows = read_rows(arms.arm_dir(tmp_path, arm))
        assert {r.model for r in rows} == {arm} and len(rows) == 3 and all(r.verified for r in rows)


@pytest.mark.parametrize("arm_list, message", [("digitvit,digitvit", "two different models"),
                                               ("digitvit,docgpt2", "not a ViT"),
                                               ("digitvit", "two different models")])
def test_bad_arms(tmp_path, capsys, arm_list, message):
    assert arms.main(["--out", str(tmp_path), "--arms", arm_list, "--sources", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
