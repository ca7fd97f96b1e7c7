"""The training scripts of the shipped models (numeric.heads.zoo), on toy configs.

Each ``--tiny`` run trains a sliver of the real architecture for a few dozen
steps on a slice of the real data; the held-out loss must fall. Bad data files
give one line on stderr and exit 2.
"""
from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("sklearn")

from numeric.heads.models import load_model
from numeric.heads.zoo import corpus, digits
from numeric.heads.zoo.common import file_sha256, verify_manifest
from numeric.heads.zoo.train import main, train_decoder
from numeric.heads.zoo.vit import train_digit_vit


def cli(*args):
    return subprocess.run([sys.executable, "-m", "numeric.heads.zoo", *args], capture_output=True, text=True,
                          timeout=600)


def one_line_error(proc):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("name, family", [("docgpt2", "gpt2"), ("docqwen2", "qwen2")])
def test_decoder_training_lowers_heldout_loss(tmp_path, name, family):
    doc = train_decoder(name, tmp_path, tiny=True)
    m = doc["metrics"]
    assert m["heldout_loss"] < m["heldout_loss_initial"] - 0.5, m
    assert doc["data"]["text_sha256"] == corpus.CORPUS_SHA256 and doc["data"]["tiny"] is True
    assert verify_manifest(tmp_path)["files"]["model.safetensors"] == file_sha256(tmp_path / "model.safetensors")
    lm = load_model(str(tmp_path))
    assert lm.family == "decoder" and lm.model_type == family and lm.extra["manifest"]["name"] == name


def test_vit_training_lowers_heldout_loss(tmp_path):
    doc = train_digit_vit(tmp_path, tiny=True)
    m = doc["metrics"]
    assert m["heldout_loss"] < m["heldout_loss_initial"], m
    assert m["heldout_images"] == 360 and m["train_images"] == 1437
    lm = load_model(str(tmp_path))
    assert lm.family == "vit" and lm.extra["manifest"]["sources"] == "digits"


def test_training_is_deterministic(tmp_path):
    a = train_decoder("docgpt2", tmp_path / "a", tiny=True, steps=3)
    b = train_decoder("docgpt2", tmp_path / "b", tiny=True, steps=3)
    assert a["files"] == b["files"] and a["metrics"] == b["metrics"]


def test_corpus_rebuild_matches_and_splits():
    text = corpus.read_corpus()
    train, held = corpus.split_paragraphs(text)
    n = text.count("\n")
    assert held.count("\n") == n // corpus.HELDOUT_EVERY and train.count("\n") + held.count("\n") == n
    assert not set(held.splitlines()) - set(text.splitlines())


def test_bad_corpus_files(tmp_path):
    missing = one_line_error(cli("train", "docgpt2", "--tiny", "--out", str(tmp_path / "o"),
                                 "--corpus", str(tmp_path / "none.gz")))
    assert "missing" in missing
    bad = tmp_path / "bad.gz"
    bad.write_bytes(corpus.CORPUS_PATH.read_bytes()[:1000])  # truncated gzip
    assert "corrupted" in one_line_error(cli("train", "docgpt2", "--tiny", "--out", str(tmp_path / "o"),
                                             "--corpus", str(bad)))
    other = tmp_path / "other.gz"
    with gzip.open(other, "wb") as f:
        f.write(b"some other text\n")
    assert "sha256" in one_line_error(cli("train", "docqwen2", "--tiny", "--out", str(tmp_path / "o"),
                                          "--corpus", str(other)))
    assert not (tmp_path / "o").exists()


def test_bad_digits_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(digits, "DIGITS_SHA256", "0" * 64)
    digits.digits.cache_clear()
    digits.split.cache_clear()
    try:
        assert main(["train", "digitvit", "--tiny", "--out", str(tmp_path / "v")]) == 2
    finally:
        digits.digits.cache_clear()
        digits.split.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "digits data has sha256" in err[0]
    assert not (tmp_path / "v").exists()


def test_bad_steps(tmp_path):
    assert "--steps" in one_line_error(cli("train", "docgpt2", "--tiny", "--steps", "0", "--out", str(tmp_path)))
