"""Extraction of attention heads (numeric.heads.extract) on tiny random models and MiniLM.

Every path is checked against the model's own ``output_attentions=True``
probabilities: the recorded max absolute difference must stay below
``HF_TOLERANCE`` (1e-5; float32 model, float64 recomputation).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from numeric.heads.extract import (BLOCK, HF_TOLERANCE, PREFIX, ExtractionError, extract_heads,
                             parse_heads, softmax_rows, source_for)
from numeric.heads.models import ModelInputError, family_of, load_model, minilm_path, wrap_model
from numeric.heads.sources import MAX_SOURCES, image_source, text_source

VOCAB = 30522  # the MiniLM tokenizer's vocabulary, reused by the tiny text models


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)


def tiny(kind: str, tokenizer=None):
    torch.manual_seed(0)
    if kind == "bert":
        cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=300)
        model = transformers.BertModel(cfg, add_pooling_layer=False)
    elif kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=300)
        model = transformers.GPT2Model(cfg)
    elif kind == "qwen2":
        cfg = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                                       max_position_embeddings=300)
        model = transformers.Qwen2Model(cfg)
    elif kind == "vit":
        cfg = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64)
        model = transformers.ViTModel(cfg, add_pooling_layer=False)
    else:
        raise AssertionError(kind)
    return wrap_model(model, tokenizer if kind != "vit" else None, name=f"tiny-{kind}")


def check_capture(cap, family):
    assert cap.hf_max_abs_diff is not None and cap.hf_max_abs_diff <= HF_TOLERANCE
    assert cap.logits.dtype == np.float64 and np.isfinite(cap.logits).all()
    np.testing.assert_allclose(cap.matrix.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cap.matrix, softmax_rows(cap.logits), rtol=0, atol=0)
    # logits are the scaled product of the captured projections
    np.testing.assert_allclose(cap.logits, cap.scale * cap.Q @ cap.K.T, rtol=1e-12, atol=1e-12)
    assert cap.Q.shape[0] == cap.logits.shape[0] and cap.K.shape[0] == cap.logits.shape[1]
    prov = cap.provenance
    for key in ("model", "weights_sha256", "layer", "head", "source", "mass", "attn_implementation", "dtype"):
        assert key in prov
    assert prov["family"] == family


@pytest.mark.parametrize("kind", ["bert", "gpt2", "qwen2"])
def test_text_models_match_hf(kind, tokenizer):
    lm = tiny(kind, tokenizer)
    src = source_for(lm, 1)
    heads = [(0, 0), (1, 3), (1, 1)]
    caps = extract_heads(lm, src, heads)
    assert [(c.layer, c.head) for c in caps] == heads
    for cap in caps:
        check_capture(cap, lm.family)
        if lm.family == "decoder":
            assert cap.logits.shape == (BLOCK, PREFIX)
            assert 0 < cap.min_mass <= cap.mass <= 1
            assert cap.local_mass is not None and cap.nonlocal_head == (cap.local_mass <= 0.5)
        else:
            assert cap.logits.shape == (256, 256) and cap.mass == 1.0


def test_decoder_block_is_renormalised_causal_row(tokenizer):
    """The block row is the causal row restricted to the prefix, divided by its mass."""
    lm = tiny("gpt2", tokenizer)
    src = source_for(lm, 0)
    cap = extract_heads(lm, src, [(1, 2)])[0]
    ids = torch.tensor([list(src.input_ids)])
    with torch.no_grad():
        att = lm.model(input_ids=ids, output_attentions=True).attentions[1][0, 2].double().numpy()
    rows = att[PREFIX:PREFIX + BLOCK, :PREFIX]
    mass = rows.sum(axis=1)
    np.testing.assert_allclose(cap.matrix, rows / mass[:, None], atol=5e-5)
    assert abs(cap.mass - mass.mean()) < 1e-5


def test_qwen2_grouped_keys(tokenizer):
    lm = tiny("qwen2", tokenizer)
    caps = extract_heads(lm, source_for(lm, 2), [(0, 0), (0, 1), (0, 2)])
    assert [c.provenance["kv_head"] for c in caps] == [0, 0, 1]
    np.testing.assert_array_equal(caps[0].K, caps[1].K)


def test_vit_class_token_and_patches():
    lm = tiny("vit")
    src = source_for(lm, 0)
    assert src.source_id == "synthetic:0"
    caps = extract_heads(lm, src, [(0, 1), (1, 0)])
    for cap in caps:
        check_capture(cap, "vit")
        assert cap.logits.shape == (17, 17)  # 1 class token + (32/8)^2 patches


def test_sources_are_deterministic_and_prefix_stable(tokenizer):
    a = text_source(tokenizer, 3, 64)
    b = text_source(tokenizer, 3, 64)
    assert a == b and len(a.input_ids) == 64
    assert a.input_ids[0] == tokenizer.cls_token_id and a.input_ids[-1] == tokenizer.sep_token_id
    last = text_source(tokenizer, MAX_SOURCES - 1, 64)
    assert last.span[0] > a.span[0]
    img = image_source(5, 16)
    assert img.pixel_values.shape == (3, 16, 16)
    np.testing.assert_array_equal(img.pixel_values, image_source(5, 16).pixel_values)


def test_minilm_real_heads():
    lm = load_model("minilm")
    assert lm.family == "encoder" and lm.num_layers == 6 and lm.num_heads == 12
    assert len(lm.weights_sha256) == 64
    caps = extract_heads(lm, source_for(lm, 0), [(0, 1), (5, 11)])
    for cap in caps:
        check_capture(cap, "encoder")
        assert cap.logits.shape == (256, 256)
        assert cap.provenance["token_ids"][0] == lm.processor.cls_token_id


def test_bad_inputs(tmp_path, tokenizer):
    with pytest.raises(ModelInputError, match="does not exist"):
        load_model(str(tmp_path / "nope"))
    with pytest.raises(ModelInputError, match="config.json"):
        load_model(str(tmp_path))
    with pytest.raises(ModelInputError, match="not supported"):
        family_of("t5")
    lm = tiny("gpt2", tokenizer)
    short = text_source(tokenizer, 0, 100, special_tokens=False)
    with pytest.raises(ExtractionError, match="shorter than"):
        extract_heads(lm, short, [(0, 0)])
    with pytest.raises(ExtractionError, match="outside"):
        extract_heads(lm, short, [(2, 0)])
    with pytest.raises(ValueError):
        parse_heads("1-2")


def test_model_without_attention_outputs(tokenizer):
    """GPT-2's upcast-and-reorder path bypasses the eager function: refused."""
    lm = tiny("gpt2", tokenizer)
    lm.model.config.reorder_and_upcast_attn = True
    for block in lm.model.h:
        block.attn.reorder_and_upcast_attn = True
    with pytest.raises(ExtractionError):
        extract_heads(lm, source_for(lm, 0), [(0, 0)])


@pytest.mark.parametrize("kind", ["qwen2", "vit"])
def test_load_by_path(tmp_path, kind, tokenizer):
    """A saved checkpoint directory loads offline and extracts like the in-memory model."""
    lm = tiny(kind, tokenizer)
    lm.model.save_pretrained(tmp_path)
    if kind != "vit":
        tokenizer.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.family == lm.family and loaded.path == str(tmp_path) and len(loaded.weights_sha256) == 64
    src = source_for(loaded, 3, prefix=16, block=16)
    a = extract_heads(loaded, src, [(1, 2)], prefix=16, block=16)[0]
    b = extract_heads(lm, src, [(1, 2)], prefix=16, block=16)[0]
    check_capture(a, lm.family)
    np.testing.assert_array_equal(a.logits, b.logits)


def test_image_directory_sources(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("b.png", "a.png"):
        Image.fromarray(rng.integers(0, 256, size=(20, 24, 3), dtype=np.uint8)).save(tmp_path / name)
    src = image_source(0, 16, image_dir=tmp_path, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    assert src.source_id == "image:a.png" and src.pixel_values.shape == (3, 16, 16)
    assert src.pixel_values.min() >= -2.0 - 1e-6 and src.pixel_values.max() <= 2.0 + 1e-6
    from numeric.heads.sources import SourceError

    with pytest.raises(SourceError, match="2 images"):
        image_source(2, 16, image_dir=tmp_path)
