"""The Python front door ``softrank``: the command line's brackets, batches, the bracket file, bad input.

Every search here is small (4 x 4 two-bit matrices, 8 x 8 softmaxes) at effort quick.
"""
from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softrank
from exact.bracketfile import read_bracket_file
from fileio.bracketwriter import write_bracket_file

ROOT = Path(__file__).resolve().parents[1]


def twobit(t, s):
    k = lambda u: u * np.eye(2) + (1 - u) * np.ones((2, 2)) / 2
    return np.kron(k(t), k(s))


def softmax8(seed: int) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(2.0 * torch.randn(8, 8, generator=g, dtype=torch.float64), -1).numpy()


@pytest.fixture(scope="module")
def pair():
    """Two known-answer matrices (Appendix K.6) bracketed as one batch."""
    A = np.stack([twobit(0.75, 0.5), twobit(0.75, 0.75)])
    return A, softrank.bracket(A, eps=("1/4", "5/8"), effort="quick", progress=False)


def _witnesses(path) -> dict:
    """Every cell's verdict-side facts and every witness tensor of a bracket file, by cell id."""
    bf = read_bracket_file(path)
    out = {}
    for c in bf.cells:
        names = sorted(v for claim in (c.lower, c.upper) for v in claim.fields.values() if isinstance(v, str))
        out[c.id] = {"claims": (c.lower, c.upper), "eps": c.eps_text,
                     "tensors": {n: bf.tensors[n].tobytes() for n in names + [c.target.matrix]}}
    return out


def test_bracket_equals_the_command_line(tmp_path):
    """The same matrix, seed and effort give the same cells through ``python -m numeric bracket``."""
    A = softmax8(1)
    np.save(tmp_path / "a.npy", A)
    out = tmp_path / "cli.safetensors"
    r = subprocess.run([sys.executable, "-m", "numeric", "bracket", "--matrix", str(tmp_path / "a.npy"),
                        "--eps", "1/4,0.5", "--effort", "quick", "--seed", "3", "--out", str(out), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    b = softrank.bracket(A, eps=("1/4", "0.5"), effort="quick", seed=3, progress=False)
    api = tmp_path / "api.safetensors"
    b.save(api)
    assert _witnesses(api) == _witnesses(out)
    cli = softrank.verify(out)
    assert [(c.id, c.lower, c.upper, c.lower_kind, c.upper_kind, c.lower_margin, c.upper_margin)
            for c in cli] == [(c.id, c.lower, c.upper, c.lower_kind, c.upper_kind, c.lower_margin, c.upper_margin)
                              for c in b.cells]
    assert softrank.Brackets.load(out) == b                # the command line's file reads as the same Brackets
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["lower"], x["upper"]) for x in rows] == [(c.lower, c.upper) for c in b.cells]
    # negative control: another seed's file differs somewhere (the comparison can fail)
    other = softrank.bracket(A, eps=("1/4", "0.5"), effort="quick", seed=4, progress=False)
    assert other.file != b.file


def test_batch_known_answers_and_per_head_equality(pair):
    A, b = pair
    assert b.batch_shape == (2,) and b.eps == (Fraction(1, 4), Fraction(5, 8))
    assert b.lower.shape == (2, 2) and b.lower.dtype == np.int64
    # the paper's ranks (K.6): A(3/4, 1/2) at 1/4 and 5/8: 4 and 2; A(3/4, 3/4) at 5/8: 3
    assert b.cell("1/4", 0).lower == b.cell("1/4", 0).upper == 4
    assert b.cell(0.625, 0).closed and b.cell(0.625, 0).upper == 2
    assert b.cell("5/8", 1).lower <= 3 <= b.cell("5/8", 1).upper
    assert all(c.verified for c in b.cells) and (b.lower <= b.upper).all()
    one = softrank.bracket(torch.from_numpy(A[1]), eps=("1/4", "5/8"), effort="quick", progress=False)
    strip = lambda c: (c.eps, c.lower, c.upper, c.lower_kind, c.upper_kind, c.lower_margin, c.upper_margin)
    assert [strip(c) for c in one.cells] == [strip(c) for c in b.cells[2:]]
    assert [c.id for c in b.cells] == ["cell[0]/eps=1/4", "cell[0]/eps=5/8", "cell[1]/eps=1/4", "cell[1]/eps=5/8"]
    with pytest.raises(softrank.UserInputError, match="no cell at eps"):
        b.cell(0.3, 0)
    with pytest.raises(softrank.UserInputError, match="outside the batch"):
        b.cell("1/4", 2)


def test_round_trip_through_the_bracket_file(pair, tmp_path):
    _, b = pair
    path = b.save(tmp_path / "b.safetensors")
    assert softrank.Brackets.load(path) == b
    assert softrank.Brackets.load(path.read_bytes()) == b
    assert softrank.Brackets.load(path).file == b.file == path.read_bytes()
    v = softrank.verify(path)
    assert v.all_verified and len(v) == 4 and "4/4 cells verified" in v.table()
    r = subprocess.run([sys.executable, "-m", "exact", "verify", str(path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    table = b.table()
    assert "verified by the exact tier" in table and len(table.splitlines()) == 2 + 4
    assert b._repr_markdown_().count("\n| [") == 4 and "<table>" in b._repr_html_()
    assert b.provenance["search"]["effort"] == "quick"
    assert b.provenance["softrank"]["conversion"] == "float64 as given"


def test_a_tampered_file_is_refused(pair, tmp_path):
    """Negative control of the round trip: a file claiming one rank more than was proved."""
    _, b = pair
    path = b.save(tmp_path / "b.safetensors")
    bf = read_bracket_file(path)
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        doc = json.loads(f.metadata()["softrank"])
    doc["cells"][1]["lower"]["rank"] += 1             # A(3/4, 1/2) at 5/8: L = 3 > r_eps = 2
    bad = write_bracket_file(tmp_path / "bad.safetensors", doc["cells"], dict(bf.tensors))
    with pytest.raises(softrank.UserInputError, match="refutes cell 'cell\\[0\\]/eps=5/8'"):
        softrank.Brackets.load(bad)
    v = softrank.verify(bad)
    assert not v.all_verified and not v[1].verified and v[0].verified and "REFUTED" in v.table()


def test_half_precision_is_converted_exactly_and_recorded():
    A16 = torch.from_numpy(softmax8(2)).to(torch.float16)
    b = softrank.bracket(A16, eps=0.5, effort="quick", progress=False)
    assert b.cells[0].verified
    prov = b.provenance["softrank"]
    assert prov["input_dtype"] == "float16" and prov["conversion"] == "float16 -> float64, exact"
    target = read_bracket_file_bytes(b.file).tensors["cell/matrix"]
    assert np.array_equal(target, A16.to(torch.float64).numpy())
    bf16 = softrank.inputs.as_matrices(torch.from_numpy(softmax8(2)).to(torch.bfloat16))
    assert bf16.dtype == "bfloat16" and np.array_equal(bf16.array, torch.from_numpy(softmax8(2)).to(
        torch.bfloat16).to(torch.float64).numpy())
    # the documented tolerance is per dtype: the same row error passes in float16, not in float64
    off = np.full((4, 4), 0.25)
    off[0] += 2e-4
    softrank.inputs.as_matrices(off.astype(np.float16))
    with pytest.raises(softrank.UserInputError, match="not probability vectors"):
        softrank.inputs.as_matrices(off)


def read_bracket_file_bytes(data: bytes):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "f.safetensors"
        p.write_bytes(data)
        return read_bracket_file(p)


def _bad_inputs():
    good = np.full((3, 3), 1 / 3)
    nan, inf, neg = good.copy(), good.copy(), np.array([[1.5, -0.5], [0.5, 0.5]])
    nan[1, 2], inf[0, 0] = np.nan, np.inf
    grad = torch.full((3, 3), 1 / 3, requires_grad=True)
    cases = {
        "non-square": ({"A": np.full((3, 4), 0.25)}, "not square"),
        "vector": ({"A": np.full(3, 1 / 3)}, "shape (n, n)"),
        "empty": ({"A": np.zeros((0, 0))}, "empty"),
        "nan": ({"A": nan}, "NaN or Inf"),
        "inf": ({"A": inf}, "NaN or Inf"),
        "negative": ({"A": neg}, "negative entries"),
        "rows": ({"A": np.ones((3, 3))}, "not probability vectors"),
        "rows-torch-batch": ({"A": torch.ones(2, 3, 3) / 3.001}, "not probability vectors"),
        "eps-zero": ({"eps": 0}, "outside (0, 1]"),
        "eps-negative": ({"eps": -0.1}, "outside (0, 1]"),
        "eps-two": ({"eps": 2}, "at most 2"),
        "eps-1.5": ({"eps": (0.1, 1.5)}, "r_eps(A) = 0"),
        "eps-nan": ({"eps": float("nan")}, "not finite"),
        "eps-text": ({"eps": "abc"}, "not a rational"),
        "eps-repeated": ({"eps": (0.25, "1/4")}, "repeated"),
        "eps-none": ({"eps": ()}, "no tolerances"),
        "grad": ({"A": grad}, "requires gradients"),
        "int-numpy": ({"A": np.eye(3, dtype=np.int64)}, "integer dtype"),
        "int-torch": ({"A": torch.eye(3, dtype=torch.int32)}, "integer dtype"),
        "bool": ({"A": np.eye(3, dtype=bool)}, "integer dtype"),
        "complex": ({"A": good.astype(complex)}, "dtype complex128"),
        "object": ({"A": np.array([[None]])}, "dtype object"),
        "effort": ({"effort": "fast"}, "unknown effort 'fast'"),
        "seed": ({"seed": -1}, "non-negative integer"),
        "seed-float": ({"seed": 1.5}, "non-negative integer"),
        "progress": ({"progress": "yes"}, "progress must be"),
        "device": ({"device": "nonsense"}, "device 'nonsense'"),
    }
    if not torch.cuda.is_available():
        cases["device-cuda"] = ({"device": "cuda"}, "not available")
    if np.dtype(np.longdouble).itemsize > 8:
        cases["longdouble"] = ({"A": good.astype(np.longdouble)}, "dtype float")
    return cases


@pytest.mark.parametrize("name", sorted(_bad_inputs()))
def test_bad_input_is_one_line(name):
    kwargs, message = _bad_inputs()[name]
    call = {"A": np.full((3, 3), 1 / 3), "eps": 0.5, "effort": "quick", "progress": False, **kwargs}
    with pytest.raises(softrank.UserInputError) as info:
        softrank.bracket(call.pop("A"), **call)
    text = str(info.value)
    assert message in text and "\n" not in text, text


def test_verify_bad_sources(tmp_path):
    with pytest.raises(softrank.UserInputError, match="no such file"):
        softrank.verify(tmp_path / "nope.safetensors")
    with pytest.raises(softrank.UserInputError, match="malformed bracket file"):
        softrank.verify(b"\x00garbage")
    with pytest.raises(softrank.UserInputError, match="a path or the bytes"):
        softrank.verify(12)


def test_attention_from_model_objects():
    transformers = pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(softrank.minilm_path(), local_files_only=True)
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64)
    bert = transformers.BertModel(cfg, add_pooling_layer=False)
    bert.train()
    if bert.config._attn_implementation != "eager":
        with pytest.raises(softrank.UserInputError, match='attn_implementation="eager"'):
            softrank.attention(bert, tok, "The cat sat on the mat.")
    bert.set_attn_implementation("eager")
    a = softrank.attention(bert, tok, "The cat sat on the mat.", layers=1, heads=[0, 2])
    assert bert.training                                  # the caller's mode is restored
    n = len(tok("The cat sat on the mat.")["input_ids"])
    assert a.matrices.shape == a.logits.shape == (1, 2, n, n) and a.family == "encoder"
    assert a.hf_max_abs_diff <= 1e-5
    np.testing.assert_allclose(a.matrices.sum(-1), 1.0, atol=1e-12)
    same = softrank.attention(bert, tok("The cat sat on the mat."), layers=[1], heads=[0, 2])
    assert np.array_equal(same.logits, a.logits)
    with pytest.raises(softrank.UserInputError, match="outside the model's 2 layers"):
        softrank.attention(bert, tok, "text", layers=2)
    with pytest.raises(softrank.UserInputError, match="tokenizer"):
        softrank.attention(bert, None, "text")
    gpt = transformers.GPT2Model(transformers.GPT2Config(vocab_size=tok.vocab_size, n_embd=32, n_layer=2, n_head=4,
                                                         n_positions=64, bos_token_id=0, eos_token_id=0))
    gpt.set_attn_implementation("eager")
    d = softrank.attention(gpt, None, list(range(100, 111)), heads=1)
    assert d.kind == "prefix-block" and d.matrices.shape == (2, 1, 5, 5)
    b = softrank.bracket(d, eps=0.5, effort="quick", progress=False)   # the panel's target: logits, slack
    assert b.batch_shape == (2, 1) and all(c.verified and c.slack is not None for c in b.cells)
    assert b.provenance["input_kind"] == "logits" and b.provenance["softrank"]["capture"]["layer"] == 0


def test_long_searches_announce_their_cost_and_progress_is_optional(monkeypatch, capsys):
    """A million-entry target announces its cost on stderr before the search starts (as the command
    line does); the tqdm bar is drawn with progress=True and not with progress=False."""
    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(softrank.api.front, "search_targets", interrupted)
    big = np.full((1024, 1024), 1 / 1024)
    for progress in (True, False):
        with pytest.raises(KeyboardInterrupt):
            softrank.bracket(big, eps=0.5, progress=progress)
        err = capsys.readouterr().err
        assert err.startswith("softrank.bracket: 1024 x 1024 at effort default") and "expected cost" in err
        assert ("0/2" in err) is progress
    with pytest.raises(KeyboardInterrupt):
        softrank.bracket(np.full((4, 4), 0.25), eps=0.5)
    assert "expected cost" not in capsys.readouterr().err


# ---- hostile files and outputs: one UserInputError each, never a raw error, a block or a write through a link

@pytest.fixture(scope="module")
def twobit_file(tmp_path_factory):
    """A small verified bracket file from the exact two-bit oracle (no search: cheap)."""
    from oracles.twobit import main as twobit_main

    path = tmp_path_factory.mktemp("tb") / "tb.safetensors"
    assert twobit_main(["--t", "1/2", "--s", "1/2", "--eps", "1/4", "--export", str(path)]) == 0
    return path


def _with_provenance(src: Path, dest: Path, provenance) -> Path:
    from safetensors import safe_open

    with safe_open(str(src), framework="numpy") as f:
        doc = json.loads(f.metadata()["softrank"])
    for cell in doc["cells"]:
        cell["provenance"] = provenance
    return write_bracket_file(dest, doc["cells"], dict(read_bracket_file(src).tensors))


@pytest.mark.parametrize("shape", [5, "ab", [[1]], [2**70], [1e3], [-1, -1], [0], [True], {"a": 1}, [1] * 40,
                                   [10**400 // 10**399]])
def test_load_refuses_a_hostile_batch_shape_with_user_input_error(twobit_file, tmp_path, shape):
    path = _with_provenance(twobit_file, tmp_path / "h.safetensors", {"softrank": {"batch_shape": shape}})
    if shape == [10**400 // 10**399]:                # [10]: a well-formed shape that does not fit: the default
        assert softrank.Brackets.load(path).batch_shape == ()
        return
    with pytest.raises(softrank.UserInputError, match="batch_shape") as info:
        softrank.Brackets.load(path)
    assert "\n" not in str(info.value)


def test_load_keeps_the_bytes_it_verified(twobit_file, tmp_path, monkeypatch):
    """A file replaced after it was read is not what load returns: the judged bytes are the kept bytes."""
    import softrank.records as records

    path = tmp_path / "b.safetensors"
    path.write_bytes(twobit_file.read_bytes())
    original = path.read_bytes()
    real = records.read_bracket_file

    def swap_then_read(p, *a, **kw):
        path.write_bytes(b"swapped" * 10)             # the file on disk changes while it is judged
        return real(p, *a, **kw)

    monkeypatch.setattr(records, "read_bracket_file", swap_then_read)
    b = softrank.Brackets.load(path)
    assert b.file == original and b.cells[0].verified


def test_load_names_what_a_path_is(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    cases = {fifo: "is a FIFO", Path("/dev/zero"): "is a character device", loop: "symbolic link loop",
             tmp_path: "is a directory", tmp_path / "nope": "no such file"}
    for path, words in cases.items():
        with pytest.raises(softrank.UserInputError, match=words):
            softrank.Brackets.load(path)
        with pytest.raises(softrank.UserInputError, match=words):
            softrank.verify(path)


def test_save_refuses_links_fifos_devices_and_directories(twobit_file, tmp_path):
    import os

    b = softrank.Brackets.load(twobit_file)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    link = tmp_path / "link.safetensors"
    link.symlink_to(victim)
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)                                   # the old save blocked here forever
    (tmp_path / "dir.safetensors").mkdir()
    for target, words in ((link, "symbolic link"), (fifo, "FIFO"), (tmp_path / "dir.safetensors", "directory"),
                          (Path("/dev/null"), "character device")):
        with pytest.raises(softrank.UserInputError, match=words):
            b.save(target)
    assert victim.read_bytes() == b"keep me"
    out = b.save(tmp_path / "new" / "b.safetensors")    # negative control: a plain new path is written
    assert out.read_bytes() == b.file
