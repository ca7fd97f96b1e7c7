"""The panel's input domains (paper L.6, the domain-transfer target).

Every source belongs to one domain, recorded per cell in the panel table's
``domain`` column. A model's *modality* decides which domains it can read:

- text models (encoders, decoders): ``docs``, the shipped docstring corpus
  (``text:k`` windows, the panel's sources since its first run), and
  ``code``, the shipped source code of the same standard-library modules
  without docstrings and comments (``code:k`` windows;
  ``numeric/heads/corpus/build_corpus.py --code``);
- ViTs that read the held-out digits (``sources: digits`` in the manifest,
  ``digitvit`` and ``digitvit-rot90``): ``digits`` (``digits:k``) and
  ``digits-rot90``, the same held-out digits with every 8 x 8 image rotated
  90 degrees counter-clockwise (``numpy.rot90``, an exact permutation of the
  pixels, the second ViT arm's shift) before the pixel pipeline
  (``digits-rot90:k``);
- any other ViT: its synthetic images (``synthetic``) or image directory
  (``images``), one domain.

The first domain of a modality is its *primary* one: the sources a panel
ran before domains existed, whose cell keys, seeds and rows are unchanged.
A panel cell of another domain has the domain in its key and its source id,
and B0's domain one-hot (``b0_domain``, ``numeric.study.blocks``) is the
domain's ``b0_label`` (the paper's B0 has "domain" among its nuisance
variables).

:func:`row_domain` is the one place that reads a row's domain; rows of
panels written before the column existed get theirs from the source id.

>>> [d.name for d in domains_of("text")]
['docs', 'code']
>>> row_domain("code", "code:3"), row_domain(None, "text:0")
('code', 'docs')
"""
from __future__ import annotations

from dataclasses import dataclass

from exact.errors import UserInputError

__all__ = ["Domain", "DOMAINS", "ALL", "DomainError", "domains_of", "primary_domain", "resolve_domains",
           "row_domain", "source_domain"]


class DomainError(UserInputError):
    """A domain a model cannot read, or an unknown name (exit 2 in the CLIs)."""


@dataclass(frozen=True)
class Domain:
    """``name``: the table's ``domain`` value; ``modality``: the models that read it; ``prefix``: its
    source ids' prefix (``prefix:k``); ``b0_label``: B0's domain one-hot level."""

    name: str
    modality: str
    prefix: str
    b0_label: str
    about: str


DOMAINS = {d.name: d for d in (
    Domain("docs", "text", "text", "text", "standard-library docstrings (numeric/heads/corpus/stdlib_docstrings.txt)"),
    Domain("code", "text", "code", "code", "standard-library source code without docstrings or comments "
           "(numeric/heads/corpus/stdlib_code.txt)"),
    Domain("digits", "digits", "digits", "image", "held-out load_digits images"),
    Domain("digits-rot90", "digits", "digits-rot90", "digits-rot90",
           "the same held-out digits, each 8 x 8 image rotated 90 degrees counter-clockwise"),
    Domain("synthetic", "synthetic", "synthetic", "image", "seeded smooth random fields"),
    Domain("images", "images", "image", "image", "the files of an image directory"),
)}
#: ``--domains all``: every domain of each model's modality.
ALL = "all"
_BY_PREFIX = {d.prefix: d.name for d in DOMAINS.values()}


def domains_of(modality: str) -> tuple:
    """The domains a model of ``modality`` reads, its primary one first."""
    return tuple(d for d in DOMAINS.values() if d.modality == modality)


def primary_domain(modality: str) -> str:
    return domains_of(modality)[0].name


def resolve_domains(names: list, modality: str) -> list:
    """The domains of ``names`` (``ALL``: every one) that a ``modality`` model reads, in registry
    order; ``DomainError`` for an unknown name."""
    bad = [n for n in names if n != ALL and n not in DOMAINS]
    if bad:
        raise DomainError(f"unknown domain {bad[0]!r} (domains: {', '.join(DOMAINS)}, or {ALL})")
    return [d.name for d in domains_of(modality) if ALL in names or d.name in names]


def source_domain(source_id: str) -> str:
    """The domain of a source id (``code:3`` -> ``code``; ``""`` for an unknown prefix)."""
    return _BY_PREFIX.get(str(source_id).split(":", 1)[0], "")


def row_domain(domain: str | None, source: str) -> str:
    """A panel row's domain from its ``domain`` column and its source id: the column, or (rows written
    before the column existed, ``domain`` None) the domain of its source id."""
    return str(domain) if domain else source_domain(source)
