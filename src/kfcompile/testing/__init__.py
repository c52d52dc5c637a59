"""A fake Kubernetes cluster with Kubeflow, for testing code that uses kfcompile without a
cluster: in memory, behind the lifecycle's ``Cluster`` port, on a fake clock.

>>> from kfcompile.testing import FakeCluster, courses
>>> cluster = FakeCluster()
>>> courses.install(cluster)                                    # Trainer v2.3, PyTorchJob
>>> cluster.store.on_create.append(courses.runs(cluster, steps=2))  # how each job lives
>>> session = cluster.session()                                 # for kfcompile.lifecycle

Nothing moves by itself: what the Trainer, JobSet, Kueue and the kubelets do to a job is
scripted (``courses``: each job's course, in the shapes the real controllers were recorded
making; ``kueue``: Kueue and MultiKueue), and happens as the code under test waits on the
fake clock, so a test never sleeps in real time. ``FakeCluster.faults`` injects API trouble,
``FakeCluster.calls`` records every call, ``FakeCluster.on_exec`` answers exec'd commands, and
``FakeCluster.connect`` stands in for ``kfcompile_kube.session`` (the CLI's, TorchX's and
NeMo-Run's way to a cluster). The objects are checked by no schema: add a check to
``store.admission`` to hold them to your CRDs. Importing this imports no test framework.
"""

from kfcompile.testing.clock import FakeClock, FakeTimeLimit, fixed_jitter
from kfcompile.testing.cluster import (
    Call,
    Calls,
    Exec,
    ExecAnswer,
    FakeCluster,
    FakeConnection,
    Fault,
    Faults,
)
from kfcompile.testing.store import ResourceKind, Store

__all__ = ["Call", "Calls", "Exec", "ExecAnswer", "FakeClock", "FakeCluster", "FakeConnection",
           "FakeTimeLimit", "Fault", "Faults", "ResourceKind", "Store", "fixed_jitter"]  # fmt: skip
