"""A fake Kubernetes cluster with Kubeflow, for testing code that uses kfcompile without a
cluster: in memory, behind the lifecycle's ``Cluster`` port, on a fake clock.

>>> from kfcompile.testing import FakeCluster, courses
>>> cluster = FakeCluster()
>>> courses.install(cluster)                                    # Trainer v2.3, PyTorchJob
>>> cluster.store.on_create.append(courses.runs(cluster, steps=2))  # how each job lives
>>> session = cluster.session()                                 # for kfcompile.lifecycle

Nothing moves by itself: what the controllers and kubelets do to a job is scripted
(``courses``, in the shapes the real ones were recorded making; ``kueue``: Kueue and
MultiKueue) and happens as the code under test waits on the fake clock. ``FakeCluster.faults``
injects API trouble, ``calls`` records every call, ``on_exec`` answers exec'd commands and
``connect`` stands in for ``kfcompile_kube.session``. No schema is checked (add one to
``store.admission``); importing this imports no test framework.
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
