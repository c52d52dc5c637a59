"""What pyproject.toml cannot say: the order of the TorchX entry points.

torchx 0.7 takes ``torchx run``'s default scheduler from the first entry point of the
``torchx.schedulers`` group, and setuptools writes every group sorted by name, which made
``aws_batch`` the default once kfcompile was installed. This writes each group back in
pyproject.toml's order, so torchx's own default (``local_docker``) stays first.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from setuptools import setup
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


setup(cmdclass={"egg_info": OrderedEntryPoints})
