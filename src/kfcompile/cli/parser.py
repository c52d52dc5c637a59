"""The ``kfcompile`` command line's arguments: every command, its options and help, and the
function that runs it.

``COMMANDS`` has a row per command: its help line, what defines its arguments, and what gives
its function (``_in_compile``, ``_in_manifests``, ``_in_cluster``, ``_in_listing``: the
functions of one module, imported only when one of them runs), so ``render`` loads neither the
importer nor the lifecycle nor the Kubernetes adapter. Only the command being run gets its
arguments (the top-level help lists every command); ``--target``'s choices are the target
registry's names, which import no target.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

Run = Callable[[argparse.Namespace], int]
"""A command's function: its parsed arguments in, its exit status out."""


class _Version(argparse.Action):
    """``--version``: the installed package's version, read only when asked (start-up cost)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib import metadata

        try:
            version = metadata.version("kfcompile")
        except metadata.PackageNotFoundError:  # run from a source tree that is not installed
            version = "(version unknown: not installed)"
        print(f"kfcompile {version}")
        parser.exit()


def _columns() -> int:
    """The terminal's width, as ``shutil.get_terminal_size`` finds it ($COLUMNS, the terminal
    of stdout, else 80), without importing shutil (bz2 and lzma with it)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Help(argparse.RawDescriptionHelpFormatter):
    """The help's layout: argparse's (as wide as the terminal, less 2), the description and the
    examples as written. argparse learns the width from shutil, whose import (bz2, lzma) cost a
    cold render 11 M instructions."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", _columns() - 2)
        super().__init__(prog, **kwargs)


class _Command(argparse.ArgumentParser):
    """A command's parser: an argument it does not take is its own usage error (argparse hands
    unknown arguments up to the top-level parser, which would print the top-level usage)."""

    specs: int | None = None  # how many spec files it takes (None: any number, at least one)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        given = getattr(parsed, "spec", None)
        if given is not None and (not given or (self.specs and len(given) != self.specs)):
            wanted = "one spec file" if self.specs == 1 else "a spec file"
            self.error(f"give {wanted}: SPEC or -f SPEC")
        return parsed, extras


def _namespace(value: str) -> str:
    """``-n`` of a command that renders: a namespace name, checked as the spec's field is."""
    from kfcompile.spec.rules import dns1123_label

    problems = [message for _, message in dns1123_label(value)]
    if problems:
        raise argparse.ArgumentTypeError(f"{value!r}: {'; '.join(problems)}")
    return value


def build(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (default ``sys.argv[1:]``): the command it names, with its
    arguments; every command, with theirs, when it names none (the top-level help lists them,
    a usage error names them)."""
    parser = argparse.ArgumentParser(
        prog="kfcompile",
        description="Compile a training-job spec into Kubeflow custom resources.",
        epilog=course(),
        formatter_class=_Help,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Command
    )
    given = sys.argv[1:] if argv is None else argv
    chosen = next((arg for arg in given if not arg.startswith("-")), None)
    for name in [chosen] if chosen in COMMANDS else COMMANDS:
        help_text, define, _ = COMMANDS[name]
        define(
            sub.add_parser(
                name,
                help=help_text,
                description=help_text,
                epilog=examples(name),
                formatter_class=_Help,
            )
        )
    return parser


def command(args: argparse.Namespace) -> Run:
    """The function that runs the parsed command, its module imported now, and the target it
    names: the start-up (``cli.run``: the collector off) loads all the code a render runs."""
    run = COMMANDS[args.command][2]()[args.command]
    if getattr(args, "target", None) is not None:
        from kfcompile.targets import TARGETS, target

        if args.target in TARGETS:
            target(args.target)
    return run


def examples(command: str) -> str:
    """The ``Examples:`` that end a command's ``--help``, as kubectl's do."""
    return _examples(EXAMPLES[command])


# The top-level help's examples: a job's course, the first example of each of these commands.
COURSE: Final = ("validate", "render", "submit", "status", "logs", "cancel")


def course() -> str:
    """The ``Examples:`` that end ``kfcompile --help``: a job from its spec to its end."""
    said = _examples([EXAMPLES[command][0] for command in COURSE])
    return said + "\nA command's options and more examples: kfcompile COMMAND --help\n"


def _examples(pairs: list[tuple[str, str]]) -> str:
    lines = ["Examples:"]
    for comment, line in pairs:
        lines += [f"  # {comment}", f"  {line}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _target(p: argparse.ArgumentParser, help_text: str, **kwargs: Any) -> None:
    """``-t/--target``: a registered target or a patch release of one (``target_arg``)."""
    from kfcompile.cli.common import target_arg
    from kfcompile.targets import TARGETS

    choices = kwargs.pop("choices", list(TARGETS))
    p.add_argument(
        "-t",
        "--target",
        type=target_arg,
        choices=choices,
        metavar="TARGET",
        help=f"{help_text}; one of: {', '.join(choices)}",
        **kwargs,
    )


SPEC = ("SPEC", "job spec YAML file ('-' = stdin)")


def _specs(
    p: _Command,
    many: bool = True,
    default: str | None = None,
    every: bool = False,
    what: tuple[str, str] = SPEC,
) -> None:
    """The spec files a compile command reads (``what``: the positional's metavar and help),
    and its ``--target``: ``default`` says what it is when not given (None: the default
    target); ``every`` adds ``all``, every target."""
    from kfcompile.targets import DEFAULT_TARGET, TARGETS

    p.specs = None if many else 1
    # Positional, or -f as kubectl takes them (repeatable), in the order given.
    p.add_argument("spec", nargs="*", action="extend", default=[], metavar=what[0], help=what[1])
    p.add_argument(
        "-f",
        "--filename",
        dest="spec",
        action="append",
        metavar="SPEC",
        help="a spec file too, as kubectl's -f (repeatable)",
    )
    p.add_argument(
        "-n",
        "--namespace",
        type=_namespace,
        metavar="NS",
        help="the job's namespace, and its companions' (default: the spec's `namespace`; "
        "where it has none, the output has none: `kubectl apply -n` gives one)",
    )
    _target(
        p,
        f"output shape ({default or f'default {DEFAULT_TARGET}'}; a patch release such as "
        f"{DEFAULT_TARGET}.0 names its line)",
        default=None if default else DEFAULT_TARGET,
        choices=[*TARGETS, "all"] if every else list(TARGETS),
    )


def _render(p: _Command) -> None:
    _specs(p, every=True)
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    p.add_argument("--check", metavar="GOLDEN", help="compare with GOLDEN; exit 1 with a diff")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write DIR/<spec>/<target>.yaml for each spec (or <target>.err: why it cannot), "
        "and print a table of what worked",
    )
    p.add_argument(
        "--with-secrets",
        action="store_true",
        help="include the Secret of secret_env, with values from your environment "
        "(stdout only: not with --out or --check)",
    )


def _validate(p: _Command) -> None:
    _specs(
        p,
        default="default: detected from the cluster with --cluster, else the default target; "
        "all: every target, a verdict each",
        every=True,
    )
    p.add_argument(
        "--crd",
        action="append",
        default=[],
        metavar="FILE",
        help="also validate the output against this CRD file (repeatable)",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        help="also validate the output against the CRDs the cluster serves (reads them; "
        "creates nothing); without --target, for the target the cluster runs",
    )
    _connection(p)


def _explain(p: _Command) -> None:
    what = (
        "FIELD|SPEC",
        "a spec field (launcher, elastic.min_nodes, volumes.persistentVolumeClaim): its type, "
        "default, rules and where it lands on each target; or a spec file ('-' = stdin): where "
        "each of its values lands (a path that exists is a file)",
    )
    _specs(p, many=False, default="default: every target for a FIELD, else the default", what=what)
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def _targets(p: _Command) -> None:
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def _schema(p: _Command) -> None:
    """It takes no arguments."""


def _rbac(p: _Command) -> None:
    p.add_argument("-n", "--namespace", default="default", help="namespace (default: default)")
    _target(p, "only this target's kind")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--service-account", metavar="NAME", help="bind it to this service account")
    who.add_argument("--user", metavar="NAME", help="bind it to this user")
    p.add_argument(
        "--cluster-reads",
        action="store_true",
        help="also the optional reads outside the namespace: a ClusterRole (namespaces, "
        "ClusterTrainingRuntimes, CRDs, list -A) and a Role in kubeflow-system for the "
        "Trainer's version ConfigMap",
    )


# Text, compiled (and cached) by re when a duration is given: a render never compiles it.
DURATION = r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?"


def duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``10m``, ``1h30m``."""
    match = re.fullmatch(DURATION, text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 10m, 1h30m)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def count(text: str) -> int:
    """A whole number >= 0: a rank, or ``--tail``'s lines (the API server refuses a negative
    ``tailLines``: ValidatePodLogOptions in pkg/apis/core/validation/validation.go)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a whole number >= 0: {text!r}")
    return value


REQUEST_TIMEOUT = "30s"  # the CLI's --request-timeout (kubectl's is none at all)


def _connection(p: argparse.ArgumentParser) -> None:
    """How a command reaches the cluster."""
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument(
        "--request-timeout",
        type=duration,
        default=REQUEST_TIMEOUT,
        metavar="DURATION",
        help="how long to wait for the API server to answer each single request before giving "
        f"up, as kubectl's: e.g. 10s, 1m, or seconds (default {REQUEST_TIMEOUT}; 0: no limit); "
        "an answered watch and a followed log stay open longer",
    )


def _command(p: _Command, spec: bool = False) -> None:
    """What every cluster command takes: the connection and the namespace."""
    _connection(p)
    # As Context picks it: only submit has a spec whose namespace can come in between.
    default = "the spec's, then the context's" if spec else "the context's"
    p.add_argument("-n", "--namespace", help=f"namespace (default: {default}, then default)")


def _job(p: _Command, *more: Callable[[_Command], None]) -> None:
    """A cluster command about one job, by name."""
    from kfcompile.kinds import KINDS

    _command(p)
    p.add_argument("name", help="job name")
    p.add_argument("--kind", choices=list(KINDS), help="if both exist")
    for define in more:
        define(p)


def _timeout(p: _Command) -> None:
    p.add_argument("--timeout", type=duration, help="give up after this long (e.g. 30m)")


def _save_logs(p: _Command) -> None:
    p.add_argument("--save-logs", metavar="DIR", help="write every rank's log to DIR")


def _workers(p: _Command) -> None:
    p.add_argument(
        "--cluster",
        action="append",
        metavar="WORKER=CONTEXT",
        help="MultiKueue: the kubeconfig context of a worker cluster a job was dispatched "
        "to (repeatable; with those of this manager context in $KFCOMPILE_CLUSTERS or "
        "~/.config/kfcompile/clusters.yaml); a worker not mapped is never read",
    )


def _sync_image(p: _Command) -> None:
    p.add_argument("--sync-image", default="busybox:1.36", help="image of the sync helper pod")


def _submit(p: _Command) -> None:
    _command(p, spec=True)
    p.add_argument("spec", help="job spec YAML file")
    _target(p, "output shape (default: the one the cluster runs, detected from what it serves)")
    p.add_argument(
        "--dry-run",
        choices=["none", "server"],
        default="none",
        help="server: send every object with dryRun=All, so the cluster's schema, CEL rules "
        "and webhooks check it, and create nothing",
    )
    p.add_argument("--wait", choices=["running", "done"], help="then wait until this")
    p.add_argument("--follow", action="store_true", help="then stream every rank's log")
    p.add_argument(
        "--timeout",
        type=duration,
        help="give up after this long (e.g. 30m): waiting for the job, and for the work dir's "
        "sync helper pod to start (default 5m)",
    )
    _save_logs(p)
    _sync_image(p)
    _workers(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="submit even a job the cluster's Kueue would break (a field its release drops "
        "when it admits the job)",
    )


def _status(p: _Command) -> None:
    _job(p, _workers)
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")


def _wait(p: _Command) -> None:
    _job(p, _workers)
    p.add_argument("--until", choices=["running", "done"], default="done")
    _timeout(p)
    _save_logs(p)


def _logs(p: _Command) -> None:
    _job(p, _workers)
    ranks = p.add_mutually_exclusive_group()
    ranks.add_argument(
        "--rank",
        type=count,
        default=0,
        metavar="N",
        help="the node (pod) to show, by its index: 0 is the first node (a PyTorchJob's "
        "Master), 1 the next... (default 0). Not torchrun's process rank: node N runs the "
        "processes of global rank N*nprocs_per_node to N*nprocs_per_node+nprocs_per_node-1",
    )
    ranks.add_argument("--all-ranks", action="store_true", help="every node, each line prefixed")
    p.add_argument("-f", "--follow", action="store_true", help="stream until the job ends")
    p.add_argument("--since", type=duration, help="only lines newer than this (e.g. 10m)")
    p.add_argument("--tail", type=count, help="only the last N lines")


def _cancel(p: _Command) -> None:
    _job(p, _workers)
    p.add_argument("--wait", action="store_true", help="return when the job and its pods are gone")
    _timeout(p)


def _sync(p: _Command) -> None:
    _command(p)
    p.add_argument("direction", choices=["up", "down"])
    p.add_argument("local", help="local directory")
    p.add_argument("--pvc", required=True, help="PersistentVolumeClaim name")
    p.add_argument("--path", default="/", help="directory inside the claim (default /)")
    _sync_image(p)
    p.add_argument(
        "--timeout",
        type=duration,
        help="how long the helper pod may take to start (default 5m); then say why it did not",
    )


def _list(p: _Command) -> None:
    _command(p)
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="then print a line for each change (as kubectl get -w), until Ctrl-C",
    )


def _manifests(p: _Command) -> None:
    """What ``import`` and ``convert`` take: existing manifests to specs or other targets."""
    p.add_argument(
        "manifest",
        nargs="+",
        help="PyTorchJob/TrainJob YAML or JSON, '-' for stdin, or a directory of them",
    )
    p.add_argument(
        "--allow-lossy",
        action="store_true",
        help="write the output even when fields are lost (they are printed as warnings)",
    )
    p.add_argument(
        "--out", metavar="DIR", help="write one file per input under DIR and print a summary"
    )


def _import(p: _Command) -> None:
    _manifests(p)


def _convert(p: _Command) -> None:
    from kfcompile.cli.common import target_arg
    from kfcompile.targets import TARGETS

    _manifests(p)
    p.add_argument(
        "--to",
        required=True,
        type=target_arg,
        choices=list(TARGETS),
        metavar="TARGET",
        help=f"output shape: {', '.join(TARGETS)}",
    )


# Each command's examples, as its --help ends with them: (what it does, the command line). A
# test runs every one (tests/test_cli_help.py), the cluster ones against the local API server,
# on a spec job.yaml whose job is named demo.
EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "render": [
        (
            "The objects for the default target, in apply order, applied",
            "kfcompile render job.yaml | kubectl apply -f -",
        ),
        ("Another release's shape, as JSON", "kfcompile render job.yaml -t trainjob/v2.1 -o json"),
        (
            "Every spec for every target, a file each, and a table of what works",
            "kfcompile render examples/*.yaml --target all --out rendered/",
        ),
        (
            "Exit 1 with a diff when the output is not what a file holds",
            "kfcompile render job.yaml --check golden.yaml",
        ),
    ],
    "validate": [
        ("Check a spec for the default target", "kfcompile validate job.yaml"),
        (
            "Which targets can express it, a verdict each",
            "kfcompile validate job.yaml --target all",
        ),
        (
            "Check the output against a release's CRD file too",
            "kfcompile validate job.yaml -t trainjob/v2.3 --crd trainjobs-v2.3.0.yaml",
        ),
        (
            "Check it against the CRD the cluster serves (creates nothing)",
            "kfcompile validate job.yaml --cluster",
        ),
    ],
    "explain": [
        (
            "What a field is, its rules, and where it lands on every target",
            "kfcompile explain launcher",
        ),
        (
            "A field inside a Kubernetes object of the spec",
            "kfcompile explain volumes.persistentVolumeClaim",
        ),
        (
            "Where each value of a spec lands in the objects of one target",
            "kfcompile explain job.yaml --target trainjob/v2.2",
        ),
    ],
    "targets": [
        ("The targets, and which spec field each supports", "kfcompile targets"),
        ("The same, for programs", "kfcompile targets -o json"),
    ],
    "schema": [("The JSON Schema, for an editor", "kfcompile schema > jobspec.schema.json")],
    "rbac": [
        (
            "The Role the cluster commands need in team-a, bound to a service account",
            "kfcompile rbac -n team-a --service-account trainer | kubectl apply -f -",
        ),
        (
            "Also the optional reads outside the namespace (target detection, list -A)",
            "kfcompile rbac -n team-a --user alice --cluster-reads",
        ),
    ],
    "import": [
        (
            "A PyTorchJob or TrainJob manifest as a spec",
            "kfcompile import pytorchjob.yaml > spec.yaml",
        ),
        (
            "A directory of manifests, a spec each, and a summary",
            "kfcompile import manifests/ --out specs/",
        ),
    ],
    "convert": [
        (
            "A PyTorchJob as a TrainJob for Trainer v2.3",
            "kfcompile convert pytorchjob.yaml --to trainjob/v2.3",
        ),
        (
            "A directory of manifests, even what cannot be carried exactly (said on stderr)",
            "kfcompile convert manifests/ --to trainjob/v2.2 --out converted/ --allow-lossy",
        ),
    ],
    "submit": [
        ("Create the job, for the release the cluster runs", "kfcompile submit job.yaml"),
        (
            "Then wait until it ends, and keep every node's log",
            "kfcompile submit job.yaml --wait done --save-logs logs/",
        ),
        (
            "Let the cluster's schema and webhooks check it, and create nothing",
            "kfcompile submit job.yaml --dry-run=server",
        ),
    ],
    "status": [
        ("State and reason, a line per node with its pod, recent events", "kfcompile status demo"),
        ("The same, for programs", "kfcompile status demo -o json"),
    ],
    "wait": [
        (
            "Until it runs; exit 1 if it fails first, or after 30 minutes",
            "kfcompile wait demo --until running --timeout 30m",
        ),
        ("Until it ends, then keep every node's log", "kfcompile wait demo --save-logs logs/"),
    ],
    "logs": [
        ("The first node's log (node 0)", "kfcompile logs demo"),
        ("The last 100 lines of node 1", "kfcompile logs demo --rank 1 --tail 100"),
        (
            "Every node's, prefixed with its rank, as they come until the job ends",
            "kfcompile logs demo --all-ranks --follow",
        ),
    ],
    "events": [("The job's events and its pods'", "kfcompile events demo")],
    "cancel": [
        (
            "Delete the job and its pods, and return when they are gone",
            "kfcompile cancel demo --wait --timeout 5m",
        ),
    ],
    "suspend": [("Suspend it: its pods are deleted", "kfcompile suspend demo")],
    "resume": [("Resume a suspended job", "kfcompile resume demo")],
    "sync": [
        (
            "Copy a directory to a claim the pods mount",
            "kfcompile sync up ./src --pvc work --path /code",
        ),
        ("And back", "kfcompile sync down ./copy --pvc work --path /code"),
    ],
    "list": [
        ("The jobs kfcompile created in the namespace, with their states", "kfcompile list"),
        ("In every namespace; `-w` then prints each change until Ctrl-C", "kfcompile list -A"),
    ],
}


# What runs the commands of each module, which is imported only when one of them runs.


def _in_compile() -> dict[str, Run]:
    from kfcompile.cli import compile

    return {
        "render": compile.cmd_render,
        "validate": compile.cmd_validate,
        "explain": compile.cmd_explain,
        "targets": compile.cmd_targets,
        "schema": compile.cmd_schema,
        "rbac": compile.cmd_rbac,
    }


def _in_manifests() -> dict[str, Run]:
    from kfcompile.cli import manifests

    return {"import": manifests.cmd_import, "convert": manifests.cmd_convert}


def _in_cluster() -> dict[str, Run]:
    from kfcompile.cli import cluster

    return {
        "submit": cluster.cmd_submit,
        "status": cluster.cmd_status,
        "wait": cluster.cmd_wait,
        "logs": cluster.cmd_logs,
        "events": cluster.cmd_events,
        "cancel": cluster.cmd_cancel,
        "suspend": cluster.cmd_suspend,
        "resume": cluster.cmd_resume,
        "sync": cluster.cmd_sync,
    }


def _in_listing() -> dict[str, Run]:
    from kfcompile.cli import listing

    return {"list": listing.cmd_list}


# Every command, in the order the help lists them: its help line, what defines its arguments,
# and what gives its function.
COMMANDS: dict[str, tuple[str, Callable[[_Command], None], Callable[[], dict[str, Run]]]] = {
    "render": ("print the objects to apply, in apply order", _render, _in_compile),
    "validate": ("check specs and that the target can express all of them", _validate, _in_compile),
    "explain": (
        "what a spec field is and where it lands, or where a spec's values land",
        _explain,
        _in_compile,
    ),
    "targets": ("list targets and what each supports", _targets, _in_compile),
    "schema": ("print the JSON Schema of the job spec", _schema, _in_compile),
    "rbac": ("print the minimal Role (and bindings) the cluster commands need", _rbac, _in_compile),
    "import": (
        "read existing PyTorchJob/TrainJob manifests into job specs",
        _import,
        _in_manifests,
    ),
    "convert": (
        "convert existing PyTorchJob/TrainJob manifests to another target",
        _convert,
        _in_manifests,
    ),
    "submit": ("create the job on the cluster (idempotent)", _submit, _in_cluster),
    "status": ("state, reason, per-node pods and recent events", _status, _in_cluster),
    "wait": ("wait until the job is running or done", _wait, _in_cluster),
    "logs": ("print a rank's log, or every rank's", _logs, _in_cluster),
    "events": ("recent events of the job and its pods", lambda p: _job(p, _workers), _in_cluster),
    "cancel": ("delete the job and its pods", _cancel, _in_cluster),
    "suspend": ("suspend the job (its pods are deleted)", _job, _in_cluster),
    "resume": ("resume a suspended job", _job, _in_cluster),
    "sync": ("copy a directory to or from a PersistentVolumeClaim", _sync, _in_cluster),
    "list": ("jobs kfcompile created, with their states", _list, _in_listing),
}
