"""A simulated Kubeflow control plane for the fake API server: what a cluster does to a job.

One :class:`Controller` plays the Trainer v2 + JobSet + Job controllers (TrainJob), the Training
Operator (PyTorchJob), Kueue, the scheduler and the kubelet, writing into a ``fakekube`` Store
the objects a real cluster would: the JobSet, pods with realistic statuses, job conditions, Events
(core/v1 from the controllers and the kubelet's container starts, events/v1 with series from the
scheduler and the kubelet's image pulls) and container logs (KUBEFLOW.md has the names, labels
and conditions).

Each job follows a *scenario*, a row of :data:`SCENARIOS`: the list of steps it walks, one per
tick. Picked, first match wins, by :meth:`Controller.scenario`, the job's annotation
``fake.kfcompile.dev/scenario``, or the controller's default. Before the steps come two gates
that any job may meet: Kueue (a job labelled ``kueue.x-k8s.io/queue-name`` is suspended, then
admitted after ``admission_delay`` ticks) and suspension (a suspended job has no pods and waits
until its ``suspend`` flag is cleared; suspending a running job deletes its pods and starts its
steps over, like the real controllers).

Ticks come from the controller's own thread (``start()``/``stop()``, one tick per job every
``step`` seconds) or, with ``auto=False``, from the test or a fake clock: ``tick()``,
``advance(namespace, name)`` and ``run_until_idle()``. A job whose object is gone is dropped:
the store's garbage collection removes its dependents and nothing here ever recreates them.
"""

from __future__ import annotations

import collections
import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .events import Reporter
from .resources import StoreError
from .scenarios import (
    JOB_KINDS,
    QUEUE_LABEL,
    SCENARIO_ANNOTATION,
    SCENARIOS,
    JobRecord,
    check_scenario,
    digest,
)
from .steps import Steps

if TYPE_CHECKING:
    from .store import Store

Obj = dict[str, Any]

__all__ = ["SCENARIO_ANNOTATION", "Controller"]  # the annotation that picks a scenario


class Controller(Steps):
    """Drives every TrainJob and PyTorchJob created in ``store`` through its scenario.

    ``step``: seconds between ticks of the own thread (``start()``/``stop()``). ``auto=False``:
    no thread; the test (or a fake clock) ticks with :meth:`tick`, :meth:`advance` and
    :meth:`run_until_idle`.
    ``admission_delay``: ticks a queued job stays suspended before Kueue admits it (``None``:
    Kueue keeps it waiting).
    ``clock``: the time written into timestamps and logs (settable later as ``.clock``).
    ``seed``: for pod name suffixes and event names.
    """

    def __init__(
        self,
        store: Store,
        *,
        step: float = 0.02,
        auto: bool = True,
        default_scenario: str = "succeeds",
        admission_delay: int | None = 2,
        clock: Callable[[], datetime] | None = None,
        seed: int | None = None,
    ) -> None:
        check_scenario(default_scenario)
        self.store = store
        self.step = step
        self.auto = auto
        self.default_scenario = default_scenario
        self.admission_delay = admission_delay
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self.errors: list[Exception] = []  # what broke a job in the own thread (then dropped)
        # Trainer's TrainJobStatus feature gate (v2.2+): each training step of a TrainJob is
        # reported in status.trainerStatus, as the SDK's progress helper reports it.
        self.trainer_status = False
        self._rng = random.Random(seed)
        # The scheduler writes events/v1 (series on repeats); so, here, do image pulls.
        self._scheduler = Reporter.of(store, "default-scheduler", self._rng)
        self._kubelet = Reporter.of(store, "kubelet", self._rng)
        self._lock = threading.RLock()  # one tick at a time; guards everything below
        self._jobs: dict[tuple[str, str, str], JobRecord] = {}
        self._chosen: dict[tuple[str, str], str] = {}
        # Store callbacks run in the writer's thread (an HTTP handler, the GC): they only queue
        # (event, kind, namespace, name, uid) here and never wait for a tick.
        self._inbox: collections.deque[tuple[str, str, str, str, str]] = collections.deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        store.subscribe(self._on_change)
        store.admission.append(_kueue_webhook)

    # --- public API -----------------------------------------------------------------------------

    def start(self) -> None:
        if not self.auto:
            raise RuntimeError(
                "Controller(auto=False) is ticked by tick()/advance()/run_until_idle()"
            )
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="fakekube-controller")
            self._thread.daemon = True
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def scenario(self, namespace: str, name: str, scenario: str) -> None:
        """Use ``scenario`` for the job(s) named so, created yet or not (this beats the
        annotation). A job already walking another scenario keeps its position."""
        check_scenario(scenario)
        with self._lock:
            self._drain()
            self._chosen[(namespace, name)] = scenario
            for job in self._matching(namespace, name):
                if job.observed:
                    job.scenario = scenario

    def advance(self, namespace: str, name: str) -> bool:
        """One tick of the job(s) named so: whether anything changed (False: the job waits, is
        done, or is gone)."""
        with self._lock:
            self._drain()
            return any([self._tick(job) for job in self._matching(namespace, name)])

    def tick(self) -> bool:
        """One tick of every job, as the own thread gives each ``step``: whether anything
        changed. A fake clock calls this as its time passes."""
        with self._lock:
            self._drain()
            return any([self._tick(job) for job in list(self._jobs.values())])

    def run_until_idle(self, max_rounds: int = 1000) -> int:
        """Tick every job until a round changes nothing; the number of rounds that did."""
        for rounds in range(max_rounds):
            if not self.tick():
                return rounds
        raise RuntimeError(f"jobs still changing after {max_rounds} rounds")

    # --- ticking --------------------------------------------------------------------------------

    def _on_change(self, event: str, obj: Obj) -> None:
        kind = obj.get("kind", "")
        expected = JOB_KINDS.get(kind)
        if event in ("ADDED", "DELETED") and expected and obj.get("apiVersion") == expected[0]:
            meta = obj["metadata"]
            self._inbox.append((event, kind, meta["namespace"], meta["name"], meta["uid"]))

    def _drain(self) -> None:
        while self._inbox:
            event, kind, namespace, name, uid = self._inbox.popleft()
            key = (kind, namespace, name)
            if event == "ADDED" and (key not in self._jobs or self._jobs[key].uid != uid):
                self._jobs[key] = JobRecord(JOB_KINDS[kind][0], kind, namespace, name, uid)
            elif event == "DELETED" and key in self._jobs and self._jobs[key].uid == uid:
                del self._jobs[key]

    def _matching(self, namespace: str, name: str) -> list[JobRecord]:
        return [j for j in self._jobs.values() if (j.namespace, j.name) == (namespace, name)]

    def _run(self) -> None:
        while not self._stop.wait(self.step):
            with self._lock:
                self._drain()
                for job in list(self._jobs.values()):
                    try:
                        self._tick(job)
                    except Exception as exc:  # keep the other jobs going; tests read .errors
                        self.errors.append(exc)
                        self._forget(job)

    def _forget(self, job: JobRecord) -> None:
        key = (job.kind, job.namespace, job.name)
        if self._jobs.get(key) is job:
            del self._jobs[key]

    def _tick(self, job: JobRecord) -> bool:
        try:
            return self._tick_unguarded(job)
        except StoreError as exc:
            # A 404 mid-step means the job was deleted under us: its garbage is the store's.
            if exc.code == 404 and self._live(job) is None:
                self._forget(job)
                return False
            raise

    def _tick_unguarded(self, job: JobRecord) -> bool:
        cr = self._live(job)
        if cr is None:
            self._forget(job)
            return False
        if job.finished:
            return False
        if not job.observed:
            self._observe(job, cr)
            return True
        spec = cr.get("spec") or {}
        flags = spec if job.kind == "TrainJob" else spec.get("runPolicy") or {}
        if flags.get("suspend"):
            if not job.suspended:
                self._suspend(job)
                return True
            if job.kueue and not job.admitted and job.admit_in is not None:
                if job.admit_in > 0:
                    job.admit_in -= 1
                else:
                    self._admit(job, cr)
                return True
            return False
        if job.suspended:
            self._resume(job)
            return True
        steps = SCENARIOS[job.scenario].steps
        if job.pos >= len(steps):
            return False
        method, *args = steps[job.pos]
        job.pos += 1
        getattr(self, method)(job, *args)
        return True

    # --- gates: first sight, Kueue, suspension --------------------------------------------------

    def _observe(self, job: JobRecord, cr: Obj) -> None:
        meta = cr["metadata"]
        annotated = (meta.get("annotations") or {}).get(SCENARIO_ANNOTATION)
        job.scenario = self._chosen.get((job.namespace, job.name)) or annotated or ""
        if job.scenario not in SCENARIOS:
            if job.scenario:
                msg = (
                    f"{SCENARIO_ANNOTATION}={job.scenario!r} is not one of "
                    f"{', '.join(SCENARIOS)}; using {self.default_scenario!r}"
                )
                self.event(job.ref, job.uid, "Warning", "UnknownScenario", msg, "fakekube")
            job.scenario = self.default_scenario
        job.kueue = QUEUE_LABEL in (meta.get("labels") or {})
        job.admit_in = self.admission_delay
        job.observed = True
        if job.kueue:
            workload = f"{job.kind.lower()}-{job.name}-{digest(job.uid)[:5]}"
            msg = f"Created Workload: {job.namespace}/{workload}"
            self.event(job.ref, job.uid, "Normal", "CreatedWorkload", msg, "kueue-job-controller")
        if job.kind == "TrainJob":
            self._create_jobset(job, cr)
        else:
            specs = (cr.get("spec") or {}).get("pytorchReplicaSpecs") or {}
            job.replicas = tuple(r for r in ("Master", "Worker") if r in specs)
            msg = f"PyTorchJob {job.name} is created."
            self._pt_condition(job, "Created", True, "PyTorchJobCreated", msg)
            self._pt_event(job, "Normal", "PyTorchJobCreated", msg)
            self._sync_status(job)

    def _write_suspend(self, job: JobRecord, suspend: bool) -> Obj | None:
        return self._modify(job.ref, lambda cr: _set_suspend(cr, suspend))

    def _admit(self, job: JobRecord, cr: Obj) -> None:
        queue = (cr["metadata"].get("labels") or {}).get(QUEUE_LABEL, "user-queue")
        job.admitted = True
        self._write_suspend(job, False)
        msg = f"Admitted by clusterQueue cluster-queue (local queue {queue})"
        self.event(job.ref, job.uid, "Normal", "Started", msg, "kueue-admission")

    def _suspend(self, job: JobRecord) -> None:
        """Like the controllers on suspend=true: the pods go; the steps start over on resume."""
        job.suspended = True
        job.pos = job.log_step = 0
        self._delete_pods(job, job.pods)
        if job.kind == "TrainJob":
            self._tj_condition(job, "Suspended", True, "Suspended", "TrainJob is suspended")
            self._update_jobset(job, suspend=True)
        else:
            msg = f"PyTorchJob {job.name} is suspended."
            if self._pt_true(job, "Running"):
                self._pt_condition(job, "Running", False, "PyTorchJobSuspended", msg)
            self._pt_condition(job, "Suspended", True, "PyTorchJobSuspended", msg)
            job.status.pop("startTime", None)
            self._pt_event(job, "Normal", "PyTorchJobSuspended", msg)
        self._sync_status(job)

    def _resume(self, job: JobRecord) -> None:
        job.suspended = False
        if job.kind == "TrainJob":
            self._tj_condition(job, "Suspended", False, "Resumed", "TrainJob is resumed")
            self._update_jobset(job, suspend=False)
        else:
            msg = f"PyTorchJob {job.name} is resumed."
            self._pt_condition(job, "Suspended", False, "PyTorchJobResumed", msg)
            self._pt_event(job, "Normal", "PyTorchJobResumed", msg)
        self._sync_status(job)


def _set_suspend(cr: Obj, suspend: bool) -> None:
    spec = cr.setdefault("spec", {})
    flags = spec if cr.get("kind") == "TrainJob" else spec.setdefault("runPolicy", {})
    flags["suspend"] = suspend


def _kueue_webhook(obj: Obj) -> None:
    """Kueue's mutating webhook: a job for a queue is created suspended, before any controller
    sees it."""
    queued = QUEUE_LABEL in ((obj.get("metadata") or {}).get("labels") or {})
    if queued and obj.get("kind") in ("TrainJob", "PyTorchJob"):
        _set_suspend(obj, True)
