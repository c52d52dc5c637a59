"""The README and the documentation: what code generates there is current, and every code block
in them runs and prints what it shows (``docblocks`` says how each kind of block is run).

The README's quick start runs verbatim: each command through a shell, the installed
``kfcompile`` on the PATH, its cluster part against the tests' local API server.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema
import pytest
import schema_check
import yaml
from docblocks import (
    LANGUAGES,
    PAGES,
    ROOT,
    Block,
    blocks,
    commands,
    kfcompile_argv,
    matches,
    needs_cluster,
    sh_lines,
)

from kfcompile import load_spec
from kfcompile.cli import main
from kfcompile.spec import yamlio
from kfcompile.spec.json_schema import json_schema
from kfcompile.spec.model import JobSpec
from kfcompile.targets.reference import field_slots

sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import diagrams
import generated

if TYPE_CHECKING:
    from fakekube.cluster import PortCluster

README = (ROOT / "README.md").read_text(encoding="utf-8")
SCHEMA_FILE = ROOT / "schemas" / "jobspec.schema.json"
CONTRIBUTING = ROOT / "docs" / "contributing.md"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
BIN = Path(sys.executable).parent  # where the installed `kfcompile` is

# --- what code generates --------------------------------------------------------------------------

MARKER = re.compile(
    r"<!-- generated:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /generated:(?P=name) -->", re.S
)
SECTIONS = [
    (page, m["name"]) for page in PAGES for m in MARKER.finditer(page.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize(
    ("page", "name"), SECTIONS, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n in SECTIONS]
)
def test_generated_section_is_current(
    page: Path, name: str, request: pytest.FixtureRequest
) -> None:
    """Regenerate with `pytest tests/test_docs.py --update-golden` and review the diff."""
    wanted = generated.GENERATED[name]()
    text = page.read_text(encoding="utf-8")
    if request.config.getoption("--update-golden"):
        start, end = f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"
        head, rest = text.split(start, 1)
        page.write_text(head + start + wanted + end + rest.split(end, 1)[1], encoding="utf-8")
        return
    found = {m["name"]: m["body"] for m in MARKER.finditer(text)}
    assert found[name] == wanted, "stale: run pytest tests/test_docs.py --update-golden"


def test_every_generated_section_is_shown_somewhere() -> None:
    assert {name for _, name in SECTIONS} == set(generated.GENERATED)


def test_the_field_reference_covers_every_field() -> None:
    import attrs

    slots = field_slots()
    assert set(slots) == {a.name for a in attrs.fields(JobSpec)}
    # gpu_resource only names the GPU key; every other field feeds at least one slot
    assert [f for f, s in slots.items() if not s] == ["gpu_resource"]
    reference = generated.GENERATED["spec"]()
    for name in slots:
        assert f"| `{name}` |" in reference


def test_the_state_diagram_says_what_job_state_decides() -> None:
    """Every arrow of the state diagram, checked against ``job_state`` on job objects made from
    the same tables; every state is in it."""
    from kfcompile.kinds import State
    from kfcompile.status import job_state

    moves = generated.moves()
    assert {m.dst for m in moves} | {m.src for m in moves} >= {s.name for s in State}
    for move in moves:
        for job, pods in move.examples:
            assert job_state(job, pods).state.name == move.dst, (move.src, move.dst, job, pods)
    assert all(m.examples for m in moves if m.dst != "end")


def test_schema_file_is_current(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--update-golden"):
        SCHEMA_FILE.write_text(json.dumps(json_schema(), indent=2) + "\n", encoding="utf-8")
    on_disk = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert on_disk == json_schema(), "stale: run pytest tests/test_docs.py --update-golden"


@pytest.mark.parametrize(
    "example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.stem
)
def test_examples_match_schema(example: Path) -> None:
    jsonschema.validate(yamlio.parse(example.read_text(encoding="utf-8")), json_schema())


def test_schema_rejects_unknown_fields() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "a", "image": "b", "replicas": 2}, json_schema())


# --- the README's front ---------------------------------------------------------------------------


def test_readme_starts_with_the_two_setup_commands_ci_runs() -> None:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block and README.index(block.group(0)) < README.index("##")
    assert README.startswith("# kfcompile\n\n" + block.group(0))
    commands_ = block.group(1).strip().splitlines()
    assert len(commands_) == 2
    # Each works where pip installs nothing outside a virtual environment (PEP 668: Debian's and
    # Ubuntu's Python): it makes one and runs every later step from it.
    for command in commands_:
        first, *rest = command.split(" && ")
        assert first == "python3 -m venv .venv" and rest, command
        assert all(step.startswith(".venv/bin/") for step in rest), command
    assert "kfcompile render examples/*.yaml --target all --out" in commands_[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands_[1] in ci  # the test command, verbatim, a line of its own
    # ... on a clone with no environment yet, as a new user's
    before = [line for line in ci[: ci.index(commands_[1])] if not line.startswith("#")]
    assert not [line for line in before if re.search(r"\b(venv|pip)\b", line)]


def test_readme_is_a_front_door() -> None:
    """Short; links into the docs; a picture of one spec to every target; no figure that
    depends on the machine (those are in bench/ and docs/performance.md)."""
    lines = README.splitlines()
    assert len(lines) <= 250
    assert "```mermaid" in README
    for target in ("docs/getting-started.md", "docs/specs/index.md", "docs/targets.md"):
        assert f"]({target})" in README
    assert not re.search(r"\d+(\.\d+)? ?(ms|s)\b.*(median|measured)", README)
    assert not re.search(r"\b\d[\d,]* tests\b", README)


def test_every_readme_link_to_a_file_resolves() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)}: {target}"


def test_a_list_items_later_paragraphs_are_indented_four_spaces() -> None:
    """Python-Markdown (the site) reads a paragraph after a blank line in a list item as the
    item's only when indented four spaces: at two it ends the list, and the next items become
    text of that paragraph ('... See Job states. - suspend: true creates ...')."""
    found = []
    for page in (p for p in PAGES if "docs" in p.parts):
        lines, fenced = page.read_text(encoding="utf-8").split("\n"), False
        for i, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif (
                not fenced and i and not lines[i - 1].strip() and re.match(r" {2}[^\s\-*|<]", line)
            ):
                found.append(f"{page.relative_to(ROOT)}:{i + 1}: {line.strip()[:40]}")
    assert found == []


def test_without_the_reference_crds_the_skips_are_one_line_saying_where_to_get_them(
    tmp_path: Path,
) -> None:
    """Not a line per test location (pytest's -ra gave about 100, all one reason)."""
    env = {k: v for k, v in os.environ.items() if k != "KFCOMPILE_REQUIRE_SHARED"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cli.py",
         "-k", "crd or minimal"],
        cwd=ROOT, env={**env, "KFCOMPILE_SHARED": str(tmp_path)}, capture_output=True,
        text=True, timeout=50, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    [summary] = [line for line in lines if "skipped: " in line]
    assert re.fullmatch(r"\d+ skipped: \.\./shared/crds not found: .*KFCOMPILE_SHARED\)", summary)
    assert '"The reference CRDs"' in summary and "docs/contributing.md" in summary
    assert "## The reference CRDs" in CONTRIBUTING.read_text(encoding="utf-8")
    assert not [line for line in lines if line.startswith("SKIPPED")]


# --- every code block runs ------------------------------------------------------------------------

ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


def test_every_block_is_of_a_kind_the_tests_run() -> None:
    assert [b.where for b in ALL_BLOCKS if b.lang not in LANGUAGES] == []
    assert len(ALL_BLOCKS) > 50  # the parser found them


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.lang == "mermaid"], ids=lambda b: b.where
)
def test_every_diagram_draws(block: Block) -> None:
    drawn = diagrams.svg(block.text)
    assert drawn.startswith("<svg") and drawn.count("<text") >= 2


class Page:
    """Runs one page's blocks in order, in a directory of its own."""

    def __init__(self, page: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.page, self.dir, self.monkeypatch = page, tmp, monkeypatch
        self.verbatim = page == ROOT / "README.md"  # through a shell, the installed command
        self.cluster: Path | None = None  # the local API server's kubeconfig, once started
        self.stack = contextlib.ExitStack()
        self.skipped: list[str] = []
        self.status = 0  # the last command's exit status, what `$ echo $?` prints
        (tmp / "examples").symlink_to(ROOT / "examples")
        # Until a block needs the cluster, no command may find one.
        self.env = {**os.environ, "KUBECONFIG": str(tmp / "no-cluster"), "PYTHONUNBUFFERED": "1"}
        self.env["PATH"] = f"{BIN}{os.pathsep}{self.env['PATH']}"
        monkeypatch.chdir(tmp)
        monkeypatch.setenv("KUBECONFIG", self.env["KUBECONFIG"])

    def connect(self, where: str) -> bool:
        """Start the local API server for the rest of the page; False when it cannot be."""
        if self.cluster is None:
            if schema_check.SHARED is None and not os.environ.get("KFCOMPILE_REQUIRE_SHARED"):
                self.skipped.append(f"{where}: needs ../shared/crds for the local cluster")
                return False
            from fakekube.cluster import LocalCluster

            local = self.stack.enter_context(LocalCluster(schema_check.require_shared()))
            self.cluster = local.kubeconfig
            self.env["KUBECONFIG"] = str(local.kubeconfig)
            self.monkeypatch.setenv("KUBECONFIG", str(local.kubeconfig))
        return True

    def run(self) -> None:
        with self.stack:
            for block in blocks(self.page):
                getattr(self, f"_{block.lang or 'text'}")(block)
        if self.skipped:
            pytest.skip("; ".join(self.skipped))

    def _text(self, block: Block) -> None:
        pass  # output and illustrations

    _mermaid = _text  # test_every_diagram_draws

    def _yaml(self, block: Block) -> None:
        data = yaml.safe_load(block.text)
        if block.title:
            (self.dir / block.title).write_text(block.text, encoding="utf-8")
        elif isinstance(data, dict) and {"name", "image"} <= data.keys() and "kind" not in data:
            load_spec(block.text)  # a spec shown whole must load

    def _console(self, block: Block) -> None:
        steps = commands(block)
        for i, (command, shown) in enumerate(steps):
            if command == "echo $?":  # the exit status of the command before, as a shell says it
                printed: str | None = f"{self.status}\n"
            elif needs_cluster(command) and not self.connect(block.where):
                continue
            elif self.verbatim:
                printed = self.shell(command, block)
            else:
                printed = self.command(command)
            if printed is None:
                continue  # skipped: said at the end
            assert matches(shown, printed), (
                f"{block.where}: $ {command}\n--- shown:\n{shown}--- printed:\n{printed}"
            )
            # Output shown as `...` alone says nothing of how the command ended: it succeeded,
            # or the block says it did not (`$ echo $?` next).
            said = i + 1 < len(steps) and steps[i + 1][0] == "echo $?"
            if not said and not shown.replace("...", "").strip():
                assert self.status == 0, (
                    f"{block.where}: $ {command}: exit {self.status}\n{printed}"
                )

    def command(self, command: str) -> str | None:
        argv = kfcompile_argv(command)
        if argv is None:
            return self.shell(command, None)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                self.status = main(argv)
            except SystemExit as exc:  # argparse's usage errors (and --help) exit
                self.status = exc.code if isinstance(exc.code, int) else 1
        return out.getvalue()

    def shell(self, command: str, block: Block | None) -> str | None:
        """What the command prints, both streams in order as on a terminal (unbuffered)."""
        if command.startswith("torchx ") and not _importable("torchx"):
            self.skipped.append(f"{command}: torchx is not installed")
            return None
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.dir, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=120, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if block is not None and block.lang == "sh":
            assert done.returncode == 0, f"{block.where}: {command}\n{done.stdout}"
        self.status = done.returncode
        return done.stdout

    def _sh(self, block: Block) -> None:
        for command in sh_lines(block):
            if _setup(command):
                continue
            if needs_cluster(command) and not self.connect(block.where):
                continue
            self.shell(command, block)

    def _python(self, block: Block) -> None:
        for module in ("nemo_run", "torchx"):
            if re.search(rf"^\s*(import|from) {module}\b", block.text, re.M) and not _importable(
                module
            ):
                self.skipped.append(f"{block.where}: {module} is not installed")
                return
        if "kfcompile_kube" in block.text and not self.connect(block.where):
            return
        # run as a script is, from its file; a test module (its title ``test_*.py``) by pytest
        test = block.title.startswith("test_")
        script = self.dir / (block.title if test else f"block_{block.line}.py")
        script.write_text(block.text, encoding="utf-8")
        run = [sys.executable, *(["-m", "pytest", "-q", "-p", "no:cacheprovider"] * test)]
        done = subprocess.run(
            [*run, str(script)], cwd=self.dir, env=self.env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{block.where}:\n{done.stdout}{done.stderr}"


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _setup(command: str) -> bool:
    """Installing kfcompile or building the site: CI runs these (`.ci/run`); here each is
    checked to name what exists (the extras in pyproject.toml)."""
    setup = (
        "python3 -m venv .venv",
        ".venv/bin/pip install",
        "pip install",
        ". .venv/bin/activate",
        "mkdocs build --strict",
    )
    if not command.startswith(setup):
        return False
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    for named in re.findall(r'"\.\[([\w,]+)\]"', command):
        assert set(named.split(",")) <= extras, command
    return True


RUN = [p for p in PAGES if any(b.lang in ("console", "sh", "python", "yaml") for b in blocks(p))]


@pytest.mark.parametrize("page", RUN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_of_the_page_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's quick start too: verbatim, its cluster part against the local cluster."""
    Page(page, tmp_path, monkeypatch).run()


def test_the_quick_start_is_in_the_getting_started_page_and_shows_each_step() -> None:
    quick = README.split("<!-- --8<-- [start:quickstart] -->")[1].split("[end:quickstart]")[0]
    shown = [c for b in blocks(ROOT / "README.md") if b.lang == "console" for c, _ in commands(b)]
    for step in ("render", "validate", "submit", "status", "logs", "cancel"):
        assert any(c.startswith(f"kfcompile {step} ") for c in shown), step
        assert f"$ kfcompile {step} " in quick
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert '--8<-- "README.md:quickstart"' in page


# --- output shown as text: checked below, or marked an illustration -------------------------------

# A line of kfcompile's: a command of a transcript, what kfcompile says (`kfcompile: ...`,
# `kfcompile logs: error: ...`), a spec's problem (`FILE: FIELD: problem`), a job's state line.
OUTPUT_LINE = re.compile(
    r"\$ kfcompile |kfcompile( \w+)?: |\S+\.(ya?ml|json)( \(\S+\))?: |(TrainJob|PyTorchJob) \S+ in "
    r"namespace "
)


def marked_illustration(block: Block) -> bool:
    """Whether the line before the block (blank lines aside) is ``<!-- illustration: WHY -->``:
    output no test can make a page print (a terminal's redrawn line, a feature gate), shown as
    such."""
    before = block.page.read_text(encoding="utf-8").splitlines()[: block.line - 1]
    said = [line.strip() for line in before if line.strip()]
    return bool(said) and said[-1].startswith("<!-- illustration: ")


def shows_output(block: Block) -> bool:
    return block.lang in ("text", "") and any(
        OUTPUT_LINE.match(line) for line in block.text.splitlines()
    )


OUTPUT_SAMPLES = [b for b in ALL_BLOCKS if shows_output(b) and not marked_illustration(b)]

# What a page cannot cause (a network that is down, a hostile server, a job Kueue holds, a
# cluster's Kueue release): a sample line of it is what the CLI prints in that situation, made
# here by the suite's servers that are not there (``fakekube.unreachable``), fake clusters and
# faults. Each returns what the CLI printed and the URL of the server it was given, which stands
# for the pages' API server.
PAGE_SERVER = "https://10.0.0.1:6443"


def _printed(*argv: str, code: int = 1) -> str:
    """What the command printed, ending with ``code`` (1: the trouble ends the command)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        assert main(list(argv)) == code
    return out.getvalue()


def _status(kubeconfig: Path, *extra: str) -> str:
    return _printed("status", "demo", "-n", "team-a", "--kubeconfig", str(kubeconfig), *extra)


def _refused(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    from fakekube.unreachable import closed_port, kubeconfig

    url = f"https://127.0.0.1:{closed_port()}"
    return _status(kubeconfig(tmp / "kc", url)), url


def _silent(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    from fakekube.unreachable import Silent, kubeconfig

    from kfcompile.cli.parser import build

    # The page shows the default --request-timeout, 30s, which is not waited for here.
    assert build().parse_args(["status", "demo"]).request_timeout == 30.0
    with Silent() as server:
        printed = _status(kubeconfig(tmp / "kc", server.url), "--request-timeout", "0.3")
    return printed.replace(" within 0.3s", " within 30s"), server.url


def _untrusted(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    from fakekube.unreachable import UntrustedTLS, kubeconfig

    with UntrustedTLS() as server:
        return _status(kubeconfig(tmp / "kc", server.url)), server.url


def _forbidden(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """alice's Role lets her create jobs in team-a, not Secrets (the API server's words)."""
    from fakekube.cluster import PortCluster

    with PortCluster(schema_check.require_shared()) as local:
        local.store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        )
        local.wire(monkeypatch)
        said = 'User "alice" cannot create resource "secrets" in API group ""'
        refused = f'secrets is forbidden: {said} in the namespace "team-a"'
        local.faults.add("create", "Secret", status=403, message=refused)
        spec = tmp / "job.yaml"
        spec.write_text("name: demo\nimage: python:3.12-slim\nsecret_env: [HF_TOKEN]\n")
        monkeypatch.setenv("HF_TOKEN", "hf_never_shown")
        return _printed("submit", str(spec), "-n", "team-a"), PAGE_SERVER


def _not_json(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """An auth proxy's login page, 2048 bytes, where the job should be."""
    from fakekube import Body
    from fakekube.cluster import LocalCluster

    page = b"<html><body>" + b"x" * (2048 - 26) + b"</body></html>"
    with LocalCluster(schema_check.require_shared(), scenario=None) as local:
        answer = Body(page, "text/html")
        local.kube.faults.add(
            "GET", "/namespaces/team-a/trainjobs/demo", answer=answer, watch=False
        )
        return _status(local.kubeconfig), local.kube.url


KUEUE_PAGE = ROOT / "docs" / "specs" / "kueue.md"


@contextlib.contextmanager
def _kueue_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[PortCluster]:
    """A cluster of Kueue v0.15 to v0.19 (serving ``kueue.x-k8s.io`` v1beta2 and v1beta1; its
    Workload CRD v0.19's) with the namespace and LocalQueue of the Kueue page's job, the CLI
    wired to it."""
    from fakekube.cluster import PortCluster

    from kfcompile.testing import kueue as fake_kueue

    with PortCluster(schema_check.require_shared(), kueue="both") as local:
        local.store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        )
        queue = {
            "apiVersion": fake_kueue.api(local.store, "LocalQueue"),
            "kind": "LocalQueue",
            "metadata": {"name": "team-a-gpus", "namespace": "team-a"},
            "spec": {"clusterQueue": fake_kueue.CLUSTER_QUEUE},
        }
        local.store.create(queue)
        local.wire(monkeypatch)
        yield local


def _kueue_spec(tmp: Path, **more: object) -> Path:
    """The Kueue page's ``queued.yaml`` (with ``more`` fields), written in ``tmp``."""
    [page] = [b.text for b in blocks(KUEUE_PAGE) if b.title == "queued.yaml"]
    path = tmp / "queued.yaml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(page), **more}), encoding="utf-8")
    return path


def _held(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The page's job, submitted: Kueue holds it, its Workload saying what the real Kueue
    v0.19.2 said of a job asking for more GPUs than its ClusterQueue has."""
    from test_kueue_reasons import NO_GPUS
    from test_lifecycle import TRAINJOB

    from kfcompile.testing import courses
    from kfcompile.testing import kueue as fake_kueue

    with _kueue_cluster(monkeypatch) as local:
        never = math.inf  # Kueue never admits it
        local.store.on_create.append(courses.queued(local.fake, admits=never))
        _printed("submit", str(_kueue_spec(tmp)), code=0)
        job = local.store.get(TRAINJOB, "TrainJob", "team-a", "finetune-queued")
        assert job is not None
        fake_kueue.held(local.store, job, NO_GPUS)
        return _printed("status", "finetune-queued", "-n", "team-a", code=0), PAGE_SERVER


def _crd_unreadable(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The page's job with a pod annotation (a TrainJob's runtimePatches, Trainer v2.2 on),
    where alice may not read the Workload CRD: the API server's refusal is the page's ``...``."""
    said = (
        'customresourcedefinitions.apiextensions.k8s.io "workloads.kueue.x-k8s.io" is '
        'forbidden: User "alice" cannot get resource "customresourcedefinitions" in API group '
        '"apiextensions.k8s.io" at the cluster scope'
    )
    with _kueue_cluster(monkeypatch) as local:
        local.faults.add("get", "CustomResourceDefinition", status=403, message=said)
        spec = _kueue_spec(tmp, pod_annotations={"example.com/team": "a"})
        printed = _printed("submit", str(spec))
    # (each field refused says it: the page's job also has activeDeadlineSeconds)
    assert f"403 Forbidden: {said})" in printed
    return printed.replace(f"403 Forbidden: {said})", "403 Forbidden: ...)"), PAGE_SERVER


def _crd_told(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The page's job with a patch's terminationGracePeriodSeconds, where the Workload CRD
    (v0.19's: v1beta2 ``spec.preemptionGates``) tells Kueue v0.17 to v0.19."""
    from kfcompile.testing import kueue as fake_kueue

    with _kueue_cluster(monkeypatch) as local:
        # (the fake's Workload CRD already: put here as what tells the release)
        local.store.put(fake_kueue.workload_crd(("v1beta2", "v1beta1"), 19))
        spec = _kueue_spec(tmp, termination_grace_period_seconds=60)
        return _printed("submit", str(spec)), PAGE_SERVER


SITUATIONS = {  # a phrase of the sample line: the situation that prints it
    "connection refused by": _refused,
    "no answer from": _silent,
    "TLS certificate verify failed": _untrusted,
    "create Secret team-a/demo-env: 403 Forbidden": _forbidden,
    "BadAnswer: the answer is not JSON": _not_json,
    "SUSPENDED (Queued) Kueue: waiting in queue": _held,
    "workloads.kueue.x-k8s.io could not be read: 403 Forbidden": _crd_unreadable,
    "its Workload CRD has v1beta2 spec.preemptionGates": _crd_told,
}


def situation(line: str) -> str | None:
    found = [phrase for phrase in SITUATIONS if phrase in line]
    assert len(found) <= 1, line
    return found[0] if found else None


SAMPLE_LINES = [
    (block, line) for block in OUTPUT_SAMPLES for line in block.text.splitlines() if line.strip()
]


def test_no_text_block_shows_output_nothing_checks() -> None:
    """Output a page can make kfcompile print is a console block; trouble it cannot cause is a
    situation here; anything else is marked an illustration."""
    unchecked = [f"{b.where}: {line}" for b, line in SAMPLE_LINES if situation(line) is None]
    assert unchecked == [], "a console block, a SITUATION, or <!-- illustration: WHY -->"


@pytest.mark.parametrize(
    ("block", "line"),
    [(b, line) for b, line in SAMPLE_LINES if situation(line)],
    ids=[f"{b.where}:{situation(line)}" for b, line in SAMPLE_LINES if situation(line)],
)
def test_trouble_a_page_shows_is_what_the_cli_prints(
    block: Block, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    phrase = situation(line)
    assert phrase is not None
    printed, server = SITUATIONS[phrase](tmp_path, monkeypatch)
    assert line in printed.replace(server, PAGE_SERVER).splitlines(), printed
