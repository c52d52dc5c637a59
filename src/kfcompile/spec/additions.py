"""What kfcompile adds to a job itself, by name and shape: the volumes and mount paths of
``shm_size`` (a memory-backed ``/dev/shm``), the inline ``script`` (its ConfigMap) and
``work_dir`` (its claim), the Secret of ``secret_env``, the Kueue labels that ``queue`` and
``priority_class`` become, the Kueue annotations of ``topology`` and
``provisioning_parameters``, and the extended resources counted as GPUs. Render writes these
(``targets/special.py``, ``targets/base.py``) and the importer recognizes them (``importer/``)
from this one module, which also holds the rule that reserves them (``JobSpec`` runs it): a
spec may not use the names or mount paths for anything else. The names the Trainer takes in a
TrainJob's pods and namespace are reserved alike (``TRAINER_TOKEN_VOLUME``...)."""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

Object = dict[str, Any]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Kueue's topology-aware scheduling, asked on the pod template: each ``topology`` field's PodSet
# annotation (kueue apis/kueue/v1beta2/topology_types.go); ProvisioningRequest parameters,
# asked on the job: annotations with this prefix (pkg/controller/constants ProvReqAnnotationPrefix).
TOPOLOGY_ANNOTATIONS: Final = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "unconstrained": "kueue.x-k8s.io/podset-unconstrained-topology",
    "slice_required": "kueue.x-k8s.io/podset-slice-required-topology",
    "slice_size": "kueue.x-k8s.io/podset-slice-size",
    "group_name": "kueue.x-k8s.io/podset-group-name",
}
PROVISIONING_PREFIX: Final = "provreq.kueue.x-k8s.io/"
SHM_VOLUME, SHM_DIR = "dshm", "/dev/shm"
SCRIPT_VOLUME, SCRIPT_DIR = "kfcompile-script", "/opt/kfcompile/scripts"
WORKDIR_VOLUME = "workdir"
SECRET_SUFFIX, SCRIPT_SUFFIX = "-env", "-script"
EXECUTABLE = 0o755  # ConfigMapVolumeSource.defaultMode: files are 0644 unless told
# What the Trainer takes (KUBEFLOW.md, kubeflow/trainer#3956): with progress reporting on
# (TrainJobStatus gate, v2.2+) its controller adds this volume at this path to the trainer's pods,
# silently replacing a volume or mount of the spec's there; from v2.3 it keeps the runtime it
# ran a TrainJob with in the ConfigMap ``<job>-runtime-snapshot``, which must not exist before.
TRAINER_TOKEN_VOLUME, TRAINER_TOKEN_DIR = (
    "kubeflow-trainer-token",
    "/var/run/secrets/kubeflow/trainer",
)
RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"
TRAINER_TOKEN = "the Trainer (its progress-reporting token, which replaces this {})"

# Extended resources counted as the job's GPUs (``gpus_per_node``: requested and limited alike),
# the first the default ``gpu_resource``; an importer reads others as extra resources.
GPU_RESOURCES: Final = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "google.com/tpu",
)
DEFAULT_GPU: Final = GPU_RESOURCES[0]


def secret_name(job: str) -> str:
    """The Secret ``submit`` creates for the ``secret_env`` of job ``job``."""
    return f"{job}{SECRET_SUFFIX}"


def script_configmap_name(job: str) -> str:
    """The ConfigMap that holds the inline script of job ``job``."""
    return f"{job}{SCRIPT_SUFFIX}"


def runtime_snapshot_name(job: str) -> str:
    """The ConfigMap the Trainer (v2.3+) makes for TrainJob ``job``."""
    return f"{job}{RUNTIME_SNAPSHOT_SUFFIX}"


def script_configmap(job: str, namespace: str | None, file: str, script: Any) -> Object:
    """The inline script's ConfigMap: the one file ``file``, in the job's namespace."""
    meta: Object = {"name": script_configmap_name(job)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {file: script}}


class Companion(NamedTuple):
    """A volume kfcompile adds and where the training container mounts it."""

    field: str  # the spec field that makes it
    volume: str
    mount_path: str


def mount_point(path: str) -> str:
    """The directory a mount path names: ``/dev/shm/``, ``/dev//shm`` and ``/dev/./shm`` are
    one place (``posixpath.normpath``, and a leading ``//`` is ``/`` on Linux)."""
    return posixpath.normpath("/" + path.lstrip("/"))


# --- the rule that reserves them (``JobSpec`` runs it) -----------------------------------------


def reserved_names(
    job: str, made: Iterable[Companion], volumes: Iterable[tuple[str, Mapping[str, Any]]]
) -> Iterator[tuple[str, str]]:
    """No other volume (each with its path) takes the name of one kfcompile (``made``) or the
    Trainer adds, nor is the ConfigMap the Trainer makes for job ``job``."""
    named = {c.volume: c.field for c in made}
    named[TRAINER_TOKEN_VOLUME] = TRAINER_TOKEN.format("volume")
    snapshot = runtime_snapshot_name(job)
    for at, v in volumes:
        if v.get("name") in named:
            yield f"{at}.name", f"the name {v['name']!r} is used by {named[v['name']]}"
        for where, config_map in _config_maps(v):
            if config_map.get("name") == snapshot:
                yield (
                    f"{at}.{where}.name",
                    f"ConfigMap {snapshot} is the one the Trainer (v2.3+) makes for this job: "
                    "not the spec's to make or read",
                )


def _config_maps(volume: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The ConfigMaps a volume reads: its own, and those of a projected volume's sources."""
    own = volume.get("configMap")
    if isinstance(own, Mapping):
        yield "configMap", own
    projected = volume.get("projected")
    sources = projected.get("sources") if isinstance(projected, Mapping) else None
    for i, source in enumerate(sources if isinstance(sources, list | tuple) else ()):
        read = source.get("configMap") if isinstance(source, Mapping) else None
        if isinstance(read, Mapping):
            yield f"projected.sources[{i}].configMap", read


def reserved_mounts(
    made: Iterable[Companion], mounted: dict[str, str]
) -> Iterator[tuple[str, str]]:
    """The places kfcompile (``made``) and the Trainer mount their volumes, taken first in
    ``mounted`` (mount point -> the field that mounts it): the mounts checked after them cannot
    have them."""
    mounted.setdefault(mount_point(TRAINER_TOKEN_DIR), TRAINER_TOKEN.format("mount"))
    for c in made:
        place = f"{c.field}.mount_path" if c.field == "work_dir" else c.field
        if mounted.setdefault(mount_point(c.mount_path), c.field) != c.field:
            yield place, f"already mounted by {mounted[mount_point(c.mount_path)]}"


# The shapes take any value: the importer compares what it reads with them.
def mount(volume: Any, path: str) -> Object:
    return {"name": volume, "mountPath": path}


def shm_volume(volume: Any, size: Any) -> Object:
    """A memory-backed ``emptyDir`` with a size limit, what ``shm_size`` mounts at /dev/shm."""
    return {"name": volume, "emptyDir": {"medium": "Memory", "sizeLimit": size}}


def script_volume(job: str, executable: bool = False) -> tuple[Object, Object]:
    """The inline script's mount and volume (its ConfigMap) in job ``job``; an ``executable``
    script (torchrun ``--no-python`` runs the file itself) is mode 0755."""
    source: Object = {"name": script_configmap_name(job)}
    if executable:
        source["defaultMode"] = EXECUTABLE
    volume = {"name": SCRIPT_VOLUME, "configMap": source}
    return {**mount(SCRIPT_VOLUME, SCRIPT_DIR), "readOnly": True}, volume
