"""``mypy --strict`` of a user's module against kfcompile installed as the README installs it
(``pip install -e``: a ``.pth`` naming ``src/`` and ``adapters/``, not setuptools' default import
hook, which mypy cannot follow). The packages ship ``py.typed``, so mypy reads their types: it
passes a correct module and finds a wrong call; a module added to the checkout after the install
is found too."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER = """\
import kfcompile_kube
from kfcompile import JobSpec, Launcher, State, render
from kfcompile.lifecycle import Forbidden, Ref, Session, watch_jobs

spec = JobSpec(name="a", image="b", launcher=Launcher(kind="torchrun", entrypoint="/a.py"))
objects: list[dict[str, object]] = render(spec, "trainjob/v2.3")
ref = Ref("v1", "Pod", "default", "a")


def ended(state: State) -> bool:
    return state in (State.SUCCEEDED, State.FAILED)


def watch(session: Session) -> list[str]:
    try:
        return [event.ref.name for event in watch_jobs(session) if event.state.finished]
    except Forbidden as exc:
        return [str(exc)]


connect = kfcompile_kube.session
"""


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.timeout(300)  # a build and a strict check of kfcompile's whole source: slow
def test_mypy_strict_of_a_user_module_against_an_editable_install(tmp_path: Path) -> None:
    # a copy of the checkout (the install writes its egg-info into it)
    checkout = tmp_path / "kfcompile"
    checkout.mkdir()
    for name in ("src", "adapters"):
        shutil.copytree(
            ROOT / name, checkout / name, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
        )
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, checkout / name)
    env = tmp_path / "env"
    made = run(sys.executable, "-m", "venv", "--without-pip", str(env), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    python = env / "bin" / "python"
    installed = run(
        sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
        "-e", str(checkout), cwd=tmp_path,
    )  # fmt: skip
    if installed.returncode != 0 and "No matching distribution" in installed.stderr:
        pytest.skip("cannot build kfcompile here: the package index is out of reach")
    assert installed.returncode == 0, installed.stderr
    # its dependencies (attrs, cattrs, kubernetes...) from this environment
    site = Path(run(str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                    cwd=tmp_path).stdout.strip())  # fmt: skip
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")

    user = tmp_path / "service.py"
    user.write_text(USER, encoding="utf-8")
    mypy = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
            "--python-executable", str(python), str(user)]  # fmt: skip
    checked = run(*mypy, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    user.write_text(USER + "render(spec, 3)\n", encoding="utf-8")
    wrong = run(*mypy, cwd=tmp_path)
    assert wrong.returncode == 1
    assert 'Argument 2 to "render" has incompatible type "int"' in wrong.stdout
    # a module added since the install: found by Python and by mypy, no reinstall
    (checkout / "src" / "kfcompile" / "added_later.py").write_text("ANSWER: int = 42\n")
    user.write_text("from kfcompile.added_later import ANSWER\n\nX: int = ANSWER\n")
    assert run(*mypy, cwd=tmp_path).returncode == 0
    imported = run(str(python), "-c", "import kfcompile.added_later as m; print(m.ANSWER)",
                   cwd=tmp_path)  # fmt: skip
    assert imported.stdout.strip() == "42", imported.stderr
