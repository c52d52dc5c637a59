"""The version-neutral job description: frozen attrs classes, each field with its rule beside it.

Every class here is checked as a whole when it is built, from YAML or in Python alike
(``structuring.validate``): each field's value is structured by its type (nested parts may be
given as mappings, maps and lists become immutable), checked by the rule beside it, then the
rules between fields run, and all problems are raised together as one ``SpecError``.
Kubernetes objects users already know (volumes, tolerations, affinity, EnvVar) stay plain
(immutable) mappings in their Kubernetes shape, so they can be pasted from existing manifests.
"""

# Annotations are evaluated (no `from __future__ import annotations`): cattrs reads the field
# types, which it would otherwise compile from strings, at every cold start.
import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import attrs
from attrs import field, frozen

from kfcompile.spec import additions, object_paths, pod_rules, resource_rules, rules, structuring
from kfcompile.spec import k8s_rules as k8s
from kfcompile.spec.errors import Problem, SpecError
from kfcompile.spec.frozen import FrozenMap, plain

LauncherKind = Literal["torchrun", "python"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode"]
CleanPodPolicy = Literal["All", "Running", "None"]
RdzvBackend = Literal["c10d", "etcd", "etcd-v2"]
RuntimeKind = Literal["ClusterTrainingRuntime", "TrainingRuntime"]

Rule = Callable[[Any], Iterable[tuple[str, str]]]

DEFAULT_RUNTIME = "torch-distributed"
# The default of every map field: one shared empty map (immutable), so a spec's __init__ has
# no factory to call per field.
EMPTY: FrozenMap[str, Any] = FrozenMap()


def _rule(check: Rule, doc: str, load: Callable[[Any], Any] | None = None, **kwargs: Any) -> Any:
    """A field whose value ``check`` validates; ``doc`` feeds the reference and JSON Schema;
    ``load`` turns YAML data into the field's type where the plain type hook is too strict."""
    metadata: dict[str, Any] = {"rule": check, "doc": doc}
    if load is not None:
        metadata["load"] = load
    return field(metadata=metadata, **kwargs)


def _doc(doc: str, **kwargs: Any) -> Any:
    return field(metadata={"doc": doc}, **kwargs)


def quantity_text(value: Any) -> str | None:
    """Quantities may be written as YAML numbers (``cpu: 0.5``), as Kubernetes allows."""
    value = plain(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    raise TypeError(f"must be a quantity such as 500m, 2 or 64Gi, got {structuring.kind_of(value)}")


def quantity_map(value: Any) -> Mapping[str, str]:
    """A map of resource name -> quantity; every bad entry is reported under its key."""
    if not isinstance(value, Mapping):
        raise TypeError(f"must be a mapping of quantities, got {structuring.kind_of(value)}")
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for k, v in value.items():
        at = object_paths.key(str(k)).lstrip(".")
        try:
            if not isinstance(k, str):
                raise TypeError(f"must be a string, got {structuring.kind_of(k)}")
            text = quantity_text(v)
            if text is None:
                raise TypeError("must be a quantity such as 500m, 2 or 64Gi, got nothing (null)")
            out[plain(k)] = text
        except TypeError as exc:
            problems.append(Problem(at if isinstance(k, str) else f"{at} (key)", str(exc)))
    if problems:
        raise SpecError(problems)
    return FrozenMap(out)


def _quantity(doc: str) -> Any:
    return field(metadata={"rule": rules.quantity, "doc": doc, "load": quantity_text}, default=None)


def _job_annotations(m: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    """Annotations; a ProvisioningRequest parameter is given in one place."""
    yield from rules.annotation_map(m)
    for k in m:
        if k.startswith(additions.PROVISIONING_PREFIX):
            name = k.removeprefix(additions.PROVISIONING_PREFIX)
            yield f"{object_paths.key(k)} (key)", f"set it as provisioning_parameters.{name}"


def _pod_annotations(m: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    """Annotations; Kueue's topology request is given in one place."""
    yield from rules.annotation_map(m)
    fields = {v: k for k, v in additions.TOPOLOGY_ANNOTATIONS.items()}
    for k in m:
        if k in fields:
            yield f"{object_paths.key(k)} (key)", f"set it as topology.{fields[k]}"


def _provisioning_parameters(m: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    """Each name makes the annotation key ``provreq.kueue.x-k8s.io/<name>``."""
    for k in m:
        for _, message in rules.annotation_map({additions.PROVISIONING_PREFIX + k: ""}):
            yield f"{object_paths.key(k)} (key)", message


class _Checked:
    """Spec classes check themselves when built, however they are built; and show themselves
    as attrs would, with this one repr (attrs compiles one per class at import: a cold render
    paid 11 M instructions for them)."""

    __slots__ = ()

    def __attrs_post_init__(self) -> None:
        structuring.validate(self)

    def __repr__(self) -> str:
        spec_class: Any = type(self)
        shown = ", ".join(f"{a.name}={getattr(self, a.name)!r}" for a in attrs.fields(spec_class))
        return f"{spec_class.__name__}({shown})"


@frozen(kw_only=True, repr=False, slots=False)
class Launcher(_Checked):
    """How the container starts the training program, without hand-written shell."""

    kind: LauncherKind = _doc("`torchrun` (one process per GPU, rendezvous wired) or `python`.")
    entrypoint: str | None = _rule(
        rules.entrypoint,
        "Python file to run: a path in the image, or the file name of the inline `script`.",
        default=None,
    )
    module: str | None = _rule(
        rules.python_module,
        "Python module to run as `-m module` (instead of `entrypoint`), e.g. `pkg.train`.",
        default=None,
    )
    args: tuple[str, ...] = _doc("Arguments passed to the program.", default=())
    no_python: bool = _doc(
        "torchrun `--no-python`: each process runs `entrypoint` itself (an executable, e.g. "
        "a shell script), not with Python.",
        default=False,
    )


@frozen(kw_only=True, repr=False, slots=False)
class RuntimeRef(_Checked):
    """The (Cluster)TrainingRuntime a TrainJob runs on."""

    name: str = _rule(rules.dns1123_subdomain, "Runtime name.", default=DEFAULT_RUNTIME)
    kind: RuntimeKind = _doc(
        "`ClusterTrainingRuntime` or `TrainingRuntime`.", default="ClusterTrainingRuntime"
    )
    api_group: str = _doc("API group of the runtime.", default="trainer.kubeflow.org")


@frozen(kw_only=True, repr=False, slots=False)
class InitializerSource(_Checked):
    """Where a dataset or model comes from before training starts."""

    storage_uri: str = _rule(rules.storage_uri, "URI such as `hf://org/model` or `s3://bucket/x`.")
    env: Mapping[str, str] = _rule(
        rules.env_map, "Extra environment for the initializer.", default=EMPTY
    )
    secret_ref: str | None = _rule(
        rules.dns1123_subdomain, "Secret with credentials.", default=None
    )


@frozen(kw_only=True, repr=False, slots=False)
class Initializer(_Checked):
    """A TrainJob's dataset and model initializers: what the runtime's initializer jobs fetch
    before training starts."""

    dataset: InitializerSource | None = _doc("Dataset initializer.", default=None)
    model: InitializerSource | None = _doc("Model initializer.", default=None)


@frozen(kw_only=True, repr=False, slots=False)
class ElasticPolicy(_Checked):
    """PyTorch elastic training: the job may run on between min_nodes and max_nodes nodes."""

    min_nodes: int = _rule(rules.positive, "Fewest nodes the job runs on.")
    max_nodes: int = _rule(rules.positive, "Most nodes the job runs on.")
    rdzv_backend: RdzvBackend = _doc("Rendezvous backend.", default="c10d")
    rdzv_port: int = _rule(rules.port, "Rendezvous port on worker 0.", default=29400)
    max_restarts: int | None = _rule(rules.non_negative, "torchrun --max-restarts.", default=None)


@frozen(kw_only=True, repr=False, slots=False)
class SchedulingPolicy(_Checked):
    """Gang scheduling for PyTorchJob (Volcano / scheduler-plugins)."""

    min_available: int | None = _rule(
        rules.positive, "Pods that must start together.", default=None
    )
    queue: str | None = _doc("Volcano queue.", default=None)
    min_resources: Mapping[str, str] = _rule(
        rules.resource_map, "Resources the gang needs.", default=EMPTY, load=quantity_map
    )
    priority_class: str | None = _rule(rules.dns1123_subdomain, "PriorityClass.", default=None)
    schedule_timeout_seconds: int | None = _rule(rules.positive, "Gang timeout.", default=None)


def _group_name(v: str) -> Iterable[tuple[str, str]]:
    """Kueue refuses a PodSet group name that is a number (tas_validation.go)."""
    if not v or v.isdigit():
        yield "", "must be a name, not empty or a number"


def _topology_modes(t: "Topology") -> Iterable[tuple[str, str]]:
    """Kueue's PodSet topology request (pkg/controller/jobframework/tas_validation.go): one
    mode; a slice level with its size; a group only of required or preferred PodSets, and not
    with slices."""
    modes = [m for m in ("required", "preferred", "unconstrained") if getattr(t, m)]
    if len(modes) != 1:
        at = modes[1] if modes else ""
        yield at, "set exactly one of required, preferred or unconstrained"
    if (t.slice_required is None) != (t.slice_size is None):
        given, needs = "slice_size", "slice_required"
        if t.slice_size is None:
            given, needs = needs, given
        yield given, f"needs {needs}"
    if t.group_name is not None:
        if t.slice_required is not None or t.slice_size is not None:
            yield "group_name", "Kueue refuses a group with slices"
        elif t.required is None and t.preferred is None:
            yield "group_name", "needs required or preferred"


@frozen(kw_only=True, repr=False, slots=False)
class Topology(_Checked):
    """Kueue topology-aware scheduling of the job's pods: exactly one of ``required``,
    ``preferred`` (a level: the node label of a Kueue Topology level, e.g.
    ``cloud.provider.com/topology-block``) or ``unconstrained``; written as Kueue's PodSet
    annotations on the pod template."""

    required: str | None = _rule(
        rules.label_name,
        "Every pod in one domain of this level (`kueue.x-k8s.io/podset-required-topology`).",
        default=None,
    )
    preferred: str | None = _rule(
        rules.label_name,
        "One domain of this level if they fit, else the next level up "
        "(`kueue.x-k8s.io/podset-preferred-topology`).",
        default=None,
    )
    unconstrained: bool = _doc(
        "Anywhere the topology has room (`kueue.x-k8s.io/podset-unconstrained-topology`).",
        default=False,
    )
    slice_required: str | None = _rule(
        rules.label_name,
        "Each slice of `slice_size` pods in one domain of this level "
        "(`kueue.x-k8s.io/podset-slice-required-topology`).",
        default=None,
    )
    slice_size: int | None = _rule(
        rules.positive,
        "Pods per slice, with `slice_required` (`kueue.x-k8s.io/podset-slice-size`).",
        default=None,
    )
    group_name: str | None = _rule(
        _group_name,
        "Place a PyTorchJob's Master and Workers as one (`kueue.x-k8s.io/podset-group-name`).",
        default=None,
    )

    def __attrs_post_init__(self) -> None:
        structuring.validate(self, (_topology_modes,))


@frozen(kw_only=True, repr=False, slots=False)
class WorkDir(_Checked):
    """A local directory that ``submit`` uploads to a PersistentVolumeClaim the pods mount."""

    local: str = _rule(rules.entrypoint, "Local directory (relative to the spec file).")
    pvc: str = _rule(rules.dns1123_subdomain, "PersistentVolumeClaim holding the copy.")
    mount_path: str = _rule(rules.absolute_path, "Where the pods see it.")


@frozen(kw_only=True, repr=False, slots=False)
class JobSpec(_Checked):
    """One training job, independent of Training Operator / Trainer release."""

    # identity
    name: str = _rule(
        rules.job_name, "Job name: RFC 1035 label; each target checks that its pod names fit."
    )
    namespace: str | None = _rule(rules.dns1123_label, "Namespace.", default=None)
    labels: Mapping[str, str] = _rule(rules.label_map, "Labels on the job object.", default=EMPTY)
    annotations: Mapping[str, str] = _rule(
        _job_annotations, "Annotations on the job object.", default=EMPTY
    )
    runtime_labels: Mapping[str, str] = _rule(
        rules.label_map, "TrainJob: labels on the JobSet and Jobs it creates.", default=EMPTY
    )
    runtime_annotations: Mapping[str, str] = _rule(
        rules.annotation_map, "TrainJob: annotations on the JobSet and Jobs.", default=EMPTY
    )
    pod_labels: Mapping[str, str] = _rule(rules.label_map, "Labels on every pod.", default=EMPTY)
    pod_annotations: Mapping[str, str] = _rule(
        _pod_annotations, "Annotations on every pod.", default=EMPTY
    )

    # workload
    image: str = _rule(rules.image, "Container image.")
    image_pull_policy: PullPolicy | None = _doc(
        "`Always`, `IfNotPresent` or `Never`.", default=None
    )
    image_pull_secrets: tuple[str, ...] = _rule(
        rules.name_list, "Secrets for pulling the image.", default=()
    )
    command: tuple[str, ...] = _doc("Container command (instead of `launcher`).", default=())
    args: tuple[str, ...] = _doc("Container args (with `command`).", default=())
    launcher: Launcher | None = _doc("Run a Python program with torchrun or python.", default=None)
    script: str | None = _doc(
        "Inline program text, shipped in a ConfigMap and run by the launcher.", default=None
    )

    # scale
    num_nodes: int = _rule(rules.positive, "Number of nodes (pods).", default=1)
    gpus_per_node: int = _rule(rules.non_negative, "GPUs per node.", default=0)
    nprocs_per_node: int | Literal["auto"] | None = _rule(
        rules.nprocs,
        "Processes per node: an int or `auto`; default `gpus_per_node` or 1.",
        default=None,
    )
    gpu_resource: str = _rule(
        rules.extended_resource, "GPU resource name.", default=additions.DEFAULT_GPU
    )

    # resources
    cpu_request: str | None = _quantity("CPU request per node.")
    cpu_limit: str | None = _quantity("CPU limit per node.")
    memory_request: str | None = _quantity("Memory request per node.")
    memory_limit: str | None = _quantity("Memory limit per node.")
    extra_resource_requests: Mapping[str, str] = _rule(
        rules.container_resource_map,
        "Other resource requests, e.g. `vpc.amazonaws.com/efa`.",
        default=EMPTY,
        load=quantity_map,
    )
    extra_resource_limits: Mapping[str, str] = _rule(
        rules.container_resource_map, "Other resource limits.", default=EMPTY, load=quantity_map
    )
    shm_size: str | None = _rule(
        rules.quantity,
        "Size of a memory-backed /dev/shm (NCCL needs more than 64Mi).",
        default=None,
        load=quantity_text,
    )

    # environment
    env: Mapping[str, str] = _rule(
        rules.env_map, "Environment variables, name -> value.", default=EMPTY
    )
    env_list: tuple[Mapping[str, Any], ...] = _rule(
        rules.env_list, "Full Kubernetes EnvVar entries (for `valueFrom`).", default=()
    )
    secret_env: tuple[str, ...] = _rule(
        rules.env_names,
        "Variables whose values `submit` takes from your environment into a Secret.",
        default=(),
    )

    # placement
    tolerations: tuple[Mapping[str, Any], ...] = _rule(
        rules.tolerations, "Pod tolerations.", default=()
    )
    affinity: Mapping[str, Any] | None = _rule(rules.affinity, "Pod affinity.", default=None)
    node_selector: Mapping[str, str] = _rule(rules.label_map, "Pod node selector.", default=EMPTY)
    scheduling_gates: tuple[str, ...] = _rule(rules.gate_list, "Pod scheduling gates.", default=())
    service_account_name: str | None = _rule(
        rules.dns1123_subdomain, "Service account the pods run as.", default=None
    )
    termination_grace_period_seconds: int | None = _rule(
        rules.non_negative, "Seconds a pod gets to stop.", default=None
    )

    # storage
    volumes: tuple[Mapping[str, Any], ...] = _rule(rules.volumes, "Pod volumes.", default=())
    volume_mounts: tuple[Mapping[str, Any], ...] = _rule(
        rules.volume_mounts, "Mounts in the training container.", default=()
    )
    work_dir: WorkDir | None = _doc(
        "Local directory `submit` uploads to a PVC mounted in every pod.", default=None
    )

    # Kubeflow
    runtime_ref: RuntimeRef | None = _doc(
        "TrainJob runtime; default ClusterTrainingRuntime `torch-distributed`.", default=None
    )
    initializer: Initializer | None = _doc(
        "TrainJob dataset/model initializers (the runtime must have those jobs).", default=None
    )
    suspend: bool | None = _doc("Create the job suspended.", default=None)
    managed_by: str | None = _rule(
        rules.managed_by,
        "Controller that owns the job (`kueue.x-k8s.io/multikueue`).",
        default=None,
    )
    active_deadline_seconds: int | None = _rule(
        rules.positive, "Fail the job after this many seconds.", default=None
    )
    backoff_limit: int | None = _rule(rules.non_negative, "Retries before failing.", default=None)
    ttl_seconds_after_finished: int | None = _rule(
        rules.non_negative, "Delete the job this long after it finishes.", default=None
    )
    clean_pod_policy: CleanPodPolicy | None = _doc("Pods to delete when done.", default=None)
    restart_policy: RestartPolicy | None = _doc("Pod restart policy.", default=None)
    elastic: ElasticPolicy | None = _doc("PyTorch elastic policy.", default=None)

    # queueing
    queue: str | None = _rule(rules.label_value, "Kueue LocalQueue name.", default=None)
    priority_class: str | None = _rule(
        rules.label_value, "Kueue WorkloadPriorityClass.", default=None
    )
    scheduling_policy: SchedulingPolicy | None = _doc(
        "PyTorchJob gang-scheduling policy.", default=None
    )
    topology: Topology | None = _doc(
        "Kueue topology-aware scheduling of the pods (PodSet annotations on the pod template).",
        default=None,
    )
    provisioning_parameters: Mapping[str, str] = _rule(
        _provisioning_parameters,
        'Kueue ProvisioningRequest parameters, e.g. `ValidUntilSeconds: "3600"` '
        "(job annotations `provreq.kueue.x-k8s.io/<name>`).",
        default=EMPTY,
    )

    # escape hatches
    pod_spec_overrides: Mapping[str, Any] = _rule(
        rules.pod_overrides, "Deep-merged into the generated pod spec.", default=EMPTY
    )
    container_overrides: Mapping[str, Any] = _rule(
        rules.container_overrides,
        "Deep-merged into the generated training container.",
        default=EMPTY,
    )

    def __attrs_post_init__(self) -> None:
        structuring.validate(self, BETWEEN)

    # derived values
    @property
    def nprocs(self) -> int | Literal["auto"]:
        if self.nprocs_per_node is not None:
            return self.nprocs_per_node
        return self.gpus_per_node or 1

    @property
    def runtime(self) -> RuntimeRef:
        return self.runtime_ref or _default_runtime()

    @property
    def secret_name(self) -> str:
        """The Secret ``submit`` creates for ``secret_env``."""
        return additions.secret_name(self.name)

    @property
    def companions(self) -> tuple[additions.Companion, ...]:
        """The volumes this spec makes kfcompile add, in the order render writes them."""
        made = []
        if self.shm_size:
            made.append(additions.Companion("shm_size", additions.SHM_VOLUME, additions.SHM_DIR))
        if self.script is not None:
            made.append(
                additions.Companion("script", additions.SCRIPT_VOLUME, additions.SCRIPT_DIR)
            )
        if self.work_dir:
            mount_path = self.work_dir.mount_path
            made.append(additions.Companion("work_dir", additions.WORKDIR_VOLUME, mount_path))
        return tuple(made)

    @property
    def script_entrypoint(self) -> str:
        """File name of the inline script (in its ConfigMap and under ``SCRIPT_DIR``)."""
        entry = self.launcher.entrypoint if self.launcher else None
        return entry or "train.py"


# --- the rules between JobSpec's fields -------------------------------------------------------
# Each runs on its own (skipped only where it reads a field of the wrong type): one program to
# run, resources as render merges them (``resource_rules``), env names given once, volumes and
# mounts that refer to each other and to what kfcompile adds (``additions``), a label set in one
# place, elastic bounds around ``num_nodes``.


def _program(s: JobSpec) -> Iterator[tuple[str, str]]:
    """The launcher runs exactly one program: a file (``entrypoint``), a module (``module``) or
    the inline ``script`` (whose file name ``entrypoint`` may give)."""
    launcher = s.launcher
    if s.script is not None:
        if launcher is None:
            yield "script", "needs a launcher to run it"
        elif launcher.module is not None:
            yield "launcher.module", "an inline script runs as a file: set either module or script"
        elif launcher.entrypoint and not re.fullmatch(rules.CONFIGMAP_KEY, launcher.entrypoint):
            yield "launcher.entrypoint", "must be a file name (letters, digits, '-', '_', '.')"
        if len(s.script.encode()) > rules.CONFIGMAP_MAX_BYTES:
            yield "script", "larger than a ConfigMap holds (1 MiB): ship it in the image"
    elif launcher is None:
        return
    elif launcher.module is not None:
        if launcher.entrypoint is not None:
            yield "launcher.module", "set either entrypoint (a file) or module, not both"
    elif not launcher.entrypoint:
        yield "launcher.entrypoint", "required (or launcher.module, or an inline script)"
    elif launcher.entrypoint.startswith("-"):
        # python and torchrun would read it as an option: `-m` is what `module` is for.
        yield "launcher.entrypoint", "must not start with '-' (for `-m module` use launcher.module)"


def _no_python(s: JobSpec) -> Iterator[tuple[str, str]]:
    """torchrun's ``--no-python`` runs the program file itself: a module cannot be run so
    (torch/distributed/run.py ``config_from_args`` refuses ``--no-python`` with ``-m``), and an
    inline script must say its interpreter (execve(2) fails with ENOEXEC without ``#!``)."""
    launcher = s.launcher
    if launcher is None or not launcher.no_python:
        return
    if launcher.kind != "torchrun":
        yield "launcher.no_python", "torchrun's mode: for another program set command instead"
    if launcher.module is not None:
        yield "launcher.module", "torchrun runs no module with no_python: set entrypoint"
    if s.script is not None and not s.script.startswith("#!"):
        yield "script", "runs as a program itself (launcher.no_python): start it with '#!'"


def _items(value: Any, at: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The mappings of a list given in an override, each with its path."""
    for i, item in enumerate(value if isinstance(value, list | tuple) else ()):
        if isinstance(item, Mapping):
            yield f"{at}[{i}]", item


def _storage(s: JobSpec) -> Iterator[tuple[str, str]]:
    """Mounts refer to volumes; what kfcompile adds is reserved (``generated.reserved_names``,
    ``reserved_mounts``): no other volume takes its name, no other mount its place, compared as
    directories (``/dev/shm/`` is ``/dev/shm``), or one would silently replace the other."""
    defined = {v.get("name") for v in s.volumes if isinstance(v, Mapping)}
    volumes = [*_items(s.volumes, "volumes")]
    volumes += _items(s.pod_spec_overrides.get("volumes"), "pod_spec_overrides.volumes")
    yield from additions.reserved_names(s.name, s.companions, volumes)
    for at, m in _items(s.volume_mounts, "volume_mounts"):
        name = m.get("name")
        if isinstance(name, str) and name not in defined:
            yield f"{at}.name", f"no volume named {name!r} in volumes"
    yield from mount_points(s)


def mount_points(s: JobSpec, training: str | None = None) -> Iterator[tuple[str, str]]:
    """One mount per place in the training container, compared as directories: those
    kfcompile adds first, then ``volume_mounts`` and ``container_overrides``; and, where the
    target names its training container ``training``, that container's mounts in
    ``pod_spec_overrides.containers`` (the target checks those)."""
    mounted: dict[str, str] = {}  # mount point -> the field that mounts it
    yield from additions.reserved_mounts(s.companions, mounted)
    mounts = [*_items(s.volume_mounts, "volume_mounts")]
    mounts += _items(s.container_overrides.get("volumeMounts"), "container_overrides.volumeMounts")
    for at, item in _items(s.pod_spec_overrides.get("containers"), "pod_spec_overrides.containers"):
        if training is not None and item.get("name") == training:
            mounts += _items(item.get("volumeMounts"), f"{at}.volumeMounts")
    for at, m in mounts:
        path = m.get("mountPath")
        if isinstance(path, str) and path.startswith("/"):
            owner = mounted.setdefault(additions.mount_point(path), at)
            if owner != at:
                yield f"{at}.mountPath", f"already mounted by {owner}"


def _command_or_launcher(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.launcher is not None and s.command:
        yield "command", "set either command or launcher, not both"


def _args_need_command(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.args and not s.command:
        yield "args", "needs command (for launcher programs use launcher.args)"


def _env_unique(s: JobSpec) -> Iterator[tuple[str, str]]:
    return rules.env_unique(s.env, s.env_list, s.secret_env)


def _label_in_one_place(s: JobSpec) -> Iterator[tuple[str, str]]:
    for label, field_name in (
        (additions.QUEUE_LABEL, "queue"),
        (additions.PRIORITY_LABEL, "priority_class"),
    ):
        if label in s.labels and getattr(s, field_name):
            yield f"labels[{label!r}]", f"set by {field_name}; give it in one place"


def _elastic_bounds(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.elastic is not None and s.elastic.min_nodes > s.elastic.max_nodes:
        yield "elastic.min_nodes", "must not exceed elastic.max_nodes"


def _nodes_within_elastic_bounds(s: JobSpec) -> Iterator[tuple[str, str]]:
    e = s.elastic
    if e is not None and not e.min_nodes <= s.num_nodes <= e.max_nodes:
        yield "num_nodes", "must lie between elastic.min_nodes and elastic.max_nodes"


def _first_class(s: JobSpec) -> tuple[resource_rules.Amounts, resource_rules.Amounts]:
    """The requests and limits the typed fields write, in the order render writes them."""
    requests: resource_rules.Amounts = {}
    limits: resource_rules.Amounts = {}
    for name in ("cpu", "memory"):
        for group, into in (("request", requests), ("limit", limits)):
            value = getattr(s, f"{name}_{group}")
            if value is not None:
                into[name] = resource_rules.Amount(value, f"{name}_{group}")
    if s.gpus_per_node:
        requests[s.gpu_resource] = limits[s.gpu_resource] = resource_rules.Amount(
            str(s.gpus_per_node), "gpus_per_node"
        )
    for fields, extra, into in (
        ("extra_resource_requests", s.extra_resource_requests, requests),
        ("extra_resource_limits", s.extra_resource_limits, limits),
    ):
        for k, v in extra.items():
            into.setdefault(
                k,
                resource_rules.Amount(
                    v, f"{fields}{object_paths.key(k)}", limits_at="extra_resource_limits"
                ),
            )
    return requests, limits


def _resources_consistent(s: JobSpec) -> Iterator[tuple[str, str]]:
    """The rendered container's resources agree, whichever field wrote each amount; and no
    amount is written by two fields (an override would silently win over the typed field)."""
    for fields, extra in (
        ("extra_resource_requests", s.extra_resource_requests),
        ("extra_resource_limits", s.extra_resource_limits),
    ):
        for k in extra:
            if k in ("cpu", "memory"):
                yield f"{fields}{object_paths.key(k)}", f"use {k}_request / {k}_limit"
            elif k == s.gpu_resource:
                yield (
                    f"{fields}{object_paths.key(k)}",
                    "use gpus_per_node (it sets request and limit)",
                )
    requests, limits = _first_class(s)
    over = resource_rules.amounts(
        s.container_overrides.get("resources"), "container_overrides.resources", True
    )
    for typed, overriding in zip((requests, limits), over, strict=True):
        for name, amount in overriding.items():
            if name in typed:
                yield amount.path, f"also written by {typed[name].path}: give it in one place"
            else:
                typed[name] = amount
    yield from resource_rules.resources_agree(requests, limits, need_limits=True)
    if pod_rules.needs_qos_resource([*requests, *limits]):
        # told at the first hugepages amount written (ValidateContainerResourceRequirements)
        written = [*requests.items(), *limits.items()]
        first = next(a for name, a in written if k8s.is_hugepages_resource(name))
        yield first.path, "HugePages require cpu or memory"


# The rules that relate fields to each other. Each runs on its own, skipped only when it reads
# a field of the wrong type (``structuring.between``): one pass reports all the others.
BETWEEN: tuple[Callable[[JobSpec], Iterable[tuple[str, str]]], ...] = (
    _command_or_launcher,
    _args_need_command,
    _program,
    _no_python,
    _resources_consistent,
    _env_unique,
    _storage,
    _label_in_one_place,
    _elastic_bounds,
    _nodes_within_elastic_bounds,
)


@functools.cache
def _default_runtime() -> RuntimeRef:
    """Made once, when first asked: a checked value costs ~50 us to make, render asks thrice."""
    return RuntimeRef()
