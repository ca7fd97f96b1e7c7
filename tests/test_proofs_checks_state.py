"""The appendix checks' run options (``--thorough``, ``--export DIR``) are scoped state: a ``ContextVar`` each,
set by the command line for its run, never a module global or the process's environment."""
from __future__ import annotations

import os
import threading

from proofs_checks import _export, hardcore
from proofs_checks._core import is_thorough, thorough


def test_thorough_selects_the_larger_instances_inside_its_block_only(monkeypatch):
    seen = []
    monkeypatch.setattr(hardcore, "i4_run", lambda betas: seen.append(betas))
    hardcore.check_i4()
    with thorough():
        hardcore.check_i4()
        other: list[bool] = []
        t = threading.Thread(target=lambda: other.append(is_thorough()))
        t.start()
        t.join()
    with thorough(False):
        hardcore.check_i4()
    hardcore.check_i4()
    assert seen == [hardcore.I4_BETAS, hardcore.I4_BETAS_THOROUGH, hardcore.I4_BETAS, hardcore.I4_BETAS]
    assert other == [False] and not is_thorough()           # a plain thread has its own context


def test_export_to_keeps_files_there_and_leaves_the_environment_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("PROOFS_CHECKS_OUT", raising=False)
    before = dict(os.environ)
    kept = tmp_path / "kept"
    with _export.export_to(kept):
        assert _export.export_dir() == kept and kept.is_dir()
        with _export.export_to(None):                        # None changes nothing
            assert _export.export_dir() == kept
    assert dict(os.environ) == before
    assert _export._kept() is None                           # outside: no directory kept (a temporary one)
    monkeypatch.setenv("PROOFS_CHECKS_OUT", str(tmp_path / "env"))
    assert _export.export_dir() == tmp_path / "env"          # the variable still works outside a block
