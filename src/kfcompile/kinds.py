"""The job kinds kfcompile renders and drives: one row each, everything about a kind in it; and
the normalized states a job is in, whatever its kind (``status.job_state`` decides which).

A reader holds a row against KUBEFLOW.md ("TrainJob status", "TrainJob objects and labels",
"PyTorchJob kubeflow.org/v1"); the targets, the status mapping, the lifecycle, the importer and
the CLI read these rows, so adding a kind is adding a row (and a target module).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
from attrs import frozen


class State(enum.Enum):
    """The normalized state of a job, whatever its kind (``JobState.state``)."""

    PENDING = "PENDING"
    """Created, not running yet: waiting for its controller, its pods to be scheduled and
    start, or a pod that cannot start (the reason says which)."""
    SUSPENDED = "SUSPENDED"
    """Suspended: queued by Kueue until admitted (normal waiting), preempted, or suspended by
    someone (``kfcompile suspend``). No pods run."""
    RUNNING = "RUNNING"
    """Its pods run (or its controller counts them active)."""
    SUCCEEDED = "SUCCEEDED"
    """Finished: its controller says it completed."""
    FAILED = "FAILED"
    """Finished: its controller says it failed (the reason is the controller's, or the cause
    its message names, such as ``DeadlineExceeded``)."""
    DELETING = "DELETING"
    """Being deleted before it finished (``cancel``): still there, held by a finalizer until
    its pods are gone; the reason says what holds it. A finished job being deleted keeps
    ``SUCCEEDED`` or ``FAILED``."""


FINISHED_STATES: Final = frozenset({State.SUCCEEDED, State.FAILED})


@attrs.frozen
class JobState:
    """A job's normalized state (``status.job_state``): the ``State``, a short ``reason`` (a
    condition type, a pod's waiting reason, ``NoStatus``...) and a ``message`` for people.
    ``finished`` is true for ``SUCCEEDED`` and ``FAILED``: test it, not the state, to catch
    both."""

    state: State = attrs.field(validator=attrs.validators.instance_of(State))
    reason: str = attrs.field(validator=attrs.validators.instance_of(str))
    message: str = attrs.field(validator=attrs.validators.instance_of(str))

    @property
    def finished(self) -> bool:
        """Whether the job ended (``SUCCEEDED`` or ``FAILED``): nothing will change it now."""
        return self.state in FINISHED_STATES


ConditionTable = tuple[tuple[str, State], ...]


@frozen(repr=False, eq=False, slots=False)
class Kind:
    """One job kind."""

    name: str  # kind, e.g. TrainJob
    api_version: str
    plural: str  # the resource name in URLs and RBAC rules
    container: str  # the training container (in overrides, logs, rank pods)
    managers: tuple[str, ...]  # values `managedBy` accepts
    # Status: conditions of type -> state when True, strongest first; where the status counts
    # what is active; the reason to report for it; what to check when a job never gets a status.
    conditions: ConditionTable
    active_counts: Literal["jobsStatus", "replicaStatuses"]
    active_reason: str
    suspects: str
    # Objects and labels: selectors of every pod and of the training nodes of job {name}, how a
    # pod's rank is labelled, objects made for the job whose events tell its story.
    pods: str
    nodes: str
    rank: Literal["completion-index", "replica"]
    # A kind whose job is replicas of several types: the types in rank order and where the spec
    # holds them, keyed by type (empty for a kind of one replicated job).
    replica_types: tuple[str, ...]
    replica_specs: tuple[str, ...]
    children: tuple[str, ...]
    suspend: tuple[str, ...]  # path of the suspend flag
    install: str  # how to get the CRD served

    def replica_rank(self, job: Mapping[str, Any], replica_type: str, index: int) -> int:
        """The rank of pod ``index`` of a replica type (as its label has it, lower case): its
        index after one rank for each type before its own that ``job`` has. A PyTorchJob's
        Master is rank 0 and Worker i is rank i+1, or i without a Master (an elastic job; the
        operator sets no RANK then) (training-operator pkg/controller.v1/pytorch/envvar.go
        setPodEnv: a worker's RANK is its index + 1 when the job has a Master). A type it
        does not know is read as the last."""
        types = [t.lower() for t in self.replica_types]
        before = self.replica_types[: types.index(replica_type) if replica_type in types else -1]
        specs: Any = job
        for key in self.replica_specs:
            specs = specs.get(key) if isinstance(specs, Mapping) else None
        return index + sum(isinstance(specs, Mapping) and t in specs for t in before)


MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"

# The rank labels (KUBEFLOW.md): a TrainJob's rank is its Job's completion index
# (jobset.sigs.k8s.io/job-index is always 0); a PyTorchJob's is its replica type and index.
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"

TRAINJOB: Final = Kind(
    name="TrainJob",
    api_version="trainer.kubeflow.org/v1alpha1",
    plural="trainjobs",
    # The default runtime `torch-distributed` has one replicated job and one container, `node`.
    container="node",
    managers=("trainer.kubeflow.org/trainjob-controller", MULTIKUEUE),
    # Suspended (True, or False with reason Resumed), Complete, Failed; no Created and no
    # Running condition: running is inferred from jobsStatus and pods. Suspended=True is Kueue
    # queueing (or a user suspend): a normal wait, never a failure.
    conditions=(
        ("Complete", State.SUCCEEDED),
        ("Failed", State.FAILED),
        ("Suspended", State.SUSPENDED),
    ),
    active_counts="jobsStatus",
    active_reason="JobsActive",
    suspects="the Trainer controller, the TrainJob CRD and the referenced training runtime",
    pods="jobset.sigs.k8s.io/jobset-name={name}",
    nodes="jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name=node",
    rank="completion-index",
    replica_types=(),
    replica_specs=(),
    children=("{name}-node-0",),  # the JobSet shares the job's name; its first Job
    suspend=("spec", "suspend"),
    install="install Kubeflow Trainer v2 (https://www.kubeflow.org/docs/components/trainer/)",
)

PYTORCHJOB: Final = Kind(
    name="PyTorchJob",
    api_version="kubeflow.org/v1",
    plural="pytorchjobs",
    container="pytorch",  # every replica needs a container of this name
    managers=("kubeflow.org/training-operator", MULTIKUEUE),
    # Created, Running, Restarting, Succeeded, Suspended, Failed. Restarting means pods are
    # being recreated after a retryable failure: still running.
    conditions=(
        ("Succeeded", State.SUCCEEDED),
        ("Failed", State.FAILED),
        ("Suspended", State.SUSPENDED),
        ("Restarting", State.RUNNING),
        ("Running", State.RUNNING),
        ("Created", State.PENDING),
    ),
    active_counts="replicaStatuses",
    active_reason="ReplicasActive",
    suspects="the Training Operator and the PyTorchJob CRD",
    pods="training.kubeflow.org/job-name={name}",
    nodes="training.kubeflow.org/job-name={name}",
    rank="replica",
    # Master.replicas is exactly 1, Worker.replicas at least 1 (KUBEFLOW.md); no other types.
    replica_types=("Master", "Worker"),
    replica_specs=("spec", "pytorchReplicaSpecs"),
    children=(),
    suspend=("spec", "runPolicy", "suspend"),
    install="install the Kubeflow Training Operator v1 (kubeflow/trainer v1.9)",
)

KINDS: Final[Mapping[str, Kind]] = {k.name: k for k in (TRAINJOB, PYTORCHJOB)}

# Every `managedBy` value some kind accepts, MultiKueue (all kinds) first; each target narrows
# it to its own kind's.
MANAGERS: Final = tuple(
    dict.fromkeys([MULTIKUEUE, *(m for k in KINDS.values() for m in k.managers)])
)
