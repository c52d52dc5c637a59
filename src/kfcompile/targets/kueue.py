"""What Kueue's webhook checks of a job's topology request against the job's pod sets
(kueue pkg/controller/jobframework/tas_validation.go): a slice no larger than any pod set that
asks for it, and a pod set group of exactly two pod sets, one of a single pod. Each target says
which pod sets carry ``topology``'s annotations: a PyTorchJob's replica types (all of them), a
TrainJob's `node` job (the one its overrides and patches reach)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kfcompile.spec.errors import Problem
from kfcompile.spec.model import JobSpec


def _pods(count: int) -> str:
    return f"{count} pod{'' if count == 1 else 's'}"


def topology_problems(spec: JobSpec, pod_sets: Mapping[str, int], who: str) -> Iterator[Problem]:
    """What Kueue would refuse of ``spec.topology`` on ``who``, whose pod sets (name: pods)
    carry it."""
    t = spec.topology
    if t is None:
        return
    smaller = [(name, n) for name, n in pod_sets.items() if t.slice_size and t.slice_size > n]
    if smaller:
        name, count = smaller[0]
        yield Problem(
            "topology.slice_size",
            f"Kueue refuses a slice larger than a pod set: {who}'s {name} has {_pods(count)}",
        )
    counts = sorted(pod_sets.values())
    if t.group_name is not None and (len(counts) != 2 or counts[0] != 1):
        has = ", ".join(f"{name} ({_pods(n)})" for name, n in pod_sets.items())
        yield Problem(
            "topology.group_name",
            "Kueue groups exactly two pod sets, one of a single pod (a PyTorchJob's Master and "
            f"Workers): {who} has {has}",
        )
