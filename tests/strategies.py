"""Hypothesis strategies for kfcompile: plain spec data that satisfies every ``JobSpec`` rule.

Specs are generated as plain data (what a user writes in YAML) and turned into ``JobSpec``s with
``kfcompile.structure``, so generation exercises the loader too. The rules the data must satisfy
come from ``src/kfcompile/spec/model.py`` and ``rules.py``: RFC 1035 job names short enough for the
pod
hostnames ``<name>-node-0-<rank>`` / ``<name>-worker-<rank>``, label keys and values, quantities
with limits not below requests, extended resources with a limit equal to the request, unique
environment names across ``env`` and ``env_list``, volumes with unique DNS-1123 names and exactly
one source, mounts of defined volumes at unique absolute paths, well-formed tolerations,
``launcher`` xor ``command``, a launcher running a file (``entrypoint``) or a module (``module``),
``script`` only with a launcher whose entrypoint is a bare file name,
``elastic.min_nodes <= num_nodes <= elastic.max_nodes``...

Most optional fields are absent in most examples (a per-example density decides how many are
set), so that many generated specs render on several targets.

Some inputs that look valid are left out because a rule refuses them (each has its own test in
``test_properties.py``): mounts at ``/dev/shm`` or the inline-script directory when kfcompile
mounts there, one volume mounted twice (TrainJob keys mounts by volume name), and labels using
the Kueue label keys together with ``queue``/``priority_class``.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

import kfcompile
from kfcompile import JobSpec
from kfcompile.spec.additions import SCRIPT_DIR

Data = dict[str, Any]

LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = LOWER + DIGITS
MIXED_ALNUM = string.ascii_letters + DIGITS

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Environment variables the TrainJob Torch runtime sets itself (KUBEFLOW.md), and those the
# Training Operator sets in a PyTorchJob (its envvar.go): each rejected where it is set.
RESERVED_ENV = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
)
MANAGERS = (
    "kueue.x-k8s.io/multikueue",
    "trainer.kubeflow.org/trainjob-controller",
    "kubeflow.org/training-operator",
)
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "example.com/accelerator")
EXTENDED_RESOURCES = ("vpc.amazonaws.com/efa", "example.com/fpga", "rdma/hca", "xilinx.com/u30")
# Mount paths kfcompile uses itself (a user mount there is refused).
RESERVED_MOUNT_PATHS = frozenset({"/dev/shm", SCRIPT_DIR})
RESERVED_VOLUME_NAMES = frozenset({"dshm", "kfcompile-script", "workdir"})


# --- grammar ----------------------------------------------------------------------------------


@st.composite
def _word(
    draw: DrawFn, first: str, middle: str, last: str, min_size: int = 1, max_size: int = 63
) -> str:
    """``first`` char, then ``middle`` chars, ending with a ``last`` char (one char: both)."""
    size = draw(st.one_of(st.integers(min_size, min(max_size, 8)), st.integers(min_size, max_size)))
    if size == 1:
        return draw(st.sampled_from(sorted(set(first) & set(last))))
    body = draw(st.text(alphabet=middle, min_size=size - 2, max_size=size - 2))
    return draw(st.sampled_from(first)) + body + draw(st.sampled_from(last))


def dns1123_labels(max_size: int = 63) -> SearchStrategy[str]:
    return _word(ALNUM, ALNUM + "-", ALNUM, max_size=max_size)


def dns1035_labels(max_size: int = 63) -> SearchStrategy[str]:
    return _word(LOWER, ALNUM + "-", ALNUM, max_size=max_size)


def dns1123_subdomains() -> SearchStrategy[str]:
    return st.lists(dns1123_labels(20), min_size=1, max_size=3).map(".".join)


def _name_parts(max_size: int = 63) -> SearchStrategy[str]:
    return _word(MIXED_ALNUM, MIXED_ALNUM + "-_.", MIXED_ALNUM, max_size=max_size)


def qualified_names() -> SearchStrategy[str]:
    """Label/annotation keys: ``[prefix/]name``."""
    prefixed = st.tuples(dns1123_subdomains(), _name_parts()).map("/".join)
    return st.one_of(_name_parts(), prefixed)


def label_values() -> SearchStrategy[str]:
    return st.one_of(st.just(""), _name_parts())


def nonempty_label_values() -> SearchStrategy[str]:
    return _name_parts()


def label_maps(max_size: int = 3) -> SearchStrategy[dict[str, str]]:
    return st.dictionaries(qualified_names(), label_values(), min_size=1, max_size=max_size)


def annotation_maps(max_size: int = 3) -> SearchStrategy[dict[str, str]]:
    return st.dictionaries(qualified_names(), free_text(), min_size=1, max_size=max_size)


# Any text UTF-8 can carry (lone surrogates cannot be encoded); yamlio escapes what YAML
# cannot hold raw.
YAML_SAFE_CHARACTERS = st.characters(codec="utf-8", exclude_categories=("Cs",))


def free_text(max_size: int = 30) -> SearchStrategy[str]:
    """Text a user could write in YAML (see ``YAML_SAFE_CHARACTERS`` for what is left out)."""
    return st.text(YAML_SAFE_CHARACTERS, max_size=max_size)


def words(max_size: int = 20) -> SearchStrategy[str]:
    """Command-line words: printable, no control characters."""
    return st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=max_size)


def env_names() -> SearchStrategy[str]:
    first = string.ascii_letters + "_-."
    rest = string.ascii_letters + DIGITS + "_-."
    generated = _word(first, rest, rest, max_size=30).filter(
        lambda n: not n.startswith("..") and n not in (".", "..")
    )
    common = st.sampled_from(["NCCL_DEBUG", "HF_HOME", "OMP_NUM_THREADS", "LOG_LEVEL"])
    return st.one_of(common, generated)


# --- quantities -------------------------------------------------------------------------------

CPU_SUFFIXES = ("", "m", "k")
MEMORY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "k", "M", "G")


def _number(units: int, decimal: bool) -> str:
    """``units`` tenths as text (``15`` -> ``1.5``), or whole units."""
    return f"{units // 10}.{units % 10}" if decimal else str(units)


def quantities(suffixes: tuple[str, ...] = MEMORY_SUFFIXES) -> SearchStrategy[str]:
    plain = st.builds(
        lambda n, d, s: _number(n, d) + s,
        st.integers(0, 100_000),
        st.booleans(),
        st.sampled_from(suffixes),
    )
    exponent = st.builds(lambda n, e: f"{n}e{e}", st.integers(0, 999), st.integers(0, 6))
    return st.one_of(plain, exponent)


@st.composite
def request_limit(draw: DrawFn, suffixes: tuple[str, ...]) -> tuple[str | None, str | None]:
    """A request and a limit (each may be absent) with the limit never below the request."""
    suffix = draw(st.sampled_from(suffixes))
    decimal = draw(st.booleans())
    low = draw(st.integers(0, 100_000))
    high = low + draw(st.integers(0, 100_000))
    request = _number(low, decimal) + suffix
    limit = _number(high, decimal) + suffix
    shape = draw(st.sampled_from(["both", "request", "limit"]))
    return (request if shape != "limit" else None, limit if shape != "request" else None)


# --- Kubernetes objects -----------------------------------------------------------------------


def tolerations() -> SearchStrategy[dict[str, Any]]:
    effects = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])

    @st.composite
    def one(draw: DrawFn) -> dict[str, Any]:
        t: dict[str, Any] = {}
        exists = draw(st.booleans())
        if exists:
            if draw(st.booleans()):
                t["key"] = draw(qualified_names())
            t["operator"] = "Exists"
        else:
            t["key"] = draw(qualified_names())
            if draw(st.booleans()):
                t["operator"] = "Equal"
            t["value"] = draw(label_values())
        if draw(st.booleans()):
            t["effect"] = draw(effects)
            # Kubernetes accepts tolerationSeconds only with the NoExecute effect.
            if t["effect"] == "NoExecute" and draw(st.booleans()):
                t["tolerationSeconds"] = draw(st.integers(0, 86_400))
        return t

    return one()


def affinities() -> SearchStrategy[dict[str, Any]]:
    expression = st.builds(
        lambda k, op, vs: {"key": k, "operator": op, "values": vs},
        qualified_names(),
        st.sampled_from(["In", "NotIn"]),
        st.lists(nonempty_label_values(), min_size=1, max_size=3),
    )
    node = st.builds(
        lambda exprs: {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": exprs}]
                }
            }
        },
        st.lists(expression, min_size=1, max_size=2),
    )
    pod_anti = st.builds(
        lambda weight, labels: {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": weight,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": labels},
                        },
                    }
                ]
            }
        },
        st.integers(1, 100),
        label_maps(2),
    )
    return st.one_of(node, pod_anti)


def volume_sources() -> SearchStrategy[dict[str, Any]]:
    def pvc(claim: str, read_only: bool | None) -> dict[str, Any]:
        source: dict[str, Any] = {"claimName": claim}
        if read_only is not None:
            source["readOnly"] = read_only
        return {"persistentVolumeClaim": source}

    empty_dir = st.one_of(
        st.just({}),
        st.just({"medium": "Memory"}),
        quantities().map(lambda q: {"sizeLimit": q}),
    )
    return st.one_of(
        st.builds(pvc, dns1123_subdomains(), st.none() | st.booleans()),
        empty_dir.map(lambda e: {"emptyDir": e}),
        dns1123_subdomains().map(lambda n: {"configMap": {"name": n}}),
        dns1123_subdomains().map(lambda n: {"secret": {"secretName": n}}),
    )


def mount_paths() -> SearchStrategy[str]:
    # Characters that mean something in kfcompile's path notation ([ ] = " \ .) included.
    segment = st.text(alphabet=ALNUM + '_-.[]="\\ @+', min_size=1, max_size=10).filter(
        lambda seg: seg not in (".", "..")
    )
    return (
        st.lists(segment, min_size=1, max_size=4)
        .map(lambda parts: "/" + "/".join(parts))
        .filter(lambda p: p not in RESERVED_MOUNT_PATHS)
    )


@st.composite
def volumes_and_mounts(
    draw: DrawFn, min_volumes: int = 1, with_mounts: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = draw(
        st.lists(
            dns1123_labels(30).filter(lambda n: n not in RESERVED_VOLUME_NAMES),
            min_size=min_volumes,
            max_size=3,
            unique=True,
        )
    )
    volumes = [{"name": n, **draw(volume_sources())} for n in names]
    mounts: list[dict[str, Any]] = []
    if with_mounts and names:
        # Each volume mounted at most once: the TrainJob CRDs key a container's volumeMounts
        # by name, so TrainJob targets refuse a second mount of one volume.
        mounted = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        paths = draw(
            st.lists(mount_paths(), min_size=len(mounted), max_size=len(mounted), unique=True)
        )
        for name, path in zip(mounted, paths, strict=True):
            mount: dict[str, Any] = {"name": name, "mountPath": path}
            if draw(st.booleans()):
                mount["readOnly"] = draw(st.booleans())
            if draw(st.booleans()):
                mount["subPath"] = draw(st.text(alphabet=ALNUM + "_-", min_size=1, max_size=8))
            mounts.append(mount)
    return volumes, mounts


def env_list_items(name: str) -> SearchStrategy[dict[str, Any]]:
    secret = st.builds(
        lambda n, k: {"secretKeyRef": {"name": n, "key": k}},
        dns1123_subdomains(),
        # IsConfigMapKey: not ".", "..", nor a "..something"
        st.text(alphabet=MIXED_ALNUM + "-_.", min_size=1, max_size=10).filter(
            lambda k: k != "." and not k.startswith("..")
        ),
    )
    field = st.sampled_from(["metadata.name", "metadata.namespace", "status.podIP"]).map(
        lambda p: {"fieldRef": {"fieldPath": p}}
    )
    return st.one_of(
        free_text().map(lambda v: {"name": name, "value": v}),
        st.one_of(secret, field).map(lambda src: {"name": name, "valueFrom": src}),
        st.just({"name": name}),
    )


@st.composite
def environments(
    draw: DrawFn, reserved: bool = False
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """``env`` and ``env_list`` with names unique across both; with ``reserved``, the names
    may include those TrainJob reserves for its runtime."""
    name = env_names()
    if reserved:
        name = st.one_of(name, st.sampled_from(RESERVED_ENV))
    names = draw(st.lists(name, min_size=1, max_size=5, unique=True))
    split = draw(st.integers(0, len(names)))
    env = {n: draw(free_text()) for n in names[:split]}
    listed = [draw(env_list_items(n)) for n in names[split:]]
    return env, listed


# Escape-hatch keys that touch no typed field (so they never overwrite a typed value). Which
# targets accept which keys is asserted in test_properties.py from KUBEFLOW.md.
# No initContainers: the upstream runtimes' `node` job has none, so TrainJob targets refuse them
# (tests/test_targets.py covers that rule).
POD_OVERRIDES: dict[str, SearchStrategy[Any]] = {
    "securityContext": st.fixed_dictionaries(
        {"runAsNonRoot": st.booleans()}, optional={"runAsUser": st.integers(1, 65_535)}
    ),
    "priorityClassName": dns1123_subdomains(),
    "dnsPolicy": st.sampled_from(["ClusterFirst", "Default", "ClusterFirstWithHostNet"]),
    "hostIPC": st.booleans(),
    "enableServiceLinks": st.booleans(),
}
CONTAINER_OVERRIDES: dict[str, SearchStrategy[Any]] = {
    "securityContext": st.fixed_dictionaries(
        {"allowPrivilegeEscalation": st.booleans()},
        optional={"readOnlyRootFilesystem": st.booleans()},
    ),
    "workingDir": mount_paths(),
    "tty": st.booleans(),
    "stdin": st.booleans(),
}


def overrides(table: dict[str, SearchStrategy[Any]]) -> SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: DrawFn) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(sorted(table)), min_size=1, max_size=2, unique=True))
        return {k: draw(table[k]) for k in keys}

    return build()


def images() -> SearchStrategy[str]:
    realistic = st.builds(
        lambda registry, repo, tag: f"{registry}{repo}:{tag}",
        st.sampled_from(["", "ghcr.io/", "nvcr.io/nvidia/", "registry.example.com:5000/"]),
        dns1123_labels(20),
        st.text(alphabet=MIXED_ALNUM + "._-", min_size=1, max_size=12),
    )
    # The spec only forbids whitespace: any printable token is an image reference to it.
    token = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30)
    return st.one_of(realistic, token)


def bare_file_names() -> SearchStrategy[str]:
    return st.text(alphabet=MIXED_ALNUM + "_-", min_size=1, max_size=12).map(lambda s: s + ".py")


def entrypoints() -> SearchStrategy[str]:
    path = st.lists(st.text(alphabet=ALNUM + "_-", min_size=1, max_size=8), max_size=3)
    return st.builds(lambda dirs, f: "/" + "/".join([*dirs, f]), path, bare_file_names())


def modules() -> SearchStrategy[str]:
    """What ``python -m`` runs: dotted identifiers (``pkg.train``, ``_x.y2``)."""
    identifier = st.builds(
        lambda first, rest: first + rest,
        st.sampled_from(string.ascii_letters + "_"),
        st.text(alphabet=MIXED_ALNUM + "_", max_size=8),
    )
    return st.lists(identifier, min_size=1, max_size=3).map(".".join)


def programs() -> SearchStrategy[Data]:
    """A launcher's program without an inline script: a file or a module."""
    return st.one_of(
        st.builds(lambda e: {"entrypoint": e}, entrypoints()),
        st.builds(lambda m: {"module": m}, modules()),
    )


def launcher_args() -> SearchStrategy[list[str]]:
    return st.lists(words(), max_size=4)


@st.composite
def program_fields(draw: DrawFn) -> Data:
    """``command``/``args``, or ``launcher`` (with an optional inline ``script``), or nothing."""
    mode = draw(st.sampled_from(["none", "command", "launcher", "script"]))
    if mode == "command":
        out: Data = {"command": draw(st.lists(words(), min_size=1, max_size=5))}
        if draw(st.booleans()):
            out["args"] = draw(st.lists(words(), min_size=1, max_size=5))
        return out
    if mode == "launcher":
        launcher: Data = draw(programs())
    elif mode == "script":
        launcher = {}
        if draw(st.booleans()):
            launcher["entrypoint"] = draw(bare_file_names())
    else:
        return {}
    if draw(st.booleans()):
        launcher["kind"] = draw(st.sampled_from(["torchrun", "python"]))
    else:
        launcher["kind"] = "torchrun"  # required by the spec: kind has no default
    if draw(st.booleans()):
        launcher["args"] = draw(launcher_args())
    out = {"launcher": launcher}
    if mode == "script":
        out["script"] = draw(free_text(max_size=200))
    return out


def initializer_sources() -> SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "storage_uri": st.sampled_from(
                ["hf://meta-llama/Llama-3.1-8B", "s3://bucket/data", "gs://b/x", "pvc://vol/p"]
            )
        },
        optional={
            "env": st.dictionaries(env_names(), free_text(), min_size=1, max_size=2),
            "secret_ref": dns1123_subdomains(),
        },
    )


@st.composite
def topologies(draw: DrawFn) -> dict[str, Any]:
    """Kueue's topology request: one mode (a level is a label key), then a slice level and
    size, or (with required or preferred) a pod set group name, which is no number."""
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained"]))
    out: dict[str, Any] = {mode: True if mode == "unconstrained" else draw(qualified_names())}
    extra = draw(st.sampled_from(["none", "slice", "group"]))
    if extra == "slice":
        out["slice_required"] = draw(qualified_names())
        out["slice_size"] = draw(st.integers(1, 4))
    elif extra == "group" and mode != "unconstrained":
        out["group_name"] = draw(_name_parts().filter(lambda n: not n.isdigit()))
    return out


def initializers() -> SearchStrategy[dict[str, Any]]:
    """An initializer with at least one of dataset/model (an empty one carries nothing)."""
    return st.one_of(
        st.fixed_dictionaries({"dataset": initializer_sources()}),
        st.fixed_dictionaries({"model": initializer_sources()}),
        st.fixed_dictionaries({"dataset": initializer_sources(), "model": initializer_sources()}),
    )


def runtime_refs() -> SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "name": dns1123_subdomains(),
            "kind": st.sampled_from(["ClusterTrainingRuntime", "TrainingRuntime"]),
            "api_group": st.just("trainer.kubeflow.org"),
        },
    )


def scheduling_policies() -> SearchStrategy[dict[str, Any]]:
    """A gang policy with at least one field set (an empty one carries nothing)."""
    fields: dict[str, SearchStrategy[Any]] = {
        "min_available": st.integers(1, 100),
        "queue": dns1123_labels(20),
        "min_resources": st.fixed_dictionaries(
            {"cpu": quantities(CPU_SUFFIXES)}, optional={"memory": quantities()}
        ),
        "priority_class": dns1123_subdomains(),
        "schedule_timeout_seconds": st.integers(1, 86_400),
    }

    @st.composite
    def build(draw: DrawFn) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, unique=True))
        return {k: draw(fields[k]) for k in keys}

    return build()


@st.composite
def elastic_policies(draw: DrawFn, num_nodes: int) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "min_nodes": draw(st.integers(1, num_nodes)),
        "max_nodes": num_nodes + draw(st.integers(0, 8)),
    }
    if draw(st.booleans()):
        policy["rdzv_backend"] = draw(st.sampled_from(["c10d", "etcd", "etcd-v2"]))
    if draw(st.booleans()):
        policy["rdzv_port"] = draw(st.integers(1, 65_535))
    if draw(st.booleans()):
        policy["max_restarts"] = draw(st.integers(0, 10))
    return policy


@st.composite
def extra_resources(draw: DrawFn, gpu_resource: str) -> Data:
    """``extra_resource_requests``/``limits``: extended resources with equal request and limit
    (or a limit alone), and ``ephemeral-storage`` (overcommittable) with limit >= request."""
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    names = [n for n in EXTENDED_RESOURCES if n != gpu_resource]
    for name in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
        amount = str(draw(st.integers(0, 64)))
        limits[name] = amount
        if draw(st.booleans()):
            requests[name] = amount
    if draw(st.booleans()):
        request, limit = draw(request_limit(MEMORY_SUFFIXES))
        if request is not None:
            requests["ephemeral-storage"] = request
        if limit is not None:
            limits["ephemeral-storage"] = limit
    out: Data = {}
    if requests:
        out["extra_resource_requests"] = requests
    if limits:
        out["extra_resource_limits"] = limits
    return out


# --- whole specs ------------------------------------------------------------------------------


def _max_name_length(max_pods: int) -> int:
    """Longest job name whose pod names are DNS labels on every target: JobSet's
    ``<name>-node-0-<rank>-<5 random>`` is the longest shape (initializer jobs: see job_data)."""
    return 63 - len("-node-0--xxxxx") - len(str(max_pods - 1))


# One strategy per independent optional field, drawn as a plain-data fragment.
SIMPLE_FIELDS: dict[str, Callable[[], SearchStrategy[Any]]] = {
    "namespace": lambda: dns1123_labels(),
    "labels": lambda: label_maps(),
    "annotations": lambda: annotation_maps(),
    "runtime_labels": lambda: label_maps(),
    "runtime_annotations": lambda: annotation_maps(),
    "pod_labels": lambda: label_maps(),
    "pod_annotations": lambda: annotation_maps(),
    "image_pull_policy": lambda: st.sampled_from(["Always", "IfNotPresent", "Never"]),
    "image_pull_secrets": lambda: st.lists(
        dns1123_subdomains(), min_size=1, max_size=3, unique=True
    ),
    "nprocs_per_node": lambda: st.one_of(st.just("auto"), st.integers(1, 16)),
    "shm_size": lambda: quantities(),
    "secret_env": lambda: st.lists(env_names(), min_size=1, max_size=3, unique=True),
    "work_dir": lambda: st.fixed_dictionaries(
        {
            "local": free_text(max_size=20).filter(str.strip),
            "pvc": dns1123_subdomains(),
            "mount_path": mount_paths(),
        }
    ),
    "tolerations": lambda: st.lists(tolerations(), min_size=1, max_size=3),
    "affinity": affinities,
    "node_selector": lambda: label_maps(),
    "scheduling_gates": lambda: st.lists(qualified_names(), min_size=1, max_size=3, unique=True),
    "service_account_name": lambda: dns1123_subdomains(),
    "termination_grace_period_seconds": lambda: st.integers(0, 3600),
    "runtime_ref": runtime_refs,
    "initializer": initializers,
    "suspend": st.booleans,
    "managed_by": lambda: st.sampled_from(MANAGERS),
    "active_deadline_seconds": lambda: st.integers(1, 10**6),
    "backoff_limit": lambda: st.integers(0, 100),
    "ttl_seconds_after_finished": lambda: st.integers(0, 10**6),
    "clean_pod_policy": lambda: st.sampled_from(["All", "Running", "None"]),
    "restart_policy": lambda: st.sampled_from(["Always", "OnFailure", "Never", "ExitCode"]),
    "queue": lambda: nonempty_label_values(),
    "priority_class": lambda: nonempty_label_values(),
    "scheduling_policy": scheduling_policies,
    "provisioning_parameters": lambda: st.dictionaries(
        _name_parts(), free_text(), min_size=1, max_size=3
    ),
    "pod_spec_overrides": lambda: overrides(POD_OVERRIDES),
    "container_overrides": lambda: overrides(CONTAINER_OVERRIDES),
}


def _sometimes(draw: DrawFn, percent: int) -> bool:
    """True with about ``percent``% chance; shrinks towards False (the field absent)."""
    return draw(st.integers(0, 99)) >= 100 - percent


@st.composite
def job_data(draw: DrawFn) -> Data:
    """Slotted data for a valid JobSpec (every field possible, most absent)."""
    density = draw(st.sampled_from([5, 15, 30]))
    data: Data = {"image": draw(images())}

    num_nodes = draw(st.one_of(st.just(1), st.integers(1, 8), st.integers(1, 2000)))
    if num_nodes != 1 or _sometimes(draw, density):
        data["num_nodes"] = num_nodes
    max_pods = num_nodes
    if _sometimes(draw, density):
        data["elastic"] = draw(elastic_policies(num_nodes))
        max_pods = data["elastic"]["max_nodes"]
    data["name"] = draw(dns1035_labels(_max_name_length(max_pods)))

    data.update(draw(program_fields()))

    gpu_resource = "nvidia.com/gpu"
    if _sometimes(draw, density):
        gpu_resource = draw(st.sampled_from(GPU_RESOURCES))
        data["gpu_resource"] = gpu_resource
    if _sometimes(draw, density * 2):
        data["gpus_per_node"] = draw(st.integers(0, 8))
    for kind, suffixes in (("cpu", CPU_SUFFIXES), ("memory", MEMORY_SUFFIXES)):
        if _sometimes(draw, density * 2):
            request, limit = draw(request_limit(suffixes))
            if request is not None:
                data[f"{kind}_request"] = request
            if limit is not None:
                data[f"{kind}_limit"] = limit
    if _sometimes(draw, density):
        data.update(draw(extra_resources(gpu_resource)))
    if _sometimes(draw, density):
        env, listed = draw(environments())
        if env:
            data["env"] = env
        if listed:
            data["env_list"] = listed
    if _sometimes(draw, density):
        volumes, mounts = draw(volumes_and_mounts(with_mounts=draw(st.booleans())))
        data["volumes"] = volumes
        if mounts:
            data["volume_mounts"] = mounts

    for name, strategy in SIMPLE_FIELDS.items():
        if _sometimes(draw, density):
            data[name] = draw(strategy())
    if _sometimes(draw, density):
        data["topology"] = draw(topologies())
    # Fields that may not repeat what others name: env names, mount paths.
    named = set(data.get("env", {})) | {item["name"] for item in data.get("env_list", [])}
    if "secret_env" in data:
        data["secret_env"] = [n for n in data["secret_env"] if n not in named] or None
    mounted = {m["mountPath"] for m in data.get("volume_mounts", [])}
    if "work_dir" in data and data["work_dir"]["mount_path"] in mounted:
        data["work_dir"] = None
    data = {k: v for k, v in data.items() if v is not None or k not in ("secret_env", "work_dir")}
    # Keep `labels` off the keys that `queue` and `priority_class` write (a rule refuses both).
    for field, label in (("queue", QUEUE_LABEL), ("priority_class", PRIORITY_LABEL)):
        if field in data and label in data.get("labels", {}):
            del data["labels"][label]
            if not data["labels"]:
                del data["labels"]
    if data.get("initializer"):  # `<name>-dataset-initializer-0-0-<5 random>`: at most 33
        data["name"] = data["name"][:33].rstrip("-")
    return data


def job_specs() -> SearchStrategy[JobSpec]:
    """Valid ``JobSpec``s, built through the loader (``kfcompile.structure``)."""
    return job_data().map(kfcompile.structure)


# --- one optional field on a base spec --------------------------------------------------------

BASE: Data = {"name": "job", "image": "registry.example.com/train:1"}


def _one(field: str, strategy: SearchStrategy[Any]) -> SearchStrategy[tuple[str, Data]]:
    return strategy.map(lambda value: (field, {field: value}))


@st.composite
def _with_companions(draw: DrawFn, field: str) -> tuple[str, Data]:
    """Fields that need another field to be valid, drawn with it."""
    if field == "command":
        data: Data = {"command": draw(st.lists(words(), min_size=1, max_size=5))}
        if draw(st.booleans()):
            data["args"] = draw(st.lists(words(), min_size=1, max_size=5))
        return field, data
    if field == "launcher":
        launcher = {"kind": draw(st.sampled_from(["torchrun", "python"]))}
        launcher.update(draw(programs()))
        if draw(st.booleans()):
            launcher["args"] = draw(launcher_args())
        return field, {"launcher": launcher}
    if field == "script":
        launcher = {"kind": draw(st.sampled_from(["torchrun", "python"]))}
        if draw(st.booleans()):
            launcher["entrypoint"] = draw(bare_file_names())
        if draw(st.booleans()):
            launcher["args"] = draw(launcher_args())
        script = draw(free_text(max_size=200))
        return field, {"launcher": launcher, "script": script}
    if field == "gpus_per_node":
        data = {"gpus_per_node": draw(st.integers(1, 8))}
        if draw(st.booleans()):
            data["gpu_resource"] = draw(st.sampled_from(GPU_RESOURCES))
        return field, data
    if field == "gpu_resource":  # without GPUs the resource name has nothing to name
        return field, {"gpu_resource": draw(st.sampled_from(GPU_RESOURCES))}
    if field in ("cpu", "memory"):
        request, limit = draw(request_limit(CPU_SUFFIXES if field == "cpu" else MEMORY_SUFFIXES))
        data = {}
        if request is not None:
            data[f"{field}_request"] = request
        if limit is not None:
            data[f"{field}_limit"] = limit
        return field, data
    if field == "extra_resources":
        data = draw(extra_resources("nvidia.com/gpu"))
        if not data:  # nothing drawn: one extended resource, as a limit alone
            name = draw(st.sampled_from(EXTENDED_RESOURCES))
            data = {"extra_resource_limits": {name: str(draw(st.integers(0, 64)))}}
        return field, data
    if field == "env":
        env, listed = draw(environments(reserved=True))
        data = {}
        if env:
            data["env"] = env
        if listed:
            data["env_list"] = listed
        return field, data
    if field == "volumes":
        volumes, _ = draw(volumes_and_mounts(with_mounts=False))
        return field, {"volumes": volumes}
    if field == "volume_mounts":
        volumes, mounts = draw(volumes_and_mounts())
        return field, {"volumes": volumes, "volume_mounts": mounts}
    if field == "num_nodes":
        return field, {"num_nodes": draw(st.integers(1, 64))}
    if field == "elastic":
        num_nodes = draw(st.integers(1, 16))
        return field, {"num_nodes": num_nodes, "elastic": draw(elastic_policies(num_nodes))}
    if field == "image":
        return field, {"image": draw(images())}
    if field == "topology":  # Kueue checks slices and groups against the pod sets' sizes
        return field, {"num_nodes": draw(st.integers(1, 6)), "topology": draw(topologies())}
    raise AssertionError(field)


COMPANION_FIELDS = (
    "command",
    "launcher",
    "script",
    "gpus_per_node",
    "gpu_resource",
    "cpu",
    "memory",
    "extra_resources",
    "env",
    "volumes",
    "volume_mounts",
    "num_nodes",
    "elastic",
    "image",
    "topology",
)
FEATURES = (*COMPANION_FIELDS, *SIMPLE_FIELDS)


def field_values(features: tuple[str, ...] = FEATURES) -> SearchStrategy[tuple[str, Data]]:
    """``(feature, data)``: ``data`` sets one optional field (plus any field it requires) to
    merge into ``BASE``. ``cpu``/``memory`` stand for the request/limit pair, ``env`` for
    ``env``/``env_list`` and ``extra_resources`` for the extra requests/limits."""
    options = [
        _one(f, SIMPLE_FIELDS[f]()) if f in SIMPLE_FIELDS else _with_companions(f) for f in features
    ]
    return st.one_of(options)
