"""The examples of the Python front door run: ``docs/api.md`` as a doctest.

An example that rots fails here. They use the shipped MiniLM at effort quick on short sentences.
The quickstart notebook (``docs/examples/quickstart.ipynb``) runs in the documentation build,
the one place it runs in the suite; ``tests/test_docs_site.py`` checks what it shows.
"""
from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]

#: ``# doctest: +ROUNDING``: the example's numbers in e-notation (margins and slacks, which move
#: with the float32 kernels of the CPU that ran the model: the matrices differ in their last bits)
#: compare as "a number there"; every other character of the output compares as usual.
ROUNDING = doctest.register_optionflag("ROUNDING")
SCIENTIFIC = re.compile(r"[-+]?\d\.\d+e[-+]\d+")


class RoundingChecker(doctest.OutputChecker):
    def check_output(self, want, got, optionflags):
        if optionflags & ROUNDING:
            want, got = SCIENTIFIC.sub("<e>", want), SCIENTIFIC.sub("<e>", got)
        return super().check_output(want, got, optionflags)


def run_doctests(path: Path) -> doctest.TestResults:
    """The examples of a text file, as ``doctest.testfile`` runs them, with ``RoundingChecker``."""
    test = doctest.DocTestParser().get_doctest(path.read_text(), {}, path.name, str(path), 0)
    runner = doctest.DocTestRunner(checker=RoundingChecker(),
                                   optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    return runner.summarize(verbose=False)


def test_api_md_examples_run():
    result = run_doctests(ROOT / "docs" / "api.md")
    assert result.attempted >= 30 and result.failed == 0, result


def test_a_rotten_example_fails(tmp_path):
    """Negative control: the doctest runner does compare outputs."""
    doc = tmp_path / "rot.md"
    doc.write_text("```python\n>>> 1 + 1\n3\n\n```\n")
    result = doctest.testfile(str(doc), module_relative=False, report=False)
    assert result.failed == 1


def test_rounding_compares_only_the_numbers_it_names(tmp_path, capsys):
    """``+ROUNDING`` lets a margin move and nothing else: a changed rank still fails, and without
    the directive (the control) a changed margin fails too."""
    doc = tmp_path / "margins.md"
    line = ">>> print('1/4  2  2  yes  factors  3.93e-02')"
    doc.write_text("\n".join([line + "  # doctest: +ROUNDING", "1/4  2  2  yes  factors  4.01e-02", "",
                              line + "  # doctest: +ROUNDING", "1/4  2  3  yes  factors  4.01e-02", "",
                              line, "1/4  2  2  yes  factors  4.01e-02", ""]))
    result = run_doctests(doc)
    capsys.readouterr()
    assert (result.attempted, result.failed) == (3, 2)
