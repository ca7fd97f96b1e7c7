"""The recorded runs: each NAME is a list of commands with their flags, as data (``registry.json``).

A step is one command of the float tier, run into ``OUT/<out>``:

- ``panel``: ``python -m numeric panel ARGS --out OUT/<out>`` (resumable; ``--workers`` and ``--scheduler``
  are the replicate command's own, passed through: neither changes a bracket);
- ``study``: ``python -m numeric study OUT/<panel> ... ARGS --out OUT/<out>``;
- ``arms``: ``python -m numeric.panel.arms ARGS --out OUT/<out>`` (one panel directory per arm, named in
  ``panels``; local workers only).

Two NAMEs that share a step's ``out`` share its directory: a panel run for one is resumed, not rerun,
by the other when both use one OUT.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from exact.errors import UserInputError

__all__ = ["RegistryError", "Step", "Replicate", "load_registry", "REGISTRY", "KINDS"]

REGISTRY = Path(__file__).with_name("registry.json")
KINDS = ("panel", "study", "arms")
#: A run name, a step's output folder and a cell key: letters, digits and ``._-`` (no path separator but
#: the single ``/`` of an arm's panel folder).
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
OUT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(/[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$")
#: Flags a step may not carry: the replicate command sets them.
RESERVED = ("--out", "--workers", "--scheduler")


class RegistryError(UserInputError):
    """The registry is malformed (a one-line message)."""


@dataclass(frozen=True)
class Step:
    """One command of a recorded run."""

    kind: str
    out: str
    args: tuple[str, ...]
    panels: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.kind} {self.out}"


@dataclass(frozen=True)
class Replicate:
    """A recorded run: its steps, what it is, the docs that cite it and its test slice (cell keys)."""

    name: str
    about: str
    cited: tuple[str, ...]
    steps: tuple[Step, ...]
    slice: tuple[str, ...] = ()

    @property
    def panel_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind == "panel")

    @property
    def panel_dirs(self) -> tuple[str, ...]:
        """Every panel directory of the run (an arms step's arm folders included), in order."""
        out: list[str] = []
        for s in self.steps:
            out += [s.out] if s.kind == "panel" else list(s.panels) if s.kind == "arms" else []
        return tuple(out)

    @property
    def study_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind == "study")


def _strings(value, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RegistryError(f"{what} is not a list of strings")
    return tuple(value)


def _step(doc, name: str, earlier: set) -> Step:
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        raise RegistryError(f"{name}: a step is not an object of kind {', '.join(KINDS)}")
    out = doc.get("out")
    if not isinstance(out, str) or not OUT.match(out):
        raise RegistryError(f"{name}: a step's out is not a folder name")
    args = _strings(doc.get("args", []), f"{name} {out}: args")
    if any(a.split("=")[0] in RESERVED for a in args):
        raise RegistryError(f"{name} {out}: args carry one of {', '.join(RESERVED)} (the replicate command sets them)")
    panels = _strings(doc.get("panels", []), f"{name} {out}: panels")
    if any(not OUT.match(p) for p in panels):
        raise RegistryError(f"{name} {out}: a panel is not a folder name")
    if doc["kind"] == "study" and (not panels or any(p not in earlier for p in panels)):
        raise RegistryError(f"{name} {out}: a study reads panels of earlier steps only")
    return Step(doc["kind"], out, args, panels)


def _replicate(name: str, doc) -> Replicate:
    if not NAME.match(name) or not isinstance(doc, dict):
        raise RegistryError(f"{name[:40]!a}: not a run name with an object")
    if not isinstance(doc.get("about"), str) or not isinstance(doc.get("steps"), list) or not doc["steps"]:
        raise RegistryError(f"{name}: needs about and steps")
    steps: list[Step] = []
    earlier: set = set()
    for s in doc["steps"]:
        step = _step(s, name, earlier)
        if step.out in {x.out for x in steps}:
            raise RegistryError(f"{name}: two steps write {step.out}")
        steps.append(step)
        earlier |= {step.out} if step.kind == "panel" else set(step.panels)
    cut = _strings(doc.get("slice", []), f"{name}: slice")
    return Replicate(name, doc["about"], _strings(doc.get("cited", []), f"{name}: cited"), tuple(steps), cut)


def load_registry(path: Path | None = None) -> dict[str, Replicate]:
    """The recorded runs by name (``registry.json`` beside this module unless ``path``)."""
    path = path or REGISTRY
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RegistryError(f"{path.name}: unreadable ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != 1 or not isinstance(doc.get("runs"), dict):
        raise RegistryError(f"{path.name}: not a replicate registry of format 1")
    return {name: _replicate(name, d) for name, d in doc["runs"].items()}
