"""The runtime a TrainJob names, as the cluster has it: a ClusterTrainingRuntime or
TrainingRuntime (``trainer.kubeflow.org/v1alpha1``) that submit's preflight reads. Pure.

What the job asks of it, checked before the job is sent (each would be accepted by the API
server and then run otherwise than asked, or never):

- every replicated job and container an override or patch names is the runtime's: Trainer v2.0
  to v2.2 apply them by name and ignore one the runtime lacks; v2.3 merges patches
  strategically and appends the missing job or container, broken (KUBEFLOW.md);
- an initializer the spec sets has the runtime's initializer job (the one labelled
  ``trainjob-ancestor-step: <kind>-initializer``, with a container of that name), which alone
  the Trainer fills in;
- the JobSet the Trainer makes has pod names that are DNS labels: the JobSet webhook refuses it
  otherwise, after the TrainJob was accepted (kubeflow/trainer#2735). For each replicated job
  the longest pod name is ``<name>-<job>-<replicas-1>-<completions-1>-abcde``; the Trainer
  sets the trainer's job (and ``node``) to one replica of ``numNodes`` completions, and each
  initializer's to one replica (``jobset_webhook.go``, the Trainer's ``jobset/builder.go``).

The runtime is what the cluster answered: its shape is checked, never trusted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from kfcompile.spec.model import JobSpec
from kfcompile.targets import base, trainjob

ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP: Final = "trainer"
INITIALIZER_STEPS: Final = {k: f"{k}-initializer" for k in trainjob.INITIALIZERS}
POD_SUFFIX: Final = "-{job}-{last_job}-{last_pod}-abcde"  # the webhook's stand-in suffix
CONTAINER_LISTS: Final = ("containers", "initContainers")


@frozen(repr=False, eq=False)
class ReplicatedJob:
    """One replicated job of a runtime, as far as the checks need it."""

    name: str
    replicas: int
    completions: int
    step: str | None  # its ``trainjob-ancestor-step`` label
    containers: Mapping[str, tuple[str, ...]]  # "containers"/"initContainers" -> their names

    def pod_suffix(self, num_nodes: int) -> str:
        """What the Trainer's JobSet adds to the job's name for this job's longest pod name."""
        if self.step == TRAINER_STEP or self.name == trainjob.NODE:
            replicas, completions = 1, num_nodes
        elif self.step in INITIALIZER_STEPS.values():
            replicas, completions = 1, self.completions
        else:
            replicas, completions = self.replicas, self.completions
        return POD_SUFFIX.format(job=self.name, last_job=replicas - 1, last_pod=completions - 1)


def _mapping(value: Any, *keys: str) -> Mapping[str, Any]:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _count(value: Any) -> int:
    """A replicas or completions count as the API defaults it (absent: 1)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _names(items: Any) -> tuple[str, ...]:
    return tuple(n for i in _items(items) if isinstance(n := i.get("name"), str))


def replicated_jobs(runtime: Mapping[str, Any]) -> tuple[ReplicatedJob, ...]:
    """The runtime's replicated jobs (``spec.template.spec.replicatedJobs``); what is not
    shaped like one is left out."""
    found = []
    for item in _items(_mapping(runtime, "spec", "template", "spec").get("replicatedJobs")):
        name = item.get("name")
        if not isinstance(name, str):
            continue
        job = _mapping(item, "template", "spec")
        pod = _mapping(job, "template", "spec")
        step = _mapping(item, "template", "metadata", "labels").get(ANCESTOR_LABEL)
        found.append(
            ReplicatedJob(
                name,
                _count(item.get("replicas")),
                _count(job.get("completions")),
                step if isinstance(step, str) else None,
                {key: _names(pod.get(key)) for key in CONTAINER_LISTS},
            )
        )
    return tuple(found)


@frozen(repr=False, eq=False)
class Named:
    """A replicated job (and a container of it) that the TrainJob's overrides or patches name."""

    at: str  # where, in the TrainJob
    job: str
    key: str | None = None  # "containers" / "initContainers"
    container: str | None = None


def _pods(job: Mapping[str, Any]) -> Iterator[tuple[str, Sequence[str], str, Mapping[str, Any]]]:
    """Each override's or patch's pod part: where it is, the replicated jobs it is for, where
    its pod fields are and they (Trainer v2.0 ``podSpecOverrides``, v2.1
    ``podTemplateOverrides``, v2.2+ ``runtimePatches``)."""
    spec = _mapping(job, "spec")
    for i, item in enumerate(_items(spec.get("podSpecOverrides"))):
        at = f"spec.podSpecOverrides[{i}]"
        yield at, _names(item.get("targetJobs")), at, item
    for i, item in enumerate(_items(spec.get("podTemplateOverrides"))):
        at = f"spec.podTemplateOverrides[{i}]"
        yield at, _names(item.get("targetJobs")), f"{at}.spec", _mapping(item, "spec")
    for i, patch in enumerate(_items(spec.get("runtimePatches"))):
        template = _mapping(patch, "trainingRuntimeSpec", "template", "spec")
        for j, item in enumerate(_items(template.get("replicatedJobs"))):
            at = f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            pod = _mapping(item, "template", "spec", "template", "spec")
            yield at, _names([item]), f"{at}.template.spec.template.spec", pod


def named(job: Mapping[str, Any]) -> Iterator[Named]:
    """What the TrainJob's overrides and patches name of its runtime."""
    for at, jobs, pod_at, pod in _pods(job):
        for name in jobs:
            yield Named(at, name)
            for key in CONTAINER_LISTS:
                for container in _names(pod.get(key)):
                    yield Named(f"{pod_at}.{key}[name={container}]", name, key, container)


def problems(spec: JobSpec, job: Mapping[str, Any], runtime: Mapping[str, Any]) -> list[str]:
    """What the TrainJob ``job`` (rendered from ``spec``) asks of ``runtime`` that it has not;
    one line each, saying how to fix it."""
    kind, name = spec.runtime.kind, spec.runtime.name
    jobs = {j.name: j for j in replicated_jobs(runtime)}
    has = ", ".join(jobs) or "none"
    use = "set runtime_ref to a runtime that has it, or drop it from the spec"
    out: list[str] = []
    for n in named(job):
        found = jobs.get(n.job)
        if found is None:
            if n.key is None:
                out.append(
                    f"{kind} {name} has no replicatedJob {n.job!r} (it has: {has}), which "
                    f"the TrainJob's {n.at} names: the Trainer would ignore it or add it "
                    f"broken; {use}"
                )
        elif n.key is not None and n.container not in found.containers[n.key]:
            others = ", ".join(found.containers[n.key]) or "none"
            out.append(
                f"{kind} {name}: replicatedJob {n.job!r} has no {n.key[:-1]} "
                f"{n.container!r} (it has: {others}), which the TrainJob's {n.at} names: "
                f"the Trainer would ignore it or add it broken; {use}"
            )
    for field, step in INITIALIZER_STEPS.items():
        wanted = spec.initializer is not None and getattr(spec.initializer, field) is not None
        if wanted and not any(
            j.step == step and step in j.containers["containers"] for j in jobs.values()
        ):
            out.append(
                f"{kind} {name} has no {step} job (a replicatedJob labelled {ANCESTOR_LABEL}: "
                f"{step} with a container {step}): initializer.{field} would be ignored; "
                f"{use}"
            )
    suffixes = [j.pod_suffix(spec.num_nodes) for j in jobs.values()]
    who = f"a TrainJob on {kind} {name} (JobSet pods)"
    out += [p.message for p in base.pod_name_budget(spec.name, suffixes or [""], who)]
    return out
