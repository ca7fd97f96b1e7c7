"""FLINT's working precision is set only by ``exact.precision.arb_precision``, one locked block at a time:
the tree holds no other setter, and two threads at different precisions each compute at their own."""
from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest
from flint import arb, ctx

from exact.precision import arb_precision
from tests.helpers import PACKAGES, imports_of

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "exact" / "precision.py"
#: A write of FLINT's precision: ``ctx.workprec(...)``/``workdps``/``extraprec`` (FLINT's own scoped setters, which
#: take no lock), or an assignment to ``ctx.prec`` / ``ctx.dps``.
SETTER = re.compile(r"\b(workprec|workdps|extraprec|extradps)\s*\(|\bctx\.(prec|dps)\s*=(?!=)")


def _setters(path: Path) -> list[str]:
    """``path:line`` of every precision setter in a module that imports flint (mpmath keeps its own contexts:
    the second checker's private interval context is no FLINT state)."""
    text = path.read_text()
    if not any(name == "flint" or name.startswith("flint.") for name in imports_of(path)):
        return []
    ast.parse(text)                                            # a module that does not parse is not skipped
    return [f"{path.name}:{n}" for n, line in enumerate(text.splitlines(), 1)
            if SETTER.search(line.split("#", 1)[0])]


def _library() -> list[Path]:
    return sorted(p for pkg in (*PACKAGES, "bench", "research") for p in (ROOT / pkg).rglob("*.py"))


def test_nothing_but_the_helper_sets_flints_precision():
    files = _library()
    assert len(files) > 100 and HELPER in files
    bad = [hit for p in files if p != HELPER for hit in _setters(p)]
    assert not bad, "set the precision with exact.precision.arb_precision:\n" + "\n".join(bad)
    assert _setters(HELPER)                                    # the helper itself is seen by the same scan


@pytest.mark.parametrize("planted", ["with ctx.workprec(64):\n    pass\n", "ctx.prec = 200\n",
                                     "import flint\nflint.ctx.dps=30\n"])
def test_a_planted_setter_is_seen(tmp_path, planted):
    """Negative control: a module importing flint that sets the precision its own way is a violation."""
    f = tmp_path / "m.py"
    f.write_text("from flint import ctx\n" + planted)
    assert _setters(f) == [f"m.py:{2 if 'import flint' not in planted else 3}"]
    f.write_text("from mpmath.ctx_iv import MPIntervalContext\nctx = MPIntervalContext()\nctx.prec = 200\n")
    assert _setters(f) == []                                   # a private mpmath context is no FLINT state


def test_nested_blocks_restore_and_bad_bits_are_refused():
    before = ctx.prec
    with arb_precision(100):
        with arb_precision(300):
            assert ctx.prec == 300
        assert ctx.prec == 100
        with pytest.raises(ZeroDivisionError), arb_precision(40):
            raise ZeroDivisionError
        assert ctx.prec == 100
    assert ctx.prec == before
    for bits in (1, 0, -5, 64.0, True):
        with pytest.raises(ValueError, match="arb precision"):
            with arb_precision(bits):                          # type: ignore[arg-type]
                pass


def _radius_bits(x: arb) -> int:
    """-log2 of a ball's radius: about the working precision for 1/3 (a one-ulp rounding)."""
    man, exp = (int(v) for v in x.rad().man_exp())
    return -(exp + man.bit_length())


def test_two_threads_each_compute_at_their_own_precision():
    """Each thread checks, many times, that the precision inside its block is its own and that 1/3 is
    rounded at it; the lock serialises the blocks (one ends before the other starts). Control: FLINT's
    own unlocked ``ctx.workprec`` lets a thread see the other's precision (orchestrated, not left to luck)."""
    seen: dict[int, list[tuple[int, int]]] = {64: [], 512: []}
    spans: list[tuple[str, int]] = []
    start = threading.Barrier(2)

    def work(bits: int) -> None:
        start.wait()
        for _ in range(200):
            with arb_precision(bits):
                spans.append(("in", bits))
                seen[bits].append((ctx.prec, _radius_bits(arb(1) / 3)))
                spans.append(("out", bits))

    threads = [threading.Thread(target=work, args=(b,)) for b in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for bits, got in seen.items():
        assert len(got) == 200 and all(p == bits and bits - 4 <= r <= bits + 4 for p, r in got)
    assert all(spans[i][0] == "in" and spans[i + 1] == ("out", spans[i][1]) for i in range(0, len(spans), 2))

    # the same orchestration twice: thread B sets its precision while thread A is inside its block. Through
    # the helper B waits for A's block to end, so A keeps its own; FLINT's unlocked ``ctx.workprec`` (the
    # control) lets B's setting land inside A's block.
    assert _orchestrated(arb_precision) == [64]
    assert _orchestrated(ctx.workprec) == [512]


def _orchestrated(setter) -> list[int]:
    entered, changed, done, observed = threading.Event(), threading.Event(), threading.Event(), []

    def a() -> None:
        with setter(64):
            entered.set()
            changed.wait(0.3)                                  # B's block, if it can start, starts now
            observed.append(ctx.prec)
            done.set()

    def b() -> None:
        entered.wait(5)
        with setter(512):
            changed.set()
            done.wait(5)                                       # holds its precision until A has looked

    pair = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in pair:
        t.start()
    for t in pair:
        t.join()
    return observed
