"""What every target shares: the table types, and the engine that places a spec through them.

The spec becomes ``Entry`` values by walking the field table (``fields.FIELDS``: spec field ->
neutral slot such as ``pod.tolerations``). Each target module declares its own table from slot
to output path; ``render`` places the entries through it (``place``). ``explain`` is the same
walk, reported. When a target is built its table is looked up for every slot (``Layout``);
``Target.fields`` reads the field table through it: where every spec field lands in that
target, in one place.
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from attrs import Factory, field, frozen

from kfcompile.output.limits import Limit, Places
from kfcompile.spec import additions, k8s_schema, model, object_paths, rules, torchrun
from kfcompile.spec.additions import SCRIPT_DIR
from kfcompile.spec.errors import Problem, UnsupportedFeature
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.model import JobSpec
from kfcompile.targets import fields
from kfcompile.targets.codecs import Entry, Placement


def _identity(value: Any) -> Any:
    return value


@frozen(repr=False, slots=False)
class Slot:
    """Where a slot lands in one target: one or more paths, and how the value is written."""

    paths: tuple[str, ...]
    convert: Callable[[Any], Any] = _identity

    @classmethod
    def at(cls, *where: str, convert: Callable[[Any], Any] = _identity) -> "Slot":
        return cls(where, convert)


OMIT = object()  # a converter's answer for "write nothing here" (e.g. numProcPerNode auto)

# Every job is a Kubernetes object: its identity lands in its own metadata on every target.
JOB_METADATA: Mapping[str, Slot] = {
    "job.name": Slot.at("metadata.name"),
    "job.namespace": Slot.at("metadata.namespace"),
    "job.labels": Slot.at("metadata.labels"),
    "job.annotations": Slot.at("metadata.annotations"),
}


@frozen(repr=False, eq=False, slots=False)
class Rendered:
    objects: list[dict[str, Any]]
    placements: list[Placement] = field(factory=list)


Table = Mapping[str, "Slot | None"]  # None (or no row): the target cannot express this slot


def rows(group: str, prefix: str, names: tuple[str, ...]) -> dict[str, Slot]:
    """Slots ``<group>.<name>`` that land at ``<prefix>.<name>``, e.g. the pod fields a release
    lets a TrainJob override."""
    return {f"{group}.{n}": Slot.at(f"{prefix}.{n}") for n in names}


def _no_pods(spec: JobSpec) -> list[str]:
    return []


class Resolved(NamedTuple):
    """One row of a target's resolved field table: a spec field, its slot, and where it lands
    (no paths: the target writes it with code of its own; None: the target cannot hold it)."""

    source: str
    slot: str
    paths: tuple[str, ...] | None


def resolve(layout: "Layout") -> tuple[Resolved, ...]:
    return tuple(
        Resolved(source, slot, None if s is None else tuple(p + sub for p in s.paths))
        for source, slot, sub, _ in fields.feeds()
        for s in [layout.get(slot)]
    )


@frozen(repr=False, eq=False, slots=False)
class Target:
    """One output shape: what ``kfcompile targets`` lists and ``render`` dispatches on.

    ``layout`` is ``table`` looked up for every slot when the target is built; ``fields`` is the
    field table read through it: print it to see where every spec field lands (``tolerations``
    -> ``pod.tolerations`` -> ``spec.podTemplateOverrides[0].spec.tolerations``). What render
    checks its output by is the target's own: its CRD's ``limits``, and the ``places`` of its
    pods and object metadata, read from the layout (``whole_pods``: it writes whole pod specs,
    not patches of a runtime's pod).
    """

    name: str
    api_version: str
    kind: str
    releases: str
    table: Table
    render: Callable[[JobSpec], Rendered]
    # What the controllers append to the job's name to name its pods, for this spec.
    pod_suffixes: Callable[[JobSpec], list[str]] = _no_pods
    layout: "Layout" = field(
        default=Factory(lambda self: Layout(self.table), takes_self=True), eq=False, repr=False
    )
    limits: tuple[Limit, ...] = field(kw_only=True)
    whole_pods: bool = field(kw_only=True)
    places: Places = field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "places", places(self.name, self.layout, self.whole_pods))

    def name_limit(self, spec: JobSpec) -> int:
        """The longest job name this target can give ``spec`` (it depends on the number of
        nodes and the runtime); ``render`` refuses longer ones. For launchers that make names."""
        return name_limit(self.pod_suffixes(spec))

    @property
    def fields(self) -> tuple[Resolved, ...]:
        """Every row of the field table, resolved through the target's layout."""
        return resolve(self.layout)


def _pattern(path: str) -> str:
    """A table's output path (``a[0].b[name=x].c``, ``a.*.b``) in the checks' notation: every
    item of the list (``a[].b[].c``), every value of the map (``a*.b``)."""
    return re.sub(r"\[[^]]*\]", "[]", path).replace(".*", "*")


METADATA = ("labels", "annotations")  # of a slot group: object metadata, not pod spec fields


def places(name: str, layout: "Layout", whole_pods: bool) -> Places:
    """Where the target ``name`` puts pod specs (the objects its ``pod.*`` slots land in), the
    training container's resources where no pod spec holds them, and the annotations of every
    object (its ``*.annotations`` slots): ValueError if the table has no pod or annotations."""
    pods: dict[str, None] = {}
    annotations: dict[str, None] = {}
    for slot in fields.slots():
        group, _, leaf = slot.partition(".")
        found = layout.get(slot)
        for path in found.paths if found is not None else ():
            if leaf == "annotations":
                annotations[_pattern(path)] = None
            elif group == "pod" and leaf not in METADATA and path.endswith(f".{leaf}"):
                pods[_pattern(path.removesuffix(f".{leaf}"))] = None
    resources = layout.get("container.resources")
    written = [_pattern(p) for p in (resources.paths if resources is not None else ())]
    outside = [p for p in written if not any(p.startswith(f"{pod}.") for pod in pods)]
    if not pods or not annotations:
        missing = "pod.* slot" if not pods else "annotations slot"
        raise ValueError(f"target {name}: no {missing} in its table, so its output is unchecked")
    return Places(tuple(pods), whole_pods, tuple(outside), tuple(annotations))


# --- launchers ------------------------------------------------------------------------------


def entrypoint_path(spec: JobSpec) -> str:
    """The file the launcher runs: the inline script's, else ``launcher.entrypoint``."""
    if spec.script is not None:
        return f"{SCRIPT_DIR}/{spec.script_entrypoint}"
    assert spec.launcher is not None and spec.launcher.entrypoint
    return spec.launcher.entrypoint


def program(spec: JobSpec) -> list[str]:
    """The program and its arguments, exactly as written: no shell ever sees them. A module
    runs as ``-m module``, which python and torchrun (``-m``/``--module``) both take; torchrun's
    ``--no-python`` (its last option) runs the file itself."""
    assert spec.launcher is not None
    if spec.launcher.module is not None:
        return [torchrun.MODULE.short, spec.launcher.module, *spec.launcher.args]
    mode = [torchrun.NO_PYTHON.flag] if spec.launcher.no_python else []
    return [*mode, entrypoint_path(spec), *spec.launcher.args]


DNS_LABEL_MAX = 63  # pod names become hostnames (and PyTorchJob Service names): DNS labels


def name_limit(suffixes: Iterable[str]) -> int:
    """The longest name for which every ``<name><suffix>`` is a DNS label."""
    return DNS_LABEL_MAX - max((len(s) for s in suffixes), default=0)


def pod_name_budget(name: str, suffixes: Iterable[str], who: str) -> Iterator[Problem]:
    """The job's pods are named ``<name><suffix>``; each must be a DNS label (at most 63).

    A name over the budget is accepted by the API server and then never gets pods, so it is
    an error here, naming the pod name that would be too long and the longest name that fits.
    """
    longest = max(suffixes, key=len)
    pod = name + longest
    if len(pod) > DNS_LABEL_MAX:
        yield Problem(
            "name",
            f"too long for {who}: pod name {pod!r} would be {len(pod)} characters (a DNS "
            f"label allows {DNS_LABEL_MAX}); this spec allows names of at most "
            f"{name_limit([longest])} characters",
        )


# What torchrun sets for each process it starts, over the container's env (torch
# torch/distributed/elastic/agent/server/local_elastic_agent.py LocalElasticAgent._start_workers).
TORCHRUN_ENV = frozenset(
    {"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"}
    | {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"}
    | {"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID"}
    | {"TORCHELASTIC_USE_AGENT_STORE"}
)


def launcher_env(
    spec: JobSpec, controller: frozenset[str], why: str, container: str | None
) -> Iterator[Problem]:
    """The env the controller sets (``controller``, told ``why``) and, under the torchrun
    launcher, the env torchrun sets: a value the spec gives there would never be seen."""
    yield from reserved_env(spec, controller, why, container)
    if spec.launcher is not None and spec.launcher.kind == "torchrun":
        yield from reserved_env(
            spec,
            TORCHRUN_ENV - controller,
            "torchrun sets it for each process it starts",
            container,
        )


def reserved_env(
    spec: JobSpec, names: frozenset[str], why: str, container: str | None
) -> Iterator[Problem]:
    """Variables set in the training container by something else (the controller, torchrun):
    one the spec sets too would run with that value (or be refused by a webhook). The env of
    ``container`` (the training container's name) in ``pod_spec_overrides`` is that
    container's too; None where the target takes no env there (its own problem)."""
    for k in spec.env:
        if k in names:
            yield Problem(FieldPath.of("env", k), why)
    for i, item in enumerate(spec.env_list):
        if item.get("name") in names:
            yield Problem(FieldPath.of("env_list", i, "name"), why)
    for i, name in enumerate(spec.secret_env):
        if name in names:
            yield Problem(FieldPath.of("secret_env", i), why)
    overrides = [(FieldPath.of("container_overrides", "env"), spec.container_overrides.get("env"))]
    if container is not None:
        containers = spec.pod_spec_overrides.get("containers")
        for j, c in enumerate(containers if isinstance(containers, list | tuple) else ()):
            if isinstance(c, Mapping) and c.get("name") == container:
                overrides.append(
                    (FieldPath.of("pod_spec_overrides", "containers", j, "env"), c.get("env"))
                )
    for at, items in overrides:
        for i, item in enumerate(items if isinstance(items, list | tuple) else ()):
            if isinstance(item, Mapping) and item.get("name") in names:
                yield Problem(at / i / "name", why)


def training_mounts(spec: JobSpec, container: str) -> Iterator[Problem]:
    """The training container's mounts given in ``pod_spec_overrides.containers`` (by the
    name this target gives it) take no place another mount has (``model.mount_points``)."""
    for at, message in model.mount_points(spec, container):
        if at.startswith("pod_spec_overrides."):
            yield Problem(at, message)


def launcher_args(spec: JobSpec, container: str) -> Iterator[Problem]:
    """With a launcher, kfcompile writes the training container's whole command line; args from
    an override would run after it as more program arguments, which is what launcher.args is."""
    if spec.launcher is None:
        return
    why = "launcher writes the training container's whole command line: use launcher.args"
    if "args" in spec.container_overrides:
        yield Problem(FieldPath.of("container_overrides", "args"), why)
    items = spec.pod_spec_overrides.get("containers")
    named = (
        object_paths.find_named(list(items), container) if isinstance(items, list | tuple) else None
    )
    if named is not None and "args" in named:
        at = FieldPath.of(
            "pod_spec_overrides", "containers", object_paths.Select("name", container)
        )
        yield Problem(at / "args", why)


def with_companions(spec: JobSpec, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects to apply, in order: companions the job refers to first, the job last."""
    return [script_configmap(spec), job] if spec.script is not None else [job]


def script_configmap(spec: JobSpec) -> dict[str, Any]:
    assert spec.script is not None
    return additions.script_configmap(
        spec.name, spec.namespace, spec.script_entrypoint, spec.script
    )


def checked(rendered: Rendered, target: Target) -> Rendered:
    """``rendered``, if the API server would take it and the pods it makes: the target CRD's
    limits and the core/v1 pod rules on the merged objects (``kfcompile.output.check``)."""
    from kfcompile.output import (
        check as output_check,  # loaded by the first render, not by other commands
    )

    problems = output_check.problems(
        rendered.objects, rendered.placements, target.kind, target.limits, target.places
    )
    if problems:
        raise UnsupportedFeature(problems)
    return rendered


# --- the engine -------------------------------------------------------------------------------


def lookup(table: Table, slot: str) -> Slot | None:
    """Where ``slot`` lands: its own row, else a wildcard row such as ``pod.*``; None if nowhere."""
    found = table.get(slot, OMIT)
    if found is OMIT:
        group, _, rest = slot.partition(".")
        wildcard = table.get(f"{group}.*")
        if wildcard is None:
            return None
        return Slot(tuple(p + object_paths.key(rest) for p in wildcard.paths), wildcard.convert)
    assert found is None or isinstance(found, Slot)
    return found


@frozen(repr=False, eq=False, slots=False)
class Layout:
    """A target's table looked up, once, for every slot of the field table: render asks it for
    each entry's slot (a key of an escape hatch is looked up when asked)."""

    table: Table
    slots: Mapping[str, Slot | None] = field(
        init=False,
        default=Factory(
            lambda self: {s: lookup(self.table, s) for s in fields.slots()}, takes_self=True
        ),
    )

    def get(self, slot: str) -> Slot | None:
        try:
            return self.slots[slot]
        except KeyError:
            return lookup(self.table, slot)


def _merge_of(e: Entry) -> object_paths.Merge:
    """How an escape hatch's key merges: as the core/v1 field of that name merges in a
    strategic merge patch (``container_overrides.env`` as ``Container.env``, by name)."""
    definition = rules.ESCAPE_HATCHES[e.at.top][0]
    kind = k8s_schema.properties(definition).get(e.slot.partition(".")[2], object_paths.FREE)
    return object_paths.Merge(kind, k8s_schema.properties)


def _replacing(
    named: FieldPath,
    where: object_paths.Path,
    owners: Mapping[object_paths.Path, str],
    target: str,
) -> Problem:
    """An override (at ``named`` in the spec) that would replace the value at ``where`` that
    another field writes (or the target itself, such as the PyTorchJob port the operator reads):
    given twice, one would silently lose."""
    owner = next((owners[where[:n]] for n in range(len(where), 0, -1) if where[:n] in owners), None)
    if owner is None:  # an atomic list replaced whole, whose items were placed one by one
        owner = next((o for p, o in owners.items() if p[: len(where)] == where), None)
    writer = f"what {owner} writes" if owner else f"what {target} writes itself"
    return Problem(
        named, f"would replace {writer} ({object_paths.format(where)}): give it in one place"
    )


class Mirror(NamedTuple):
    """Two places of the output that the controller applies to one field of the pods: what an
    override writes at ``patch`` lands on what is written at ``into`` (Trainer v2.0 and v2.1
    apply the ``node`` container's env override to the container the trainer's env fills).
    Render merges the one into the other as the core/v1 ``definition.key`` merges: an override
    there may no more replace what another spec field writes than one written in place."""

    patch: str
    into: str
    definition: str = "Container"
    key: str = "env"


def _mirrored(
    doc: dict[str, Any],
    mirror: Mirror,
    writers: Mapping[object_paths.Path, Entry],
    owners: Mapping[object_paths.Path, str],
    target: str,
) -> tuple[FieldPath, Problem] | None:
    """Where what the output holds at ``mirror.patch``, merged into what it holds at
    ``mirror.into``, would replace something: the spec field that wrote it, and its problem."""
    patch, into = object_paths.parse(mirror.patch), object_paths.parse(mirror.into)
    try:
        over, base = object_paths.get(doc, patch), object_paths.get(doc, into)
    except (KeyError, TypeError, AttributeError):
        # One of the two is not written (nothing lands on anything), or is of a shape the
        # spec's own rules refuse (a spec structured without them: ``containers: null``).
        return None
    kind = k8s_schema.properties(mirror.definition).get(mirror.key, object_paths.FREE)
    try:
        _, replaced = object_paths.merged(
            base, over, object_paths.Merge(kind, k8s_schema.properties)
        )
    except object_paths.MergeConflict:
        return None  # shapes the spec's own rules refuse
    if not replaced:
        return None
    # The entry that wrote the override: the one placed at the longest prefix of ``patch``.
    for n in range(len(patch), 0, -1):
        e = writers.get(patch[:n])
        if e is not None:
            named = e.at.join(FieldPath((*patch[n:], *replaced[0])))
            return e.at, _replacing(named, (*into, *replaced[0]), owners, target)
    return None


# Every target, by name: the registry (`kfcompile.targets`), which imports the target modules,
# gives it once it has loaded one, so that the engine can name the targets that would express
# a misfit without importing the registry back.
REGISTRY: Mapping[str, Target] = {}


def supported_by(slot: str) -> list[str]:
    """Every target whose table can express ``slot``, for error messages."""
    return [t.name for t in REGISTRY.values() if t.layout.get(slot) is not None]


def place(
    doc: dict[str, Any],
    index: int,
    items: list[Entry],
    layout: Layout,
    target: str,
    problems: list[Problem] | None = None,
    mirrors: Iterable[Mirror] = (),
) -> list[Placement]:
    """Write every entry into ``doc`` through the target's ``layout``; then check that what
    lands at each of ``mirrors`` replaces nothing where the controller applies it.

    Raises one ``UnsupportedFeature`` naming every misfit, after any ``problems`` the target
    found itself, so a user sees everything wrong at once.
    """
    placed: list[Placement] = []
    misfits: dict[FieldPath, Problem] = {}  # one line per top-level spec field (hatch: per key)
    builder = object_paths.Builder(doc)
    owners: dict[object_paths.Path, str] = {}  # where each entry landed -> the spec field it is
    writers: dict[object_paths.Path, Entry] = {}  # where each entry landed -> the entry
    for e in items:
        slot = layout.get(e.slot)
        if slot is None:
            if e.at not in misfits:
                others = supported_by(e.slot)
                where = f"supported by: {', '.join(others)}" if others else "no target supports it"
                misfits[e.at] = Problem(e.at, f"not supported by {target} ({where})")
            continue
        value = e.value if slot.convert is _identity else slot.convert(e.value)
        if value is OMIT:
            continue
        how = _merge_of(e) if e.merge else None
        for i, where in enumerate(slot.paths):
            text = where + e.sub
            at = object_paths.parse(text)
            try:
                replaced = builder.put(at, object_paths.copied(value) if i else value, how)
            except object_paths.MergeConflict as exc:
                misfits.setdefault(e.at, Problem(e.at, str(exc)))
                break
            if replaced:
                named = e.at.join(FieldPath(replaced[0]))
                misfits.setdefault(e.at, _replacing(named, (*at, *replaced[0]), owners, target))
                break
            owners.setdefault(at, e.source)
            writers.setdefault(at, e)
            placed.append(Placement(e.source, index, text, value, e.merge))
    for mirror in mirrors:
        clash = _mirrored(doc, mirror, writers, owners, target)
        if clash is not None:
            misfits.setdefault(*clash)
    if problems or misfits:
        raise UnsupportedFeature([*(problems or ()), *misfits.values()])
    return placed
