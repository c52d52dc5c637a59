"""Property tests for the compiler: placements, coverage, documented locations, determinism,
round trips, CRD validity and robustness against malformed input.

Generated specs come from ``strategies.py`` (plain data through ``kfcompile.structure``). Where a
test needs to know where a value belongs, the location is written here from ``KUBEFLOW.md``,
not read from the targets' placement tables.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import schema_check
import strategies as S
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kfcompile
from kfcompile import (
    TARGETS,
    JobSpec,
    SpecError,
    UnsupportedFeature,
    dump_spec,
    explain,
    load_spec,
    render,
    structure,
    unstructure,
)
from kfcompile.cli import main
from kfcompile.spec import k8s_schema, object_paths, yamlio

PT = "pytorchjob/v1"
V20, V21, V22, V23 = (f"trainjob/v2.{i}" for i in range(4))
TRAINJOB = (V20, V21, V22, V23)
ALL = (PT, *TRAINJOB)

CRD_FILES = {
    PT: "pytorchjobs-v1.9.4.yaml",
    V20: "trainjobs-v2.0.1.yaml",
    V21: "trainjobs-v2.1.0.yaml",
    V22: "trainjobs-v2.2.1.yaml",
    V23: "trainjobs-v2.3.0.yaml",
}

# KUBEFLOW.md: the default runtime has one replicated job and one container, both `node`.
NODE = "node"
# KUBEFLOW.md: the Torch runtime injects these; a TrainJob may not set them.
TRAINJOB_RESERVED_ENV = frozenset(
    {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)
# What the Training Operator sets in every PyTorchJob container with a Master (envvar.go).
PYTORCHJOB_RESERVED_ENV = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}
    | {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"}
)
RESERVED_ENV = {PT: PYTORCHJOB_RESERVED_ENV, **dict.fromkeys(TRAINJOB, TRAINJOB_RESERVED_ENV)}
# What torchrun sets for each process it starts (torch's LocalElasticAgent._start_workers).
TORCHRUN_ENV = frozenset(
    {"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"}
    | {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"}
    | {"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID"}
    | {"TORCHELASTIC_USE_AGENT_STORE"}
)
# KUBEFLOW.md: spec.managedBy values of TrainJob; the PyTorchJob v1.9 CRD's description lists
# the values the Training Operator accepts.
MANAGED_BY = {
    PT: ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"),
    **dict.fromkeys(
        TRAINJOB, ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
    ),
}
# KUBEFLOW.md: runtimePatches managers that are someone else's.
FOREIGN_MANAGERS = ("kueue.x-k8s.io/manager", "trainer.kubeflow.org/kubeflow-sdk")
MANAGER_SHAPE = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.[a-z]+/[A-Za-z0-9][-A-Za-z0-9_.]*")
# KUBEFLOW.md: command/args hold at most 128 items from v2.2.
MAX_COMMAND_ITEMS = {V22: 128, V23: 128}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"

# The fields every render writes whatever their value (the job's identity and scale).
ALWAYS_PLACED = frozenset({"name", "image", "num_nodes", "nprocs_per_node"})

FAST = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FIXTURES = settings(
    FAST,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)


# --- helpers ----------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal as JSON data: ``True`` is not ``1`` and ``"1"`` is not ``1``; dict order ignored."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def contains(actual: Any, wanted: Any) -> bool:
    """``wanted`` is a deep subset of ``actual``: mapping keys recursively, list items present."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return isinstance(actual, list) and all(any(contains(a, w) for a in actual) for w in wanted)
    return same(actual, wanted)


def read(doc: Any, path: str) -> Any:
    return object_paths.get(doc, object_paths.parse(path))


def default_of(a: Any) -> Any:
    d = a.default
    return d.factory() if isinstance(d, attrs.Factory) else d


def set_fields(spec: JobSpec) -> set[str]:
    """Top-level fields whose value differs from the default."""
    return {a.name for a in attrs.fields(JobSpec) if getattr(spec, a.name) != default_of(a)}


def top_field(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def try_render(spec: JobSpec, target: str) -> list[dict[str, Any]] | UnsupportedFeature:
    try:
        return render(spec, target)
    except UnsupportedFeature as exc:
        return exc


def pod_sets(spec: JobSpec, target: str) -> list[int]:
    """The sizes of the pod sets Kueue makes of the job's pod templates that carry the spec's
    pod annotations: a PyTorchJob's replica types (Master 1, Workers the rest; elastic: Workers
    only), a TrainJob's `node` job (KUBEFLOW.md)."""
    if target != PT:
        return [spec.num_nodes]
    if spec.elastic is not None:
        return [spec.num_nodes]
    return [1, spec.num_nodes - 1] if spec.num_nodes > 1 else [1]


def value_level_rejection(spec: JobSpec, target: str, path: str) -> bool:
    """Problems KUBEFLOW.md documents as value restrictions (not missing fields) of a target."""
    if path == "managed_by":
        return spec.managed_by is not None and spec.managed_by not in MANAGED_BY[target]
    reserved = RESERVED_ENV[target]
    if target == PT and spec.elastic is not None:  # Workers only: the elastic agent's settings
        reserved = frozenset({"PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_NNODES"})
        reserved |= {"PET_MAX_RESTARTS"} if spec.elastic.max_restarts is not None else set()
    if spec.launcher is not None and spec.launcher.kind == "torchrun":
        reserved |= TORCHRUN_ENV
    m = re.fullmatch(r"env\.(.+)", path)
    if m:
        return m[1] in reserved and m[1] in spec.env
    m = re.fullmatch(r"env_list\[(\d+)\]\.name", path)
    if m:
        return spec.env_list[int(m[1])].get("name") in reserved
    m = re.fullmatch(r"secret_env\[(\d+)\]", path)
    if m:
        return spec.secret_env[int(m[1])] in reserved
    if target == PT and path == "launcher.kind":
        # the operator's WORLD_SIZE counts nprocPerNode (default: the GPUs) per node
        launcher = spec.launcher
        python = launcher is not None and launcher.kind == "python"
        return python and spec.nprocs_per_node is None and spec.gpus_per_node > 1
    m = re.fullmatch(r"initializer\.(dataset|model)", path)
    if m and target in TRAINJOB:
        runtime = spec.runtime  # the upstream runtimes and the initializer jobs they have
        upstream = {"torch-distributed": set(), "torch-distributed-with-cache": {"dataset"}}
        known = runtime.kind == "ClusterTrainingRuntime" and runtime.name in upstream
        return known and m[1] not in upstream.get(runtime.name, set())
    if path in ("topology.slice_size", "topology.group_name") and spec.topology is not None:
        # Kueue's webhook (tas_validation.go) checks them against the pod sets carrying them.
        sizes = pod_sets(spec, target)
        if path == "topology.slice_size":
            return (spec.topology.slice_size or 0) > min(sizes)
        two = len(sizes) == 2 and min(sizes) == 1  # a group: two pod sets, one of a single pod
        return spec.topology.group_name is not None and not two
    if path in ("command", "args", "launcher") and target in MAX_COMMAND_ITEMS:
        limit = MAX_COMMAND_ITEMS[target]
        launcher = spec.launcher
        program = 2 + len(launcher.args) if launcher else 0
        return max(len(spec.command), len(spec.args), program) > limit
    return False


def check_trainjob_shape(job: dict[str, Any], target: str) -> None:
    """KUBEFLOW.md: overrides and patches name the runtime's job and container, `node`."""
    spec = job["spec"]
    for key in ("podSpecOverrides", "podTemplateOverrides"):
        for item in spec.get(key, []):
            assert item["targetJobs"] == [{"name": NODE}]
            pod = item if key == "podSpecOverrides" else item.get("spec", {})
            assert all(c["name"] == NODE for c in pod.get("containers", []))
    assert ("podSpecOverrides" in spec) <= (target == V20)
    assert ("podTemplateOverrides" in spec) <= (target == V21)
    assert ("runtimePatches" in spec) <= (target in (V22, V23))
    for patch in spec.get("runtimePatches", []):
        assert MANAGER_SHAPE.fullmatch(patch["manager"]), patch["manager"]
        assert patch["manager"] not in FOREIGN_MANAGERS
        jobs = patch["trainingRuntimeSpec"]["template"].get("spec", {}).get("replicatedJobs", [])
        for rj in jobs:
            assert rj["name"] == NODE
            pod = rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            for c in pod.get("containers", []):
                assert c["name"] == NODE
                # The webhook forbids env patches on the node container (use spec.trainer.env).
                assert "env" not in c


def check_pytorchjob_shape(job: dict[str, Any], spec: JobSpec) -> None:
    """KUBEFLOW.md: Master exactly 1, Worker at least 1 (an elastic job needs a Worker and has
    no Master), every replica a `pytorch` container with the image."""
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) <= {"Master", "Worker"}
    if "Master" in replicas:
        assert replicas["Master"]["replicas"] == 1
    if "Worker" in replicas:
        assert replicas["Worker"]["replicas"] >= 1
    if spec.elastic is not None:
        assert "Worker" in replicas
    assert sum(r["replicas"] for r in replicas.values()) == spec.num_nodes
    for replica in replicas.values():
        [main] = [c for c in replica["template"]["spec"]["containers"] if c["name"] == "pytorch"]
        assert main["image"] == spec.image


# --- a. placements read back, unsupported features name set fields ---------------------------


@FAST
@given(spec=S.job_specs())
def test_placements_read_back_or_unsupported_names_set_fields(spec: JobSpec) -> None:
    fields = set_fields(spec)
    for t in TARGETS:
        outcome = try_render(spec, t)
        if isinstance(outcome, UnsupportedFeature):
            assert outcome.problems
            for problem in outcome.problems:
                field = top_field(problem.path)
                assert field in fields, f"{t}: {problem} names a field the spec does not set"
                if field in ("pod_spec_overrides", "container_overrides"):
                    key = problem.path.removeprefix(f"{field}.")
                    assert key in getattr(spec, field), problem
                if problem.message.startswith(f"not supported by {t} ("):
                    supporters = re.fullmatch(
                        rf"not supported by {re.escape(t)} "
                        r"\((?:supported by: (.+)|no target supports it)\)",
                        problem.message,
                    )
                    assert supporters, problem.message
                    if supporters[1]:
                        named = supporters[1].split(", ")
                        assert t not in named and set(named) <= set(TARGETS)
                else:
                    # Not a missing field but a value the target rejects (KUBEFLOW.md).
                    assert value_level_rejection(spec, t, problem.path), f"{t}: {problem}"
            with pytest.raises(UnsupportedFeature):
                explain(spec, t)
            continue
        objects = outcome
        placements = explain(spec, t)
        assert placements
        for p in placements:
            assert 0 <= p.doc < len(objects)
            found = read(objects[p.doc], p.path)
            values = found if "*" in p.path else [found]
            assert values, f"{t}: {p.path} matched nothing"
            for value in values:
                if p.merge:
                    assert contains(value, p.value), f"{t}: {p.source} at {p.path}: {value!r}"
                else:
                    assert same(value, p.value), f"{t}: {p.source} at {p.path}: {value!r}"
        if t in TRAINJOB:
            check_trainjob_shape(objects[-1], t)
            assert objects[-1]["spec"]["trainer"]["numNodes"] == spec.num_nodes
        else:
            check_pytorchjob_shape(objects[-1], spec)


OVERRIDE_KEYS = {
    "pod_spec_overrides": sorted(k8s_schema.fields("PodSpec")),
    "container_overrides": sorted(k8s_schema.fields("Container") - {"name"}),
}
# The escape hatches are type-checked at load against the core/v1 schema: draw values that fit.
_CORE_V1 = json.loads(
    Path(kfcompile.__file__).parent.joinpath("spec", "k8s_core_v1.json").read_text()
)["definitions"]
_HATCH_OBJECT = {"pod_spec_overrides": "PodSpec", "container_overrides": "Container"}


# The fields the API server's pod rules check beyond their type (``pod_rules``), and a value
# each takes: another value of the type may be refused when the spec is loaded.
_PROBE = {"exec": {"command": ["true"]}}
_ACCEPTED: dict[str, Any] = {
    "activeDeadlineSeconds": 60,
    "dnsPolicy": "ClusterFirst",
    "hostname": "node",
    "livenessProbe": _PROBE,
    "nodeName": "node-1",
    "preemptionPolicy": "Never",
    "priorityClassName": "high",
    "readinessProbe": _PROBE,
    "restartPolicy": "Never",
    "runtimeClassName": "nvidia",
    "serviceAccountName": "trainer",
    "startupProbe": _PROBE,
    "subdomain": "jobs",
}


def _fitting(kind: Any) -> Any:
    """Values of one core/v1 field type: scalars of the type, empty lists and maps, objects
    with only their required keys."""
    if kind == "string":
        return S.free_text()
    if kind == "boolean":
        return st.booleans()
    if kind in ("int32", "int64", "integer"):
        return st.integers(min_value=0, max_value=2**31 - 1)
    if "list" in kind:
        return st.just([])
    if "ref" in kind:
        d = _CORE_V1[kind["ref"]]
        return st.fixed_dictionaries(
            {k: _fitting(d["properties"][k]) for k in d.get("required", ())}
        )
    return st.just({})


@FAST
@given(field=st.sampled_from(["pod_spec_overrides", "container_overrides"]), data=st.data())
def test_override_keys_name_real_fields(field: str, data: st.DataObject) -> None:
    """Escape-hatch keys must be Kubernetes field names; a known key reaches the output (merged
    into what was generated), or is refused where the generated value has another shape, or
    where a TrainJob release cannot express it."""
    keys = data.draw(
        st.lists(st.sampled_from(OVERRIDE_KEYS[field]), min_size=1, max_size=3, unique=True)
    )
    types = _CORE_V1[_HATCH_OBJECT[field]]["properties"]
    overrides = {
        k: data.draw(st.one_of(st.just(_ACCEPTED[k]), _fitting(types[k])))
        if k in _ACCEPTED
        else data.draw(_fitting(types[k]))
        for k in keys
    }
    try:
        spec = structure({**S.BASE, field: overrides})
    except SpecError as exc:  # only a value the pod rules check may be refused, named
        assert {p.at.parts[1] for p in exc.problems} <= set(_ACCEPTED) & set(keys), exc
        return
    generated = render(structure(S.BASE), PT)[-1]["spec"]["pytorchReplicaSpecs"]["Master"]
    base = generated["template"]["spec"]
    if field == "container_overrides":
        base = base["containers"][0]
    clash = {
        f"{field}.{k}"
        for k, v in overrides.items()
        if isinstance(base.get(k), dict | list) and type(v) is not type(base[k])
    }
    # A scalar or atomic list (no patch merge key in the core/v1 schema) that was generated is
    # replaced by a different one: given twice, that is refused too.
    clash |= {
        f"{field}.{k}"
        for k, v in overrides.items()
        if k in base
        and not isinstance(base[k], dict)
        and not (isinstance(base[k], list) and types[k].get("merge"))
        and v != base[k]
    }
    if field == "pod_spec_overrides" and "restartPolicy" in overrides:
        clash.add(f"{field}.restartPolicy")  # the operator writes the replica's over it
    outcome = try_render(spec, PT)
    if clash:
        assert isinstance(outcome, UnsupportedFeature)
        assert {p.path for p in outcome.problems} == clash
        return
    assert not isinstance(outcome, UnsupportedFeature), outcome
    merged = [p for p in explain(spec, PT) if p.source.startswith(f"{field}.")]
    assert {p.source for p in merged} == {f"{field}.{k}" for k in overrides}
    for p in merged:
        for value in read(outcome[p.doc], p.path):
            assert contains(value, p.value)
    for t in TRAINJOB:
        allowed = (
            POD_FIELDS[t]
            if field == "pod_spec_overrides"
            else CONTAINER_FIELDS[t] | {"image", "command", "args", "env", "resources"}
        )
        refused = {f"{field}.{k}" for k in overrides if k not in allowed}
        result = try_render(spec, t)
        if refused:
            assert isinstance(result, UnsupportedFeature)
            assert refused <= {p.path for p in result.problems}


_WORDS = st.lists(st.text("ab-=1", min_size=1, max_size=3), min_size=1, max_size=3)


def _training_container(job: dict[str, Any]) -> dict[str, Any]:
    if job["kind"] == "TrainJob":
        trainer: dict[str, Any] = job["spec"]["trainer"]
        return trainer
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    return dict(master["containers"][0])


@FAST
@given(
    target=st.sampled_from(ALL),
    command=st.none() | _WORDS,
    args=st.none() | _WORDS,
    over=st.fixed_dictionaries({}, optional={"command": _WORDS, "args": _WORDS}),
)
def test_override_command_and_args_are_the_overrides_whole(
    target: str, command: list[str] | None, args: list[str] | None, over: dict[str, list[str]]
) -> None:
    """Command and args are atomic (core/v1 Container, no patch merge key): the rendered
    container has the override's lists exactly, never the spec's with items added; where a
    spec field wrote a different list the override is refused, naming both."""
    written = {"command": command, "args": args if command else None}
    data = {**S.BASE, **{k: v for k, v in written.items() if v}, "container_overrides": over}
    twice = {k for k, v in over.items() if written[k] and written[k] != v}
    outcome = try_render(structure(data), target)
    if twice:
        assert isinstance(outcome, UnsupportedFeature)
        found = {p.path: p.message for p in outcome.problems}
        assert set(found) == {f"container_overrides.{k}" for k in twice}
        assert all(
            f"would replace what {k} writes" in found[f"container_overrides.{k}"] for k in twice
        )
        return
    assert not isinstance(outcome, UnsupportedFeature), outcome
    container = _training_container(outcome[-1])
    for k in ("command", "args"):
        assert container.get(k) == (over.get(k) or written[k])


@FAST
@given(key=st.text(S.YAML_SAFE_CHARACTERS, min_size=1, max_size=12))
def test_override_keys_that_are_no_field_are_refused(key: str) -> None:
    for field, known in OVERRIDE_KEYS.items():
        if key in known:
            continue
        with pytest.raises(SpecError) as info:
            structure({**S.BASE, field: {key: 1}})
        assert [p.path.startswith(field) for p in info.value.problems] == [True]
        assert "unknown field" in info.value.problems[0].message


# --- b. coverage: every set field lands somewhere ---------------------------------------------


def exempt_from_coverage(spec: JobSpec, target: str, field: str) -> bool:
    """Set fields that legitimately produce no placement of their own."""
    if field == "gpu_resource":
        # The resource name is no value but the key gpus_per_node lands under (when > 0).
        key = object_paths.key(spec.gpu_resource)
        gpu_paths = [p.path for p in explain(spec, target) if p.source == "gpus_per_node"]
        if spec.gpus_per_node == 0:
            return not gpu_paths
        return any(p.endswith(f".requests{key}") for p in gpu_paths) and any(
            p.endswith(f".limits{key}") for p in gpu_paths
        )
    # KUBEFLOW.md: numProcPerNode is int only from v2.2; omit it for auto.
    return field == "nprocs_per_node" and spec.nprocs_per_node == "auto" and target in (V22, V23)


@FAST
@given(spec=S.job_specs())
def test_every_set_field_is_placed(spec: JobSpec) -> None:
    fields = set_fields(spec)
    rendered_somewhere = False
    for t in TARGETS:
        outcome = try_render(spec, t)
        if isinstance(outcome, UnsupportedFeature):
            continue
        rendered_somewhere = True
        sources = {top_field(p.source) for p in explain(spec, t)}
        # `launcher` and `script` are placed under their own names (the command, the mount).
        missing = {f for f in fields - sources if not exempt_from_coverage(spec, t, f)}
        assert not missing, f"{t}: set but placed nowhere: {sorted(missing)}"
        extra = sources - fields - ALWAYS_PLACED
        assert not extra, f"{t}: placements from unset fields: {sorted(extra)}"
    if not (fields - ALWAYS_PLACED - {"gpus_per_node", "gpu_resource"}):
        assert rendered_somewhere  # a plain spec renders on some target


# --- c. values land where KUBEFLOW.md says -----------------------------------------------------


class Unsupported(Exception):
    """KUBEFLOW.md: the target has no place for these fields."""

    def __init__(self, *fields: str) -> None:
        super().__init__(*fields)
        self.fields = fields


class Rejected(Exception):
    """KUBEFLOW.md: the target has the field but rejects this value."""

    def __init__(self, *fields: str) -> None:
        super().__init__(*fields)
        self.fields = fields


def named(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for item in items:
        if item.get("name") == name:
            return item
    item = {"name": name}
    items.append(item)
    return item


class Model:
    """The expected job object: the base spec's output, edited where KUBEFLOW.md puts values.

    ``rendered`` is what the compiler produced (or None), consulted only for names KUBEFLOW.md
    leaves to the compiler (the patch manager, the shm and script volume names, torchrun flags).
    """

    def __init__(self, target: str, doc: dict[str, Any], rendered: list[Any] | None) -> None:
        self.t = target
        self.doc = doc
        self.rendered = rendered

    @property
    def spec(self) -> dict[str, Any]:
        return self.doc["spec"]

    def actual(self) -> dict[str, Any]:
        assert self.rendered is not None, f"{self.t}: expected the spec to render"
        job: dict[str, Any] = self.rendered[-1]
        return job

    # PyTorchJob
    def replicas(self) -> list[dict[str, Any]]:
        return list(self.spec["pytorchReplicaSpecs"].values())

    def run_policy(self) -> dict[str, Any]:
        return self.spec.setdefault("runPolicy", {})

    # TrainJob
    def trainer(self) -> dict[str, Any]:
        return self.spec.setdefault("trainer", {})

    def _override(self, key: str) -> dict[str, Any]:
        items = self.spec.setdefault(key, [])
        if not items:
            items.append({"targetJobs": [{"name": NODE}]})
        item: dict[str, Any] = items[0]
        return item

    def _patch_template(self) -> dict[str, Any]:
        patches = self.spec.setdefault("runtimePatches", [])
        if not patches:
            actual = self.actual()["spec"].get("runtimePatches", [{}])
            patches.append({"manager": actual[0].get("manager", "<no runtimePatches>")})
        spec: dict[str, Any] = patches[0].setdefault("trainingRuntimeSpec", {})
        return spec.setdefault("template", {})

    def _replicated_job(self) -> dict[str, Any]:
        spec = self._patch_template().setdefault("spec", {})
        return named(spec.setdefault("replicatedJobs", []), NODE)

    def _pod_template(self) -> dict[str, Any]:
        job_spec = self._replicated_job().setdefault("template", {}).setdefault("spec", {})
        template: dict[str, Any] = job_spec.setdefault("template", {})
        return template

    # both
    def pods(self) -> list[dict[str, Any]]:
        """Pod specs (TrainJob: the pod part of the override or patch)."""
        if self.t == PT:
            return [r["template"]["spec"] for r in self.replicas()]
        if self.t == V20:
            return [self._override("podSpecOverrides")]
        if self.t == V21:
            return [self._override("podTemplateOverrides").setdefault("spec", {})]
        return [self._pod_template().setdefault("spec", {})]

    def pod_metas(self, field: str) -> list[dict[str, Any]]:
        if self.t == PT:
            return [r["template"].setdefault("metadata", {}) for r in self.replicas()]
        if self.t == V20:
            raise Unsupported(field)  # v2.0 overrides carry no pod metadata
        if self.t == V21:
            return [self._override("podTemplateOverrides").setdefault("metadata", {})]
        return [self._pod_template().setdefault("metadata", {})]

    def containers(self) -> list[dict[str, Any]]:
        """The training container (TrainJob: its entry in the override or patch)."""
        name = "pytorch" if self.t == PT else NODE
        return [named(pod.setdefault("containers", []), name) for pod in self.pods()]

    def main(self) -> list[dict[str, Any]]:
        """Where image, command, env and resources go: the container, or spec.trainer."""
        return (
            [named(pod["containers"], "pytorch") for pod in self.pods()]
            if self.t == PT
            else [self.trainer()]
        )

    def resources(self) -> list[dict[str, Any]]:
        if self.t == PT:
            return [c.setdefault("resources", {}) for c in self.main()]
        return [self.trainer().setdefault("resourcesPerNode", {})]

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.doc["metadata"]
        return meta

    def nprocs(self, value: int | str) -> None:
        if self.t == PT:
            self.spec["nprocPerNode"] = str(value)  # a string: auto, cpu, gpu or digits
        elif self.t in (V20, V21) or value != "auto":
            self.trainer()["numProcPerNode"] = value  # int-or-string until v2.1, then int
        else:
            self.trainer().pop("numProcPerNode", None)  # v2.2+: omit the field to get auto


def _pod_field(key: str, unsupported_on: tuple[str, ...] = ()) -> Any:
    def expect(m: Model, d: dict[str, Any]) -> None:
        if m.t in unsupported_on:
            raise Unsupported(d["field"])
        for pod in m.pods():
            pod[key] = copy.deepcopy(d["value"])

    return expect


def _run_field(key: str, trainjob_from: tuple[str, ...] = ()) -> Any:
    """A run-policy value: PyTorchJob spec.runPolicy.<key>; TrainJob spec.<key> where listed."""

    def expect(m: Model, d: dict[str, Any]) -> None:
        if m.t == PT:
            m.run_policy()[key] = d["value"]
        elif m.t in trainjob_from:
            m.spec[key] = d["value"]
        else:
            raise Unsupported(d["field"])

    return expect


def _env(m: Model, d: dict[str, Any]) -> None:
    env = [{"name": k, "value": v} for k, v in d.get("env", {}).items()]
    env += [dict(item) for item in d.get("env_list", [])]
    rejected = {
        "env" if i < len(d.get("env", {})) else "env_list"
        for i, item in enumerate(env)
        if item["name"] in RESERVED_ENV[m.t]
    }
    if rejected:
        raise Rejected(*sorted(rejected))
    for target in m.main():
        target["env"] = copy.deepcopy(env)


def _secret_env(m: Model, d: dict[str, Any]) -> None:
    """Each name reads the key of that name from the job's own Secret (made by `submit`)."""
    if set(d["value"]) & RESERVED_ENV[m.t]:
        raise Rejected("secret_env")
    env = [
        {"name": n, "valueFrom": {"secretKeyRef": {"name": "job-env", "key": n}}}
        for n in d["value"]
    ]
    for target in m.main():
        target["env"] = env


def _work_dir(m: Model, d: dict[str, Any]) -> None:
    """The claim mounted at mount_path in every pod; `local` stays on the submitting machine."""
    volume = {"name": "workdir", "persistentVolumeClaim": {"claimName": d["value"]["pvc"]}}
    for pod in m.pods():
        pod["volumes"] = [volume]
    for container in m.containers():
        container["volumeMounts"] = [{"name": "workdir", "mountPath": d["value"]["mount_path"]}]


def _resources(m: Model, d: dict[str, Any]) -> None:
    for res in m.resources():
        for key, value in d.items():
            if key in ("cpu_request", "memory_request", "cpu_limit", "memory_limit"):
                group = "requests" if key.endswith("request") else "limits"
                res.setdefault(group, {})[key.split("_")[0]] = value
        for group in ("requests", "limits"):
            res.setdefault(group, {}).update(d.get(f"extra_resource_{group}", {}))
            if not res[group]:
                del res[group]


def _gpus(m: Model, d: dict[str, Any]) -> None:
    gpus, resource = d["gpus_per_node"], d.get("gpu_resource", "nvidia.com/gpu")
    for res in m.resources():
        # KUBEFLOW.md: GPUs in limits, and requests equal.
        res.setdefault("requests", {})[resource] = str(gpus)
        res.setdefault("limits", {})[resource] = str(gpus)
    m.nprocs(gpus)  # the default process count is one per GPU


def _image(m: Model, d: dict[str, Any]) -> None:
    for target in m.main():
        target["image"] = d["image"]


def _command(m: Model, d: dict[str, Any]) -> None:
    for target in m.main():
        target["command"] = list(d["command"])
        if d.get("args"):
            target["args"] = list(d["args"])


INJECTED_WITH_MASTER = frozenset({"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"})


def check_launcher_command(
    target: str, command: list[str], kind: str, program: list[str], env: set[str], master: bool
) -> None:
    """The launcher command runs ``program`` with ``kind``, and whatever the compiler adds
    between them refers only to variables that exist (KUBEFLOW.md: Kubernetes expands only
    ``$(VAR)`` of variables defined in the container; the Training Operator injects
    MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and PET_* only when there is a Master; the Torch
    runtime of TrainJob injects PET_*)."""
    assert command[0] == kind
    assert command[len(command) - len(program) :] == program, command
    added = command[1 : len(command) - len(program)]
    for word in added:
        assert "$" not in re.sub(r"\$\([A-Za-z_][A-Za-z0-9_]*\)", "", word), word
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", word):
            if target == PT:
                injected = master and (var in INJECTED_WITH_MASTER or var.startswith("PET_"))
            else:
                injected = var in TRAINJOB_RESERVED_ENV
            assert injected or var in env, f"{target}: {word} refers to ${var}, never set"


def _main_command(m: Model) -> list[list[str]]:
    job = m.actual()
    if m.t == PT:
        return [
            named(r["template"]["spec"]["containers"], "pytorch").get("command", [])
            for r in job["spec"]["pytorchReplicaSpecs"].values()
        ]
    return [job["spec"]["trainer"].get("command", [])]


def _launcher(m: Model, d: dict[str, Any]) -> None:
    launcher = d["launcher"]
    # `python -m module` and torchrun's `-m module` run a module; anything else a file
    run = ["-m", launcher["module"]] if "module" in launcher else [launcher["entrypoint"]]
    program = [*run, *launcher.get("args", [])]
    commands = _main_command(m)
    for command in commands:
        check_launcher_command(m.t, command, launcher["kind"], program, set(), master=True)
    for target, command in zip(m.main(), commands, strict=True):
        target["command"] = command


CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _script(m: Model, d: dict[str, Any]) -> None:
    """The script travels in a ConfigMap applied first, mounted into the training container,
    and the launcher runs it from there."""
    assert m.rendered is not None and len(m.rendered) == 2, f"{m.t}: ConfigMap + job expected"
    cm = m.rendered[0]
    assert (cm["apiVersion"], cm["kind"]) == ("v1", "ConfigMap")
    cm_name = cm["metadata"]["name"]
    assert DNS1123_SUBDOMAIN.fullmatch(cm_name) and len(cm_name) <= 253
    assert "namespace" not in cm["metadata"]  # the base spec has none; the job neither
    launcher = d["launcher"]
    [(file_name, text)] = cm["data"].items()
    assert text == d["script"]
    assert CONFIGMAP_KEY.fullmatch(file_name)
    if "entrypoint" in launcher:
        assert file_name == launcher["entrypoint"]

    actual = Model(m.t, copy.deepcopy(m.actual()), m.rendered)
    commands = _main_command(m)
    for pod, container, command, target in zip(
        actual.pods(), actual.containers(), commands, m.main(), strict=True
    ):
        [volume] = [v for v in pod["volumes"] if v.get("configMap", {}).get("name") == cm_name]
        [mount] = [x for x in container["volumeMounts"] if x["name"] == volume["name"]]
        program = [f"{mount['mountPath']}/{file_name}", *launcher.get("args", [])]
        check_launcher_command(m.t, command, launcher["kind"], program, set(), master=True)
        target["command"] = command
    for pod in m.pods():
        pod["volumes"] = [volume]
    for container in m.containers():
        container["volumeMounts"] = [mount]


def _volumes(m: Model, d: dict[str, Any]) -> None:
    for pod in m.pods():
        pod["volumes"] = copy.deepcopy(d["volumes"])
    if "volume_mounts" in d:
        for container in m.containers():
            container["volumeMounts"] = copy.deepcopy(d["volume_mounts"])


def _shm(m: Model, d: dict[str, Any]) -> None:
    """A memory-backed emptyDir of the asked size mounted at /dev/shm (its name is ours)."""
    actual = Model(m.t, copy.deepcopy(m.actual()), m.rendered)
    [mount] = actual.containers()[0]["volumeMounts"]
    assert mount["mountPath"] == "/dev/shm"
    volume = {"name": mount["name"], "emptyDir": {"medium": "Memory", "sizeLimit": d["value"]}}
    for pod in m.pods():
        pod["volumes"] = [volume]
    for container in m.containers():
        container["volumeMounts"] = [dict(mount)]


def _labels_on(where: str) -> Any:
    def expect(m: Model, d: dict[str, Any]) -> None:
        if where == "job":
            metas = [m.metadata()]
        elif where == "pod":
            metas = m.pod_metas(d["field"])
        elif m.t == PT:
            raise Unsupported(d["field"])
        elif m.t in (V20, V21):
            metas = [m.spec]  # spec.labels / spec.annotations reach the JobSet and Jobs
        else:
            # v2.2+: the JobSet's metadata and the Job template's metadata in the patch.
            metas = [
                m._patch_template().setdefault("metadata", {}),
                m._replicated_job().setdefault("template", {}).setdefault("metadata", {}),
            ]
        key = "labels" if d["field"].endswith("labels") else "annotations"
        for meta in metas:
            meta.setdefault(key, {}).update(d["value"])

    return expect


def _kueue_label(label: str) -> Any:
    def expect(m: Model, d: dict[str, Any]) -> None:
        m.metadata().setdefault("labels", {})[label] = d["value"]

    return expect


# KUBEFLOW.md (Kueue): the PodSet annotation of each topology field, on the pod template.
TOPOLOGY = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "unconstrained": "kueue.x-k8s.io/podset-unconstrained-topology",
    "slice_required": "kueue.x-k8s.io/podset-slice-required-topology",
    "slice_size": "kueue.x-k8s.io/podset-slice-size",
    "group_name": "kueue.x-k8s.io/podset-group-name",
}
PROVISIONING = "provreq.kueue.x-k8s.io/"  # KUBEFLOW.md: ProvisioningRequest parameters


def _topology(m: Model, d: dict[str, Any]) -> None:
    """Every pod template carries the annotations (v2.0 has no pod metadata). Kueue's webhook
    (tas_validation.go) refuses a slice larger than a pod set and a group that is not two pod
    sets, one of a single pod: a PyTorchJob's pod sets are its Master (1) and Workers, a
    TrainJob's annotations reach its `node` job (num_nodes) only."""
    n = d["num_nodes"]
    _num_nodes(m, d)
    if m.t == V20:
        raise Unsupported("topology")
    t = d["value"]
    pod_sets = ([1, n - 1] if n > 1 else [1]) if m.t == PT else [n]
    group = "group_name" in t and not (len(pod_sets) == 2 and min(pod_sets) == 1)
    if t.get("slice_size", 0) > min(pod_sets) or group:
        raise Rejected("topology")
    text = {k: "true" if v is True else str(v) for k, v in t.items()}
    for meta in m.pod_metas("topology"):
        meta.setdefault("annotations", {}).update({TOPOLOGY[k]: v for k, v in text.items()})


def _provisioning(m: Model, d: dict[str, Any]) -> None:
    annotations = m.metadata().setdefault("annotations", {})
    annotations.update({PROVISIONING + k: v for k, v in d["value"].items()})


def _namespace(m: Model, d: dict[str, Any]) -> None:
    m.metadata()["namespace"] = d["value"]


def _trainjob_only(m: Model, d: dict[str, Any]) -> None:
    if m.t == PT:
        raise Unsupported(d["field"])


def _runtime_ref(m: Model, d: dict[str, Any]) -> None:
    _trainjob_only(m, d)
    ref = d["value"]
    m.spec["runtimeRef"] = {
        "name": ref.get("name", "torch-distributed"),
        "apiGroup": ref.get("api_group", "trainer.kubeflow.org"),
        "kind": ref.get("kind", "ClusterTrainingRuntime"),
    }


# The default runtime `torch-distributed` has no initializer jobs (../shared/crds/runtimes), so
# Trainer would drop an initializer given with it; kfcompile must refuse it instead.
DEFAULT_RUNTIME_INITIALIZERS: frozenset[str] = frozenset()


def _initializer(m: Model, d: dict[str, Any]) -> None:
    _trainjob_only(m, d)
    if set(d["value"]) - DEFAULT_RUNTIME_INITIALIZERS:  # the spec names no runtime here
        raise Rejected("initializer")
    out: dict[str, Any] = {}
    for kind, source in d["value"].items():
        item: dict[str, Any] = {"storageUri": source["storage_uri"]}
        if source.get("env"):
            item["env"] = [{"name": k, "value": v} for k, v in source["env"].items()]
        if source.get("secret_ref"):
            item["secretRef"] = {"name": source["secret_ref"]}
        out[kind] = item
    m.spec["initializer"] = out


def _suspend(m: Model, d: dict[str, Any]) -> None:
    (m.run_policy() if m.t == PT else m.spec)["suspend"] = d["value"]


def _managed_by(m: Model, d: dict[str, Any]) -> None:
    if d["value"] not in MANAGED_BY[m.t]:
        raise Rejected("managed_by")
    (m.run_policy() if m.t == PT else m.spec)["managedBy"] = d["value"]


def _restart_policy(m: Model, d: dict[str, Any]) -> None:
    if m.t != PT:
        raise Unsupported("restart_policy")
    for replica in m.replicas():
        replica["restartPolicy"] = d["value"]


def _scheduling_policy(m: Model, d: dict[str, Any]) -> None:
    if m.t != PT:
        raise Unsupported("scheduling_policy")
    names = {
        "min_available": "minAvailable",
        "queue": "queue",
        "min_resources": "minResources",
        "priority_class": "priorityClass",
        "schedule_timeout_seconds": "scheduleTimeoutSeconds",
    }
    m.run_policy()["schedulingPolicy"] = {names[k]: v for k, v in d["value"].items()}


def _num_nodes(m: Model, d: dict[str, Any]) -> None:
    n = d["num_nodes"]
    if m.t != PT:
        m.trainer()["numNodes"] = n
        return
    # KUBEFLOW.md: Master.replicas exactly 1, Worker.replicas the rest (never Worker: 0).
    replicas = m.spec["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1
    if n > 1:
        replicas["Worker"] = {**copy.deepcopy(replicas["Master"]), "replicas": n - 1}


def _elastic(m: Model, d: dict[str, Any]) -> None:
    if m.t != PT:
        raise Unsupported("elastic")
    # An elastic job is Workers only (the operator needs a Worker; nothing is injected).
    replicas = m.spec["pytorchReplicaSpecs"]
    master = replicas.pop("Master")
    replicas["Worker"] = {**master, "replicas": d["num_nodes"]}
    e = d["elastic"]
    policy = {
        "minReplicas": e["min_nodes"],
        "maxReplicas": e["max_nodes"],
        "rdzvBackend": e.get("rdzv_backend", "c10d"),
        "rdzvPort": e.get("rdzv_port", 29400),
    }
    if "max_restarts" in e:
        policy["maxRestarts"] = e["max_restarts"]
    m.spec["elasticPolicy"] = policy


# KUBEFLOW.md, pod-level customisation by release. PyTorchJob templates take any PodSpec field.
POD_FIELDS: dict[str, frozenset[str]] = {
    V20: frozenset(
        {
            "serviceAccountName",
            "nodeSelector",
            "tolerations",
            "volumes",
            "schedulingGates",
            "initContainers",
            "containers",
        }
    ),
}
POD_FIELDS[V21] = POD_FIELDS[V20] | {"affinity", "imagePullSecrets"}
POD_FIELDS[V22] = POD_FIELDS[V21] | {"securityContext"}
POD_FIELDS[V23] = POD_FIELDS[V22] | {"terminationGracePeriodSeconds"}
CONTAINER_FIELDS = {
    V20: frozenset({"name", "env", "volumeMounts"}),
    V21: frozenset({"name", "env", "volumeMounts"}),
    V22: frozenset({"name", "env", "volumeMounts", "securityContext"}),
    V23: frozenset({"name", "env", "volumeMounts", "securityContext"}),
}


def _overrides(field: str) -> Any:
    def expect(m: Model, d: dict[str, Any]) -> None:
        allowed = POD_FIELDS if field == "pod_spec_overrides" else CONTAINER_FIELDS
        if m.t != PT:
            missing = [k for k in d["value"] if k not in allowed[m.t]]
            if missing:
                raise Unsupported(*(f"{field}.{k}" for k in missing))
        targets = m.pods() if field == "pod_spec_overrides" else m.containers()
        for target in targets:
            target.update(copy.deepcopy(d["value"]))

    return expect


def _pod_list(key: str, unsupported_on: tuple[str, ...] = ()) -> Any:
    def expect(m: Model, d: dict[str, Any]) -> None:
        if m.t in unsupported_on:
            raise Unsupported(d["field"])
        for pod in m.pods():
            pod[key] = [{"name": n} for n in d["value"]]

    return expect


def _image_pull_policy(m: Model, d: dict[str, Any]) -> None:
    # TrainJob: spec.trainer has no imagePullPolicy and patches cannot set it on `node`.
    if m.t != PT:
        raise Unsupported("image_pull_policy")
    for container in m.containers():
        container["imagePullPolicy"] = d["value"]


def _nprocs(m: Model, d: dict[str, Any]) -> None:
    m.nprocs(d["value"])


def _nothing(m: Model, d: dict[str, Any]) -> None:
    """gpu_resource without GPUs: nothing to name."""


EXPECT: dict[str, Any] = {
    "image": _image,
    "command": _command,
    "launcher": _launcher,
    "script": _script,
    "env": _env,
    "cpu": _resources,
    "memory": _resources,
    "extra_resources": _resources,
    "gpus_per_node": _gpus,
    "gpu_resource": _nothing,
    "nprocs_per_node": _nprocs,
    "shm_size": _shm,
    "secret_env": _secret_env,
    "work_dir": _work_dir,
    "tolerations": _pod_field("tolerations"),
    "node_selector": _pod_field("nodeSelector"),
    "affinity": _pod_field("affinity", unsupported_on=(V20,)),
    "service_account_name": _pod_field("serviceAccountName"),
    "termination_grace_period_seconds": _pod_field(
        "terminationGracePeriodSeconds", unsupported_on=(V20, V21, V22)
    ),
    "scheduling_gates": _pod_list("schedulingGates"),
    "image_pull_secrets": _pod_list("imagePullSecrets", unsupported_on=(V20,)),
    "image_pull_policy": _image_pull_policy,
    "volumes": _volumes,
    "volume_mounts": _volumes,
    "labels": _labels_on("job"),
    "annotations": _labels_on("job"),
    "pod_labels": _labels_on("pod"),
    "pod_annotations": _labels_on("pod"),
    "runtime_labels": _labels_on("runtime"),
    "runtime_annotations": _labels_on("runtime"),
    "namespace": _namespace,
    "runtime_ref": _runtime_ref,
    "initializer": _initializer,
    "suspend": _suspend,
    "managed_by": _managed_by,
    "active_deadline_seconds": _run_field("activeDeadlineSeconds", trainjob_from=(V22, V23)),
    "backoff_limit": _run_field("backoffLimit"),
    "ttl_seconds_after_finished": _run_field("ttlSecondsAfterFinished"),
    "clean_pod_policy": _run_field("cleanPodPolicy"),
    "restart_policy": _restart_policy,
    "elastic": _elastic,
    "queue": _kueue_label(QUEUE_LABEL),
    "priority_class": _kueue_label(PRIORITY_LABEL),
    "scheduling_policy": _scheduling_policy,
    "topology": _topology,
    "provisioning_parameters": _provisioning,
    "num_nodes": _num_nodes,
    "pod_spec_overrides": _overrides("pod_spec_overrides"),
    "container_overrides": _overrides("container_overrides"),
}


def test_every_feature_has_a_documented_expectation() -> None:
    assert set(EXPECT) == set(S.FEATURES)
    # Every JobSpec field but the required ones is some feature's field.
    optional = {a.name for a in attrs.fields(JobSpec) if a.default is not attrs.NOTHING}
    assert optional <= set(S.FEATURES) | {
        "args",
        "env_list",
        "cpu_request",
        "cpu_limit",
        "memory_request",
        "memory_limit",
        "extra_resource_requests",
        "extra_resource_limits",
    }


def check_base(doc: dict[str, Any], target: str) -> None:
    """The base spec (a name and an image) as KUBEFLOW.md describes the smallest job."""
    assert doc["metadata"] == {"name": S.BASE["name"]}
    if target == PT:
        assert (doc["apiVersion"], doc["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
        replicas = doc["spec"]["pytorchReplicaSpecs"]
        assert list(replicas) == ["Master"]  # one node: a Master only, never `Worker: 0`
        assert replicas["Master"]["replicas"] == 1
        [container] = replicas["Master"]["template"]["spec"]["containers"]
        assert (container["name"], container["image"]) == ("pytorch", S.BASE["image"])
        return
    assert (doc["apiVersion"], doc["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert doc["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    trainer = doc["spec"]["trainer"]
    assert (trainer["image"], trainer["numNodes"]) == (S.BASE["image"], 1)
    assert set(doc["spec"]) == {"runtimeRef", "trainer"}  # nothing to override or patch


def expectation(
    feature: str, data: dict[str, Any], target: str, rendered: list[Any] | None
) -> tuple[dict[str, Any] | None, Unsupported | Rejected | None]:
    base = render(structure(S.BASE), target)
    assert len(base) == 1
    check_base(base[0], target)
    model = Model(target, copy.deepcopy(base[0]), rendered)
    value = data.get(feature)
    try:
        EXPECT[feature](model, {**data, "field": feature, "value": value})
    except (Unsupported, Rejected) as exc:
        return None, exc
    return model.doc, None


@settings(FAST, max_examples=3 * settings().max_examples)  # many fields, each a few times
@given(fv=S.field_values())
def test_values_land_where_kubeflow_md_says(fv: tuple[str, dict[str, Any]]) -> None:
    feature, data = fv
    spec = structure({**S.BASE, **data})
    outcomes = {t: try_render(spec, t) for t in ALL}
    expected = {
        t: expectation(feature, data, t, None if isinstance(o, Exception) else o)
        for t, o in outcomes.items()
    }
    for t, outcome in outcomes.items():
        doc, why_not = expected[t]
        if isinstance(why_not, Unsupported):
            assert isinstance(outcome, UnsupportedFeature), f"{t} should refuse {why_not.fields}"
            problems = {p.path: p.message for p in outcome.problems}
            assert set(problems) == set(why_not.fields), problems
            for field, message in problems.items():
                supporters = [
                    other
                    for other in ALL
                    if not (
                        isinstance(expected[other][1], Unsupported)
                        and field in expected[other][1].fields
                    )
                ]
                where = (
                    f"supported by: {', '.join(supporters)}"
                    if supporters
                    else "no target supports it"
                )
                assert message == f"not supported by {t} ({where})"
        elif isinstance(why_not, Rejected):
            assert isinstance(outcome, UnsupportedFeature), f"{t} should reject {feature}"
            assert {top_field(p.path) for p in outcome.problems} == set(why_not.fields)
        else:
            assert not isinstance(outcome, UnsupportedFeature), f"{t}: {outcome}"
            assert len(outcome) == (2 if feature == "script" else 1)
            assert outcome[-1] == doc, f"{t}: {feature}"
            assert same(outcome[-1], doc), f"{t}: {feature} (types differ)"


@FAST
@given(
    kind=st.sampled_from(["torchrun", "python"]),
    entrypoint=S.entrypoints(),
    args=S.launcher_args(),
    num_nodes=st.integers(1, 16),
    data=st.data(),
)
def test_pytorchjob_launcher_uses_only_injected_variables(
    kind: str, entrypoint: str, args: list[str], num_nodes: int, data: st.DataObject
) -> None:
    """KUBEFLOW.md: only with a Master does the operator inject MASTER_ADDR, RANK...; an
    elastic job has no Master, so its command may not rely on them."""
    elastic = data.draw(st.none() | S.elastic_policies(num_nodes))
    spec_data: dict[str, Any] = {
        **S.BASE,
        "num_nodes": num_nodes,
        "launcher": {"kind": kind, "entrypoint": entrypoint, "args": args},
    }
    if elastic is not None:
        spec_data["elastic"] = elastic
    job = render(structure(spec_data), PT)[-1]
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert ("Master" in replicas) == (elastic is None)
    for replica in replicas.values():
        [container] = replica["template"]["spec"]["containers"]
        command = container["command"]
        check_launcher_command(
            PT, command, kind, [entrypoint, *args], set(), master=elastic is None
        )
        if kind == "torchrun" and elastic is not None:
            # torchrun learns the elastic range from its flags: nothing is injected.
            added = command[1 : len(command) - 1 - len(args)]
            span = f"{elastic['min_nodes']}:{elastic['max_nodes']}"
            assert f"--nnodes={span}" in added or span in added, command


# --- d. determinism and isolation -------------------------------------------------------------


def scramble(node: Any) -> None:
    """Mutate every container in place (to catch outputs aliasing the spec or each other)."""
    if isinstance(node, dict):
        for value in list(node.values()):
            scramble(value)
        node["__scrambled__"] = True
    elif isinstance(node, list):
        for value in node:
            scramble(value)
        node.append("__scrambled__")


@FAST
@given(spec=S.job_specs(), target=st.sampled_from(ALL))
def test_render_is_deterministic_and_isolated(spec: JobSpec, target: str) -> None:
    before = copy.deepcopy(unstructure(spec))
    first = try_render(spec, target)
    if isinstance(first, UnsupportedFeature):
        again = try_render(spec, target)
        assert isinstance(again, UnsupportedFeature)
        assert again.problems == first.problems
        assert unstructure(spec) == before
        return
    snapshot = copy.deepcopy(first)
    text = yamlio.dump_all(first)
    second = render(spec, target)
    assert same(second, snapshot)
    assert yamlio.dump_all(second) == text
    assert unstructure(spec) == before  # rendering does not touch the spec

    placements = explain(spec, target)
    scramble(first)
    scramble(second)
    for p in placements:
        scramble(p.value)
    third = render(spec, target)
    assert same(third, snapshot)
    assert yamlio.dump_all(third) == text
    assert unstructure(spec) == before
    assert explain(spec, target) == explain(spec, target)


# --- e. round trips ---------------------------------------------------------------------------


@FAST
@given(spec=S.job_specs())
def test_spec_round_trips(spec: JobSpec) -> None:
    text = dump_spec(spec)
    assert load_spec(text) == spec
    assert structure(unstructure(spec)) == spec
    assert dump_spec(load_spec(text)) == text


@FAST
@given(data=S.job_data())
def test_structure_keeps_what_was_written(data: dict[str, Any]) -> None:
    """The loader neither drops nor invents: unstructure gives back the data (defaults aside)."""
    spec = structure(data)
    back = unstructure(spec)
    assert structure(back) == spec
    for key, value in data.items():
        assert key in back or value == default_of(attrs.fields_dict(JobSpec)[key]), key


# --- f. CRD validity --------------------------------------------------------------------------


@FAST
@given(spec=S.job_specs())
def test_rendered_objects_pass_the_release_crds(spec: JobSpec) -> None:
    schema_check.require_shared()
    for t in ALL:
        outcome = try_render(spec, t)
        if isinstance(outcome, UnsupportedFeature):
            continue
        for obj in outcome:
            if obj["kind"] == "ConfigMap":
                assert schema_check.configmap_errors(obj) == [], t
                assert DNS1123_SUBDOMAIN.fullmatch(obj["metadata"]["name"])
                assert all(CONFIGMAP_KEY.fullmatch(k) for k in obj["data"])
            else:
                assert schema_check.crd_errors(obj, CRD_FILES[t]) == [], t
                name = obj["metadata"]["name"]
                assert len(name) <= 63  # v2.1+ CEL rule; pod names derive from it


# --- g. malformed input -----------------------------------------------------------------------

SPEC_KEYS = [a.name for a in attrs.fields(JobSpec)]
_keys = st.text(max_size=8)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(SPEC_KEYS) | _keys, children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def corrupted_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid spec's data with a few fields replaced, removed or added at random."""
    data = draw(S.job_data())
    for key in draw(st.lists(st.sampled_from(SPEC_KEYS), min_size=1, max_size=3)):
        action = draw(st.sampled_from(["replace", "remove", "nest"]))
        if action == "remove":
            data.pop(key, None)
        elif action == "nest" and isinstance(data.get(key), dict | list):
            inner = data[key]
            if isinstance(inner, dict):
                inner[draw(_keys)] = draw(json_values)
            else:
                inner.append(draw(json_values))
        else:
            data[key] = draw(json_values)
    if draw(st.booleans()):
        data[draw(_keys)] = draw(json_values)
    return data


random_structures = st.one_of(
    st.dictionaries(st.sampled_from(SPEC_KEYS) | _keys, json_values, max_size=6),
    corrupted_specs(),
    json_values,
)


def _outcome(build: Any) -> JobSpec | set[tuple[str, str]]:
    try:
        return build()  # type: ignore[no-any-return]
    except SpecError as exc:
        return {(p.path, p.message) for p in exc.problems}


@FAST
@given(data=S.job_data() | corrupted_specs())
def test_a_spec_built_in_python_is_checked_like_one_loaded(data: dict[str, Any]) -> None:
    """``JobSpec(**fields)`` with nested parts as plain data gives the same spec, or exactly the
    same problems, as loading that data."""
    fields = {k: v for k, v in data.items() if k in SPEC_KEYS}
    if not {"name", "image"} <= set(fields):  # Python itself refuses a call missing them
        return
    loaded = _outcome(lambda: structure(fields))
    built = _outcome(lambda: JobSpec(**fields))
    assert built == loaded


def check_cli(path: Path, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        spec: JobSpec | None = load_spec(text)  # raises SpecError and nothing else
    except SpecError as exc:
        assert exc.problems
        spec = None
    expect_ok = spec is not None and not isinstance(try_render(spec, target), UnsupportedFeature)

    capsys.readouterr()
    code = main(["render", str(path), "--target", target])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if expect_ok:
        assert spec is not None
        # The one thing a good spec prints on stderr: where secret_env values would come from.
        note = (
            f"{path}: note: secret_env reads Secret {spec.secret_name}," if spec.secret_env else ""
        )
        assert code == 0 and out
        assert err == "" if not note else err.startswith(note) and err.count("\n") == 1, err
        return
    assert code == 1
    assert out == ""
    lines = err.split("\n")
    assert lines.pop() == ""  # every line ends with a newline
    assert lines
    for line in lines:
        assert line.startswith((f"{path}: ", f"{path} ({target}): ")), line


@FIXTURES
@given(text=st.text(), target=st.sampled_from(ALL))
def test_cli_reports_random_text_without_traceback(
    text: str, target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8")
    check_cli(path, target, capsys)


@FIXTURES
@given(data=random_structures, as_json=st.booleans(), target=st.sampled_from(ALL))
# Found by hypothesis: a valid spec with secret_env prints its note on stderr.
@example(data={"name": "a", "image": "i", "secret_env": ["A"]}, as_json=True, target=V23)
def test_cli_reports_random_structures_without_traceback(
    data: Any,
    as_json: bool,
    target: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "job.yaml"
    # ensure_ascii=False: escaped non-BMP characters would read back as lone surrogates, which
    # capsys (unlike a real stderr) cannot print.
    text = (
        json.dumps(data, ensure_ascii=False)
        if as_json
        else yaml.safe_dump(data, allow_unicode=True)
    )
    path.write_text(text, encoding="utf-8")
    check_cli(path, target, capsys)


# --- edge cases the properties found (regressions) ---------------------------------------


def placements_read_back(spec: JobSpec, target: str) -> bool:
    objects = render(spec, target)
    for p in explain(spec, target):
        found = read(objects[p.doc], p.path)
        if not all(same(v, p.value) for v in (found if "*" in p.path else [found])):
            return False
    return True


def _rejected_or_consistent(data: dict[str, Any]) -> None:
    """A contradictory spec must be refused, or every placement must still read back."""
    try:
        spec = structure(data)
    except SpecError:
        return
    for t in ALL:
        assert placements_read_back(spec, t), t


@pytest.mark.parametrize(
    "text",
    ["name: job\nimage: img\n1: 2\n", "1: 2\n", "name: job\nimage: img\nlauncher: {1: x}\n"],
)
def test_non_string_keys_are_spec_errors(text: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(text)
    assert any(p.path.endswith('["1"]') for p in info.value.problems)


@pytest.mark.parametrize("target", ALL)
def test_mount_path_with_path_syntax_reads_back(target: str) -> None:
    spec = structure(
        {
            **S.BASE,
            "volumes": [{"name": "data", "emptyDir": {}}],
            "volume_mounts": [{"name": "data", "mountPath": '/data]x[y="z\\'}],
        }
    )
    assert placements_read_back(spec, target)


def test_elastic_max_nodes_bounds_the_name_length() -> None:
    """An elastic job scales to elastic.max_nodes pods: their hostnames must stay DNS labels."""
    name = "a" * 54  # `<name>-worker-9` is 63 characters; `<name>-worker-10` is 64
    render(structure({**S.BASE, "name": name, "elastic": {"min_nodes": 1, "max_nodes": 10}}), PT)
    with pytest.raises(UnsupportedFeature) as info:
        render(
            structure({**S.BASE, "name": name, "elastic": {"min_nodes": 1, "max_nodes": 11}}), PT
        )
    assert [p.path for p in info.value.problems] == ["name"]


def test_volume_mount_value_types_are_checked() -> None:
    with pytest.raises(SpecError) as info:
        structure({**S.BASE, "volume_mounts": [{"name": 1, "mountPath": 2}]})
    paths_found = {p.path for p in info.value.problems}
    assert {"volume_mounts[0].name", "volume_mounts[0].mountPath"} <= paths_found


# --- regressions: inputs that once slipped through -------------------------------------------


@pytest.mark.parametrize(
    ("field", "label"), [("queue", QUEUE_LABEL), ("priority_class", PRIORITY_LABEL)]
)
def test_label_conflicting_with_kueue_field(field: str, label: str) -> None:
    _rejected_or_consistent({**S.BASE, "labels": {label: "mine"}, field: "theirs"})


@pytest.mark.parametrize(
    "extra",
    [
        {"shm_size": "1Gi"},
        {"launcher": {"kind": "python"}, "script": "print(1)\n"},
    ],
    ids=["shm_size", "script"],
)
def test_user_mount_on_generated_mount_path(extra: dict[str, Any]) -> None:
    path = "/dev/shm" if "shm_size" in extra else kfcompile.spec.additions.SCRIPT_DIR
    _rejected_or_consistent(
        {
            **S.BASE,
            **extra,
            "volumes": [{"name": "data", "emptyDir": {}}],
            "volume_mounts": [{"name": "data", "mountPath": path}],
        }
    )


@pytest.mark.parametrize(
    "text",
    ["print(1)\r\nprint(2)\r\n", "a\n\x1b[31mred\n", "x\n\u2028y\n", "x\x85", "x\n\x00\n"],
    ids=["crlf", "escape", "line-separator", "nel", "nul"],
)
def test_yaml_dump_changes_text(text: str) -> None:
    spec = structure({**S.BASE, "launcher": {"kind": "python"}, "script": text})
    assert load_spec(dump_spec(spec)).script == text
    [configmap, _] = yamlio.load_all(yamlio.dump_all(render(spec, V23)))
    assert list(configmap["data"].values()) == [text]


@pytest.mark.parametrize("target", TRAINJOB)
def test_volume_mounted_twice_on_trainjob(target: str) -> None:
    schema_check.require_shared()
    spec = structure(
        {
            **S.BASE,
            "volumes": [{"name": "data", "emptyDir": {}}],
            "volume_mounts": [
                {"name": "data", "mountPath": "/a", "subPath": "a"},
                {"name": "data", "mountPath": "/b", "subPath": "b"},
            ],
        }
    )
    outcome = try_render(spec, target)
    if not isinstance(outcome, UnsupportedFeature):
        assert schema_check.crd_errors(outcome[-1], CRD_FILES[target]) == []


@pytest.mark.parametrize(
    "extra",
    [
        {"tolerations": [{"key": 5, "tolerationSeconds": "x"}]},
        {"volumes": [{"name": "x", "notASource": {}}]},
    ],
    ids=["toleration-types", "volume-source"],
)
def test_accepted_specs_render_crd_invalid_objects(extra: dict[str, Any]) -> None:
    schema_check.require_shared()
    try:
        spec = structure({**S.BASE, **extra})
    except SpecError:
        return
    job = render(spec, V23)[-1]
    assert schema_check.crd_errors(job, CRD_FILES[V23]) == []


@pytest.mark.parametrize("text", ["\x1f", "name: a\x07\n"])
def test_yaml_error_message_spans_lines(text: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(text)
    assert all("\n" not in str(p) for p in info.value.problems)


@pytest.mark.parametrize(
    "text",
    [
        'name: a\nimage: b\n"x\\ny": 1\n',
        'name: a\nimage: b\ntolerations: [{operator: Exists, "x\\ny": 1}]\n',
        'name: a\nimage: b\nenv_list: [{name: A, "x\\ny": 1}]\n',
    ],
    ids=["top-level", "toleration", "env_list"],
)
def test_unknown_key_with_newline_spans_lines(text: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(text)
    assert all("\n" not in str(p) for p in info.value.problems)


@pytest.mark.parametrize("field", ["pod_spec_overrides", "container_overrides"])
def test_override_key_star_is_no_field(field: str) -> None:
    """`*` is the wildcard of the PyTorchJob table, never a key that may replace a whole object."""
    with pytest.raises(SpecError) as info:
        structure({**S.BASE, field: {"*": False}})
    assert [p.path for p in info.value.problems] == [f'{field}["*"]']
