"""The parts of the documentation that code writes: each a function returning the text between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` in README.md and the pages under
``docs/``. ``tests/test_docs.py`` fails when one is stale; ``pytest tests/test_docs.py
--update-golden`` rewrites them. Nothing here is kept by hand that a table in the code holds.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import inspect
import io
import itertools
import os
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from kfcompile import kinds, status
from kfcompile.kinds import KINDS, State
from kfcompile.targets import TARGETS
from kfcompile.targets import reference as field_reference


def member_docs(cls: type[enum.Enum]) -> dict[str, str]:
    """Each member's docstring: the string right below it in the class's source (where
    mkdocstrings finds it too); "" for a member without one."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found = {m.name: "" for m in cls}
    for statement, after in itertools.pairwise(body):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id in found:
                    found[target.id] = inspect.cleandoc(after.value.value)
    return found


def _joined(lines: list[str]) -> str:
    return "<br>".join(lines)


def _cell(text: str) -> str:
    """Text as one cell of a markdown table: one line, ``|`` escaped, ``code`` as code."""
    return " ".join(text.split()).replace("|", "\\|").replace("``", "`")


# --- targets ------------------------------------------------------------------------------------


def _pod_field(name: str) -> str:
    """The field of a target's job that holds the pod fields a spec sets (``volumes``...)."""
    slot = TARGETS[name].layout.get("pod.volumes")
    assert slot is not None and slot.paths, name
    return ".".join(part.split("[")[0] for part in slot.paths[0].split(".")[:2])


def targets_table() -> str:
    """The registry: each target's kind, API version, releases and where pod fields go."""
    lines = [
        "| target | kind | API version | releases | pod fields in |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{t.name}` | {t.kind} | `{t.api_version}` | {t.releases} | `{_pod_field(t.name)}` |"
        for t in TARGETS.values()
    ]
    return "\n".join(lines) + "\n"


def targets_diagram() -> str:
    """One spec, from wherever it comes, to every registered target."""
    lines = [
        "```mermaid",
        "flowchart LR",
        "    yaml[job.yaml] --> spec([JobSpec])",
        "    python[Python code] --> spec",
        "    torchx[TorchX AppDef] --> spec",
        "    nemo[NeMo-Run executor] --> spec",
        "    manifests[existing manifests] -->|import| spec",
    ]
    for i, t in enumerate(TARGETS.values()):
        lines.append(f'    spec --> t{i}["{t.name}<br>{t.kind}<br>{t.releases}"]')
    lines += ["```", ""]
    return "\n".join(lines)


# --- the states a job is in -----------------------------------------------------------------------


class Move(NamedTuple):
    """An edge of the state diagram: what moves a job from ``src`` to ``dst`` ("start": a job
    just created; "end": gone), and job objects (with pods) whose state is then ``dst``, which
    the tests hand to ``job_state``."""

    src: str
    dst: str
    label: list[str]
    examples: list[tuple[dict[str, Any], list[dict[str, Any]]]]


def _job(kind: kinds.Kind, status_: Mapping[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"kind": kind.name, "metadata": {"name": "demo", **meta}}
    if status_ is not None:
        job["status"] = dict(status_)
    return job


def _condition(kind: kinds.Kind, type_: str, value: str = "True") -> dict[str, Any]:
    return _job(kind, {"conditions": [{"type": type_, "status": value}]})


def _types(state: State) -> dict[str, list[str]]:
    """Condition type -> the kinds whose condition table maps it to ``state``."""
    found: dict[str, list[str]] = {}
    for kind in KINDS.values():
        for type_, mapped in kind.conditions:
            if mapped is state:
                found.setdefault(type_, []).append(kind.name)
    return found


def _named(types: dict[str, list[str]], value: str = "True") -> list[str]:
    return [f"{t}={value}" for t in types]


def _wrapped(words: list[str], width: int = 30) -> list[str]:
    """``words`` joined by commas, in lines of about ``width`` characters."""
    return textwrap.wrap(", ".join(words), width, break_on_hyphens=False)


def moves() -> list[Move]:
    """What moves a job between the states ``status.job_state`` reports, from its tables: the
    kinds' condition tables, ``STUCK_POD_REASONS``, ``FAILURE_MESSAGES``, ``DELETION_HOLDS``, the
    active counts and the suspend flag of each kind."""
    kinds_ = list(KINDS.values())
    pod_running = {"metadata": {"name": "demo-0"}, "status": {"phase": "Running"}}
    suspended, running = _types(State.SUSPENDED), _types(State.RUNNING)
    succeeded, failed = _types(State.SUCCEEDED), _types(State.FAILED)
    holds = [name for name, _, _ in status.DELETION_HOLDS]
    deleting = {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": holds[:1]}

    def stuck(reason: str) -> dict[str, Any]:
        waiting = {"waiting": {"reason": reason}}
        return {
            "metadata": {"name": "demo-0"},
            "status": {"containerStatuses": [{"state": waiting}]},
        }

    def active(kind: kinds.Kind) -> dict[str, Any]:
        if kind.active_counts == "jobsStatus":
            return _job(kind, {"jobsStatus": [{"name": "node", "active": 1, "ready": 1}]})
        return _job(kind, {"replicaStatuses": {kind.replica_types[-1]: {"active": 1}}})

    def starting(kind: kinds.Kind) -> dict[str, Any]:
        """Not counted as up (TrainJob: its child Job active, not ready; PyTorchJob: no running
        replica): a stuck pod then says why it waits."""
        if kind.active_counts == "jobsStatus":
            return _job(kind, {"jobsStatus": [{"name": "node", "active": 1, "ready": 0}]})
        return _job(kind)

    def flagged(kind: kinds.Kind) -> dict[str, Any]:
        job = _job(kind)
        node = job
        for key in kind.suspend[:-1]:
            node = node.setdefault(key, {})
        node[kind.suspend[-1]] = True
        return job

    def when(
        types: dict[str, list[str]], value: str = "True", pods: list[Any] | None = None
    ) -> list[Any]:
        return [
            (_condition(k, t, value), pods or [])
            for t, ks in types.items()
            for k in kinds_
            if k.name in ks
        ]

    return [
        Move("start", "SUSPENDED", ["created suspended", "(Kueue queues it)"],
             [(flagged(k), []) for k in kinds_]),
        Move("SUSPENDED", "PENDING", [*_named(suspended, "False"), "(admitted, resumed)"],
             when(suspended, "False")),
        Move("start", "PENDING", ["created"], [(_job(k), []) for k in kinds_]),
        Move("PENDING", "SUSPENDED", _named(suspended), when(suspended)),
        Move("PENDING", "RUNNING",
             _wrapped([*(k.active_reason for k in kinds_), "PodsRunning", *_named(running)]),
             [(active(k), []) for k in kinds_] + [(_job(k), [pod_running]) for k in kinds_]
             + when(running)),
        Move("RUNNING", "PENDING",
             ["a pod cannot start:", *_wrapped(list(status.STUCK_POD_REASONS), 44)],
             [(starting(k), [stuck(r)]) for k in kinds_ for r in status.STUCK_POD_REASONS]),
        Move("RUNNING", "SUSPENDED", [*_named(suspended), "(preempted)"],
             when(suspended, pods=[pod_running])),
        Move("RUNNING", "SUCCEEDED", _wrapped(_named(succeeded)), when(succeeded)),
        Move("RUNNING", "FAILED", _named(failed), when(failed)),
        Move("PENDING", "FAILED", [], when(failed, pods=[stuck(status.STUCK_POD_REASONS[0])])),
        Move("RUNNING", "DELETING", ["deleted (cancel):", "held by a finalizer"],
             [(dict(active(k), metadata={"name": "demo", **deleting}), []) for k in kinds_]),
        Move("PENDING", "DELETING", [], [(_job(k, **deleting), []) for k in kinds_]),
        Move("SUSPENDED", "DELETING", [],
             [(dict(flagged(k), metadata={"name": "demo", **deleting}), []) for k in kinds_]),
        Move("DELETING", "end", ["gone"], []),
        Move("SUCCEEDED", "end", [], []),
        Move("FAILED", "end", [], []),
    ]  # fmt: skip


def states_diagram() -> str:
    """The state diagram of ``moves``, as mermaid."""
    lines = ["```mermaid", "stateDiagram-v2"]
    for m in moves():
        src = "[*]" if m.src == "start" else m.src
        dst = "[*]" if m.dst == "end" else m.dst
        lines.append(f"    {src} --> {dst}" + (f": {_joined(m.label)}" if m.label else ""))
    lines += ["```", ""]
    return "\n".join(lines)


def states_table() -> str:
    """Each ``State``: what it means (its member's docstring), whether it is final, and the
    reasons that come with it, from the tables."""
    reasons: dict[State, list[str]] = {s: [] for s in State}
    for kind in KINDS.values():
        for type_, state in kind.conditions:
            reasons[state].append(f"`{type_}` ({kind.name})")
        reasons[State.RUNNING].append(f"`{kind.active_reason}` ({kind.name})")
    reasons[State.RUNNING].append("`PodsRunning`")
    reasons[State.PENDING] += ["`NoStatus`", "`PodsPending`"]
    reasons[State.PENDING] += [f"`{r}`" for r in status.STUCK_POD_REASONS]
    reasons[State.FAILED] += [f"`{r}`" for _, r in status.FAILURE_MESSAGES]
    reasons[State.DELETING] += [
        f"`held by {name}: {waits}`" for name, waits, _ in status.DELETION_HOLDS
    ]
    # What Kueue says of a job it holds (``status.kueue_says``), and what only the Trainer's
    # events say of one that seems to wait (``status.trainer_refused``).
    kueue = ["`Queued`", "Kueue's own (`Inadmissible`, ...)", "`AdmissionCheck<State>`"]
    reasons[State.SUSPENDED] += [*kueue, "`Evicted`", "`Deactivated`"]
    reasons[State.PENDING] += [f"`{r}`" for r in status.TRAINER_REFUSALS]
    docs = member_docs(State)
    lines = ["| state | means | finished | reasons you see |", "|---|---|---|---|"]
    for s in State:
        done = "yes" if s in kinds.FINISHED_STATES else ""
        lines.append(f"| `{s.name}` | {_cell(docs[s.name])} | {done} | {', '.join(reasons[s])} |")
    return "\n".join(lines) + "\n"


def states_rules() -> str:
    """How a state is decided, as ``status.py``'s docstring says it (the code's own words)."""
    doc = status.__doc__ or ""
    rules = doc.split("How a state is decided, for both kinds:\n", 1)[1].split("\n\n")[0]
    return rules.replace("``", "`").strip() + "\n"


def enum_table(cls: type[enum.Enum]) -> str:
    """A table of an enum's members and their docstrings."""
    lines = ["| member | value | means |", "|---|---|---|"]
    docs = member_docs(cls)
    lines += [f"| `{m.name}` | `{m.value}` | {_cell(docs[m.name])} |" for m in cls]
    return "\n".join(lines) + "\n"


def happened_table() -> str:
    """What ``watch_jobs`` reports: ``Happened``'s members."""
    from kfcompile.lifecycle.job_events import Happened

    return enum_table(Happened)


# --- Kueue's releases ----------------------------------------------------------------------------


def _told_apart(low: int, high: int | None) -> list[tuple[int, int | None, str]]:
    """The releases from ``low`` to ``high`` (which discovery tells as one) as the Workload CRD
    tells them apart (``TELLING``): each part, and how kfcompile tells it."""
    from kfcompile.lifecycle.kueue import TELLING

    parts = [(low, high, "the versions served")]
    for version, path, since in TELLING:
        for i, (lo, hi, how) in enumerate(parts):
            if lo < since and (hi is None or since <= hi):
                parts[i : i + 1] = [
                    (lo, since - 1, f"{how}; the Workload CRD: no {version} `{path}`"),
                    (since, hi, f"{how}; the Workload CRD: {version} `{path}`"),
                ]
                break
    return parts


def kueue_table() -> str:
    """Each Kueue release: the versions of its API it serves, the Trainer API its TrainJob
    integration is built against, what it drops from a TrainJob, how kfcompile tells it and what
    ``submit`` then refuses (``lifecycle.kueue``'s ``SERVING``, ``TRAINER_API`` and ``TELLING``,
    and the Trainer releases' marks)."""
    from kfcompile.lifecycle.kueue import SERVING, KueueRelease
    from kfcompile.targets import trainer_releases

    marks = {r.version: r.marks for r in trainer_releases()}

    def fields(found: Iterable[Any]) -> str:
        return ", ".join(f"`{m.label}`" for m in found) or "—"

    lines = [
        "| Kueue | serves `kueue.x-k8s.io` | its TrainJob integration is built against | which "
        "drops from a TrainJob | kfcompile tells it by | `submit` refuses in a queued TrainJob |",
        "|---|---|---|---|---|---|",
    ]
    for served, (low, high) in sorted(SERVING.items(), key=lambda item: item[1][0]):
        versions = ", ".join(f"`{v}`" for v in served)
        for lo, hi, how in _told_apart(low, high):
            told = KueueRelease(lo, hi, "")
            builds = told.builds
            refused = fields({m: None for b in builds for m in b.drops(marks)})
            if builds and builds[0].first[0] > lo:  # releases before the TrainJob integration
                before = KueueRelease(lo, builds[0].first[0] - 1, "")
                lines.append(f"| {str(before).removeprefix('Kueue ')} | {versions} | no "
                             f"TrainJob integration | — | {how} | — |")  # fmt: skip
            for b in builds:
                api = "Trainer v{}.{}'s API".format(*b.api)
                dropped = fields(b.drops(marks))
                lines.append(f"| {b} | {versions} | {api} | {dropped} | {how} | {refused} |")
    return "\n".join(lines) + "\n"


# --- the command line ---------------------------------------------------------------------------


def cli_help() -> str:
    """Every command's ``--help``, as ``kfcompile COMMAND --help`` prints it at 100 columns."""
    from kfcompile.cli import parser

    out = []
    for name in parser.COMMANDS:
        out.append(f"### `kfcompile {name}`\n\n```text\n{_help(name)}```\n")
    return "\n".join(out)


def _help(command: str) -> str:
    from kfcompile.cli import parser

    out = io.StringIO()
    with _columns(100), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        parser.build([command, "--help"]).parse_args([command, "--help"])
    return out.getvalue()


@contextlib.contextmanager
def _columns(n: int) -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


# --- the registry of generated sections ---------------------------------------------------------

GENERATED: dict[str, Callable[[], str]] = {
    "targets": targets_table,
    "targets-diagram": targets_diagram,
    "support": field_reference.support_table,
    "slots": field_reference.slot_table,
    "spec": field_reference.spec_reference,
    "states": states_table,
    "states-diagram": states_diagram,
    "states-rules": states_rules,
    "happened": happened_table,
    "cli": cli_help,
    "kueue-releases": kueue_table,
}
