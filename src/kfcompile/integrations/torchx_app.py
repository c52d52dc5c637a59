"""A TorchX ``AppDef`` as one kfcompile ``JobSpec``: the mapping behind the ``kfcompile``
scheduler (``kfcompile.integrations.torchx``).

``ROWS`` states once which spec fields each AppDef field (and run option) becomes, with the
conversion each way: ``to_spec`` walks it forward, ``to_role`` (``describe``) backward, and
errors name the AppDef field a spec field came from by it (``roles[0].mounts
(volumes[0].name): ...``), never a silent drop. The program (the torchrun line of
``dist.ddp``/``dist.torchrun``, read by ``kfcompile.spec.torchrun_line``), the mounts, and the
checks only the way in needs are code beside the table.

Pure: no cluster, no clock; the random part of a job's name is passed in. Loaded only by the
scheduler, which torchx loads: nothing in kfcompile's core imports this.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

import attrs
from attrs import frozen

from kfcompile.spec import object_paths, torchrun
from kfcompile.spec.errors import KfcompileError, Problem
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.k8s_quantity import parse_quantity
from kfcompile.spec.model import JobSpec
from kfcompile.spec.torchrun_line import Word, torchrun_line, torchrun_words
from kfcompile.targets import DEFAULT_TARGET, target


class NotExpressible(KfcompileError):
    """The app cannot become a kfcompile job on the chosen target; one line per problem,
    each naming the AppDef field (or run option) it came from."""


@frozen(kw_only=True)
class Options:
    """The scheduler's run options (``-cfg key=value,...``), typed."""

    namespace: str = "default"
    target: str = DEFAULT_TARGET
    queue: str | None = None
    priority_class: str | None = None
    service_account: str | None = None
    runtime: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    shm_size: str | None = None
    kubeconfig: str | None = None
    context: str | None = None

    @classmethod
    def of(cls, cfg: Mapping[str, Any]) -> Options:
        known = {f.name for f in attrs.fields(cls)}
        values = {k: v for k, v in cfg.items() if k in known and v not in (None, "")}
        if "image_pull_secrets" in values:
            values["image_pull_secrets"] = tuple(values["image_pull_secrets"])
        return cls(**values)


# --- where errors point back to ----------------------------------------------------------------

# torchrun's options as TorchX's components spell them (dist.ddp writes `--nproc_per_node`).
NNODES, NPROCS, MAX_RESTARTS = (
    o.underscored for o in (torchrun.NNODES, torchrun.NPROC_PER_NODE, torchrun.MAX_RESTARTS)
)

APP_NAME: Final = "torchx.pytorch.org/app-name"
ROLE_NAME: Final = "torchx.pytorch.org/role-name"
TORCHX_VERSION: Final = "torchx.pytorch.org/version"

# Stand-ins for the per-replica macros: kfcompile renders one pod template for every node, so
# a value that differs by replica cannot be written into it. Their use is reported, unless it
# is in a torchrun option the target wires itself (dist.ddp's rendezvous endpoint).
PER_REPLICA: Final[Mapping[str, str]] = {
    "__kfcompile_torchx_replica_id__": "${replica_id}",
    "__kfcompile_torchx_rank0_env__": "${rank0_env}",
}
REPLICA_ID, RANK0_ENV = PER_REPLICA


def _origin(at: FieldPath) -> str:
    """``env.FOO`` -> ``roles[0].env (env.FOO)``: the AppDef field first, the spec path after."""
    path, where = str(at), ORIGINS.get(at.top)
    return f"{where} ({path})" if where and where != path else path


def from_app(error: KfcompileError) -> NotExpressible:
    """A spec or render error, each problem pointing back at what the app said."""
    return NotExpressible(Problem(_origin(p.at), p.message) for p in error.problems)


# --- the app ------------------------------------------------------------------------------------


def _literal(value: str) -> str:
    """Kubernetes expands ``$(VAR)`` (and ``$$`` to ``$``) in command, args and env values; a
    TorchX value means itself, so every ``$`` is doubled."""
    return value.replace("$", "$$")


def _meant(value: str) -> str:
    """``_literal`` backwards: the value the program gets."""
    return value.replace("$$", "$")


def _quantity_cpu(cpu: float) -> str:
    millis = round(cpu * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _per_replica(value: str, at: str) -> Iterator[Problem]:
    for stand_in, macro in PER_REPLICA.items():
        if stand_in in value:
            yield Problem(
                at,
                f"{macro} differs by replica, but kfcompile renders one pod template for "
                "every node (read the node rank and rank 0's address from the environment "
                "the target sets)",
            )


# --- the table: each AppDef field and the spec fields it becomes, both ways ---------------------

Read = Callable[[Any, str, list[Problem]], Any]  # (app's value, where, problems) -> spec's or None
Write = Callable[[JobSpec], Any]  # the spec -> the Role's value
ROLE, OPTION = "roles[0].", "-cfg "  # where a row's value is: the role, or a run option


class Row(NamedTuple):
    """One correspondence. ``appdef`` is where the value is (``roles[0].<Role attribute>``, or
    ``-cfg <run option>``) as errors name it; ``fields`` the spec fields it becomes. ``read``
    converts the app's value (None: it sets nothing), ``write`` the spec back to the Role's
    (``describe``); a row without ``read`` is filled by the code beside the table (the program,
    the mounts), one without ``write`` has no room in a Role (run options, the mounts)."""

    appdef: str
    fields: tuple[str, ...]
    read: Read | None = None
    write: Write | None = None

    @property
    def attribute(self) -> str:
        """The Role attribute (``resource.cpu``) or run option (``queue``) the row reads."""
        return self.appdef.removeprefix(ROLE).removeprefix(OPTION)


def _env(env: Mapping[str, str], at: str, problems: list[Problem]) -> dict[str, str] | None:
    for key, value in env.items():
        problems.extend(_per_replica(value, f"{at}{object_paths.key(key)}"))
    return {key: _literal(value) for key, value in env.items()} or None


def _capabilities(
    capabilities: Mapping[str, Any], at: str, problems: list[Problem]
) -> dict[str, str] | None:
    selector: dict[str, str] = {}
    for key, value in dict(capabilities).items():
        if isinstance(value, str | int) and not isinstance(value, bool):
            selector[str(key)] = str(value)
        else:
            problems.append(
                Problem(
                    f"{at}{object_paths.key(str(key))}",
                    f"must be a node label value (a string), got {type(value).__name__}",
                )
            )
    return selector or None


def _given(convert: Callable[[Any], Any]) -> Read:
    """A read of a value TorchX leaves at 0 or -1 (NULL_RESOURCE) to ask for nothing."""
    return lambda value, at, problems: convert(value) if value > 0 else None


def _same(value: Any, at: str, problems: list[Problem]) -> Any:
    return value if value not in (None, ()) else None


def _cpu(spec: JobSpec) -> float:
    cpu = spec.cpu_limit or spec.cpu_request
    return float(parse_quantity(cpu)) if cpu else -1


def _memory(spec: JobSpec) -> int:
    memory = spec.memory_limit or spec.memory_request
    return math.ceil(parse_quantity(memory) / 2**20) if memory else -1


def _max_nodes(spec: JobSpec) -> int:
    return spec.num_nodes if spec.elastic is None else spec.elastic.max_nodes


ROWS: Final[tuple[Row, ...]] = (
    Row("name", ("name",)),
    Row("roles[0].name", ("annotations",)),  # kept as the role-name annotation
    Row("roles[0].image", ("image",), _same, lambda spec: spec.image),
    # The program, from the command line (code beside: ``_program``, ``_command``).
    Row("roles[0].entrypoint", ("command",), write=lambda spec: _command(spec)[0]),
    Row("roles[0].args", ("args",), write=lambda spec: _command(spec)[1]),
    Row("roles[0].args (torchrun line)", ("launcher",)),
    Row(f"roles[0].args (torchrun {NPROCS})", ("nprocs_per_node",)),
    Row("roles[0].num_replicas", ("num_nodes",), _same, _max_nodes),
    Row(
        "roles[0].min_replicas",
        ("elastic",),
        write=lambda spec: None if spec.elastic is None else spec.elastic.min_nodes,
    ),
    Row(
        "roles[0].env",
        ("env",),
        _env,
        lambda spec: {k: _meant(v) for k, v in spec.env.items()},
    ),
    Row(
        "roles[0].max_retries",
        ("backoff_limit",),
        _given(int),
        lambda spec: spec.backoff_limit or 0,
    ),
    # A ``Resource`` is what one replica (one node) needs.
    Row(
        "roles[0].resource.cpu",
        ("cpu_request", "cpu_limit"),
        _given(lambda cpu: _quantity_cpu(float(cpu))),
        _cpu,
    ),
    Row(  # TorchX's named resources count memMB in MiB (e.g. 244 GiB as 244 * 1024)
        "roles[0].resource.memMB",
        ("memory_request", "memory_limit"),
        _given(lambda mib: f"{math.ceil(mib)}Mi"),
        _memory,
    ),
    Row(
        "roles[0].resource.gpu",
        ("gpus_per_node",),
        _given(int),
        lambda spec: spec.gpus_per_node,
    ),
    Row(
        "roles[0].resource.devices",
        ("extra_resource_requests", "extra_resource_limits"),
        lambda devices, at, problems: {str(k): str(n) for k, n in dict(devices).items()} or None,
        lambda spec: {k: int(parse_quantity(v)) for k, v in spec.extra_resource_limits.items()},
    ),
    Row(
        "roles[0].resource.capabilities",
        ("node_selector",),
        _capabilities,
        lambda spec: dict(spec.node_selector),
    ),
    Row("roles[0].mounts", ("volumes", "volume_mounts")),  # code beside: ``_mounts``
    Row("roles[0].mounts (a device: privileged)", ("container_overrides",)),
    Row("-cfg namespace", ("namespace",), _same),
    Row("-cfg queue", ("queue",), _same),
    Row("-cfg priority_class", ("priority_class",), _same),
    Row("-cfg service_account", ("service_account_name",), _same),
    Row(
        "-cfg runtime",
        ("runtime_ref",),
        lambda runtime, at, problems: {"name": runtime} if runtime else None,
    ),
    Row("-cfg image_pull_secrets", ("image_pull_secrets",), _same),
    Row("-cfg shm_size", ("shm_size",), _same),
)

# Spec field -> where its value came from, for error messages.
ORIGINS: Final[Mapping[str, str]] = {f: row.appdef for row in ROWS for f in row.fields}


def _read(rows: Sequence[Row], source: Any, spec: dict[str, Any], problems: list[Problem]) -> None:
    """The table forward: each row's value from ``source`` (the role, or the run options)."""
    for row in rows:
        if row.read is None:
            continue
        value = functools.reduce(getattr, row.attribute.split("."), source)
        found = row.read(value, row.appdef, problems)
        if found is not None:
            spec.update(dict.fromkeys(row.fields, found))


ROLE_ROWS: Final = tuple(r for r in ROWS if r.appdef.startswith(ROLE))
OPTION_ROWS: Final = tuple(r for r in ROWS if r.appdef.startswith(OPTION))


def _nodes(value: str, at: str) -> tuple[int, int] | Problem:
    """torchrun's ``--nnodes``: ``N`` or ``MIN:MAX``."""
    m = re.fullmatch(r"(\d+)(?::(\d+))?", value)
    if not m:
        return Problem(at, f"torchrun {NNODES} {value}: must be N or MIN:MAX")
    low, high = int(m[1]), int(m[2] or m[1])
    return low, high


def _nprocs(value: str, gpus: int, at: str) -> int | str | Problem:
    if value.isdigit():
        return int(value)
    if value == "auto":
        return "auto"
    if value == "gpu" and gpus > 0:
        return gpus
    return Problem(at, f"torchrun {NPROCS} {value}: must be a number or auto")


def _program(role: Any, at: str, spec: dict[str, Any], problems: list[Problem]) -> None:
    """The role's command line: kfcompile's torchrun launcher for a torchrun line, else the
    command and args exactly as the role gives them. Sets the nodes (elastic below
    ``num_replicas``) and processes per node."""
    replicas, least = role.num_replicas, role.min_replicas or role.num_replicas
    restarts = None
    words = torchrun_words(role.entrypoint, list(role.args))
    if words is None:
        for i, arg in enumerate([role.entrypoint, *role.args]):
            problems.extend(_per_replica(arg, f"{at}.args[{i - 1}]" if i else f"{at}.entrypoint"))
        spec["command"] = [_literal(role.entrypoint)]
        if role.args:
            spec["args"] = [_literal(a) for a in role.args]
    elif (found := _torchrun(role, words, f"{at}.args", spec, problems)) is not None:
        least, restarts = found
    if least < replicas:
        spec["elastic"] = {
            "min_nodes": max(least, 1),
            "max_nodes": replicas,
            "max_restarts": restarts,
        }
    elif restarts is not None:
        problems.append(
            Problem(f"{at}.args", f"torchrun {MAX_RESTARTS}: kfcompile passes it to elastic jobs")
        )


def _torchrun(
    role: Any, words: Sequence[Word], at: str, spec: dict[str, Any], problems: list[Problem]
) -> tuple[int, int | None] | None:
    """Map a torchrun line onto the launcher; the fewest nodes it starts with, and its
    ``--max_restarts``."""
    line, found = torchrun_line(words, at)
    problems.extend(found)
    if line is None:
        return None
    script, *script_args = (w.text for w in line.program)
    for value in (script, *script_args):
        problems.extend(_per_replica(value, at))
    # Nested parts are given as mappings: JobSpec checks them with their full paths.
    program: dict[str, Any] = (
        {"module": script} if line.module else {"entrypoint": _literal(script)}
    )
    if line.no_python:
        program["no_python"] = True
    spec["launcher"] = {"kind": "torchrun", **program, "args": [_literal(a) for a in script_args]}
    replicas, least = role.num_replicas, role.min_replicas or role.num_replicas
    if line.nnodes is not None:
        nodes = _nodes(line.nnodes, at)
        if isinstance(nodes, Problem):
            problems.append(nodes)
        elif nodes[1] != replicas or (
            role.min_replicas is not None and nodes[0] not in (nodes[1], role.min_replicas)
        ):
            given = f" (min_replicas {role.min_replicas})" if role.min_replicas else ""
            problems.append(
                Problem(
                    at,
                    f"torchrun {NNODES} {line.nnodes} does not match num_replicas "
                    f"{replicas}{given}",
                )
            )
        else:
            least = nodes[0]  # what torchrun waits for is what runs
    # torchrun starts one process per node unless told (kfcompile's default would be per GPU).
    nprocs = _nprocs(line.nproc_per_node or "1", max(int(role.resource.gpu), 0), at)
    if isinstance(nprocs, Problem):
        problems.append(nprocs)
    else:
        spec["nprocs_per_node"] = nprocs
    restarts = None
    if line.max_restarts is not None:
        if line.max_restarts.isdigit():
            restarts = int(line.max_restarts)
        else:
            problems.append(Problem(at, f"torchrun {MAX_RESTARTS}: must be a number"))
    return least, restarts


def _mounts(mounts: Sequence[Any], at: str, spec: dict[str, Any], problems: list[Problem]) -> None:
    volumes: list[dict[str, Any]] = []
    claimed: list[dict[str, Any]] = []
    privileged = False
    for i, mount in enumerate(mounts):
        name = f"mount-{i}"
        kind = type(mount).__name__
        if kind == "BindMount":
            volume: dict[str, Any] = {"hostPath": {"path": mount.src_path}}
            read_only = bool(mount.read_only)
        elif kind == "VolumeMount":
            volume = {"persistentVolumeClaim": {"claimName": mount.src}}
            read_only = bool(mount.read_only)
        elif kind == "DeviceMount":
            volume = {"hostPath": {"path": mount.src_path}}
            read_only = "w" not in mount.permissions and "m" not in mount.permissions
            privileged = True  # a device node opens only in a privileged container
        else:
            problems.append(Problem(f"{at}.mounts[{i}]", f"unknown mount type {kind}"))
            continue
        volumes.append({"name": name, **volume})
        entry: dict[str, Any] = {"name": name, "mountPath": mount.dst_path}
        if read_only:
            entry["readOnly"] = True
        claimed.append(entry)
    if volumes:
        spec["volumes"], spec["volume_mounts"] = volumes, claimed
    if privileged:
        spec["container_overrides"] = {"securityContext": {"privileged": True}}


def _unused(app: Any, role: Any, at: str) -> Iterator[Problem]:
    """Fields kfcompile has nowhere to put: set, they are errors."""
    if app.metadata:
        yield Problem("metadata", "kfcompile reads no scheduler metadata: leave it empty")
    if role.metadata:
        yield Problem(f"{at}.metadata", "kfcompile reads no scheduler metadata: leave it empty")
    if getattr(role, "base_image", None):  # torchx 0.7
        yield Problem(f"{at}.base_image", "kfcompile builds no images: set image only")
    if getattr(role, "workspace", None):  # torchx nightlies
        yield Problem(f"{at}.workspace", "kfcompile builds no images: build the image first")
    overrides = getattr(role, "overrides", None) or {}  # torchx nightlies
    if any(not str(k).startswith("<") for k in overrides):  # `<...>`: torchx's own
        yield Problem(f"{at}.overrides", "kfcompile takes no scheduler overrides")
    if role.max_retries > 0 and str(getattr(role.retry_policy, "value", "")) not in (
        "REPLICA",
        "APPLICATION",
    ):
        yield Problem(
            f"{at}.retry_policy",
            f"{role.retry_policy.value}: kfcompile retries replicas (REPLICA or APPLICATION)",
        )


def to_spec(app: Any, options: Options, name: str, torchx_version: str) -> JobSpec:
    """The JobSpec for ``app`` named ``name``, with the run ``options``; raises
    ``NotExpressible`` naming every AppDef field the spec cannot hold."""
    from torchx.specs import macros

    roles = list(app.roles)
    if len(roles) != 1:
        names = ", ".join(r.name for r in roles) or "none"
        raise NotExpressible(
            [Problem("roles", f"kfcompile runs one role per job; this app has {names}")]
        )
    at = "roles[0]"
    stand_ins = {"replica_id": REPLICA_ID, "rank0_env": RANK0_ENV}
    given = {
        "img_root": "",
        "base_img_root": "",
        "app_id": f"{options.namespace}:{name}",
        **stand_ins,
    }
    fields = {f.name for f in dataclasses.fields(macros.Values)}
    role = macros.Values(**{k: v for k, v in given.items() if k in fields}).apply(roles[0])

    problems = list(_unused(app, role, at))
    spec: dict[str, Any] = {
        "name": name,
        "annotations": {APP_NAME: app.name, ROLE_NAME: role.name, TORCHX_VERSION: torchx_version},
    }
    _program(role, at, spec, problems)
    _read(ROLE_ROWS, role, spec, problems)
    _mounts(role.mounts, at, spec, problems)
    _read(OPTION_ROWS, options, spec, problems)
    if problems:
        raise NotExpressible(problems)
    try:
        return JobSpec(**spec)
    except KfcompileError as exc:
        raise from_app(exc) from None


def to_role(spec: JobSpec, name: str) -> Any:
    """The TorchX ``Role`` a job's spec (as read back from the cluster) runs: the table
    backwards, for ``describe``. What the job does not set stays TorchX's "unset" (-1)."""
    from torchx.specs import Resource, Role

    values = {row.attribute: row.write(spec) for row in ROLE_ROWS if row.write is not None}
    resource = {k.removeprefix("resource."): v for k, v in values.items() if "." in k}
    role = {k: v for k, v in values.items() if "." not in k}
    return Role(name=name, resource=Resource(**resource), **role)


def _command(spec: JobSpec) -> tuple[str, list[str]]:
    """The Role's entrypoint and args: a torchrun launcher is its ``torchrun`` line (the
    options the spec holds, spelled as TorchX's components spell them), any other the
    program and its arguments."""
    launcher = spec.launcher
    if launcher is None:
        entrypoint, *args = [_meant(a) for a in (*(spec.command or ("",)), *spec.args)]
        return entrypoint, args
    program = [torchrun.MODULE.short, launcher.module] if launcher.module else []
    program = program or [_meant(launcher.entrypoint or "")]
    options = []
    if launcher.kind == "torchrun":
        nodes, elastic = _max_nodes(spec), spec.elastic
        least = nodes if elastic is None else elastic.min_nodes
        options = [NNODES, f"{least}:{nodes}" if least != nodes else str(nodes)]
        options += [NPROCS, str(spec.nprocs)]
        if elastic is not None and elastic.max_restarts is not None:
            options += [MAX_RESTARTS, str(elastic.max_restarts)]
        if launcher.no_python:
            options.append(torchrun.NO_PYTHON.flag)
    return launcher.kind, [*options, *program, *(_meant(a) for a in launcher.args)]


# --- names --------------------------------------------------------------------------------------

SUFFIX_LENGTH: Final = 6  # a new job per run, as TorchX expects: 36**6 names per app name


def job_name(app_name: str, limit: int, suffix: str) -> str:
    """``<app name>-<suffix>`` as an RFC 1035 label of at most ``limit`` characters: the app
    name lowercased, other characters as ``-``, shortened to fit."""
    base = re.sub(r"[^a-z0-9]+", "-", app_name.lower()).strip("-")
    base = re.sub(r"^[^a-z]+", "", base) or "torchx"
    base = base[: max(limit - len(suffix) - 1, 1)].rstrip("-")
    return f"{base}-{suffix}"


def build(app: Any, options: Options, suffix: str, torchx_version: str) -> JobSpec:
    """The spec for ``app``: mapped once to learn the longest name its pods allow on the
    target (it depends on the number of nodes and the runtime), then named to fit."""
    try:
        chosen = target(options.target)
    except ValueError as exc:
        raise NotExpressible([Problem("-cfg target", str(exc))]) from None
    draft = to_spec(app, options, "torchx", torchx_version)
    name = job_name(app.name, chosen.name_limit(draft), suffix)
    return to_spec(app, options, name, torchx_version)
