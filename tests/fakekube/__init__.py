"""The suite's clusters around ``kfcompile.testing``: ``cluster`` (Kubeflow installed),
``server`` (a fake served over HTTP), ``unreachable`` (servers that are not there), ``audit``
(the RBAC every call needs). ``tests/`` is on ``sys.path``: ``from fakekube import FakeKube``."""

from .server import Body, FakeKube, RequestRecord

__all__ = ["Body", "FakeKube", "RequestRecord"]
