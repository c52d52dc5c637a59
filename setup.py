"""What pyproject.toml cannot say.

The order of the TorchX entry points: torchx 0.7 takes ``torchx run``'s default scheduler from
the first entry point of the ``torchx.schedulers`` group, and setuptools writes every group
sorted by name, which made ``aws_batch`` the default once kfcompile was installed. This writes
each group back in pyproject.toml's order, so torchx's own default (``local_docker``) stays
first.

An editable install as a plain ``.pth`` naming ``src/`` and ``adapters/``: for a layout of two
roots setuptools' default editable install is an import hook, which mypy cannot follow (a
user's ``mypy --strict`` then reports ``Cannot find implementation or library stub`` for
kfcompile), and its strict mode links files, missing a module added later.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.editable_wheel import editable_wheel
from setuptools.command.egg_info import egg_info

PYPROJECT = Path(__file__).with_name("pyproject.toml")


def declared_order() -> dict[str, list[str]]:
    """Each entry-point group's names, as pyproject.toml lists them."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    groups = {"console_scripts": list(project.get("scripts", {}))}
    groups.update({group: list(eps) for group, eps in project.get("entry-points", {}).items()})
    return groups


def reordered(text: str, order: dict[str, list[str]]) -> str:
    """``entry_points.txt`` with each group's lines in ``order`` (names it lacks go last)."""
    sections = re.split(r"^(?=\[)", text, flags=re.MULTILINE)
    out = []
    for section in filter(None, sections):
        header, _, body = section.partition("\n")
        names = order.get(header.strip("[] "), [])
        lines = [line for line in body.splitlines() if line.strip()]
        rank = {name: i for i, name in enumerate(names)}
        lines.sort(key=lambda line: rank.get(line.split("=", 1)[0].strip(), len(rank)))
        out.append("\n".join([header, *lines]) + "\n")
    return "\n".join(out)


class OrderedEntryPoints(egg_info):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        written = Path(self.egg_info, "entry_points.txt")
        if written.exists():
            text = written.read_text(encoding="utf-8")
            written.write_text(reordered(text, declared_order()), encoding="utf-8")


class PathEntries:
    """An editable install's strategy (setuptools' ``EditableStrategy``): a ``.pth`` file with
    the package roots, which every tool reads as Python does."""

    def __init__(self, name: str, roots: list[Path]) -> None:
        self.name, self.roots = name, roots

    def __call__(self, wheel: Any, files: list[str], mapping: dict[str, str]) -> None:
        lines = "".join(f"{root}\n" for root in self.roots)
        wheel.writestr(f"__editable__.{self.name}.pth", lines.encode())

    def __enter__(self) -> PathEntries:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class PathEditable(editable_wheel):  # type: ignore[misc]
    def _select_strategy(self, name: str, tag: str, build_lib: Any) -> Any:
        if self.mode == "strict":  # asked for: the links it makes
            return super()._select_strategy(name, tag, build_lib)
        config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]
        roots = config["packages"]["find"]["where"]
        return PathEntries(name, [Path(self.project_dir, root).resolve() for root in roots])


setup(cmdclass={"egg_info": OrderedEntryPoints, "editable_wheel": PathEditable})
