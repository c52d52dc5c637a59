"""The suite's clusters, around ``kfcompile.testing`` (the port-level fake every lifecycle, CLI
and integration test runs on): ``cluster`` installs Kubeflow from ``../shared`` and holds what
kfcompile creates to the real schemas; ``server`` serves a fake over HTTP for the adapter's
contract with the real client (``FakeKube``: faults on the wire, the request log, exec over
websockets); ``unreachable`` has servers that are not there; ``audit`` the RBAC every call
needs. Import it as ``from fakekube import FakeKube`` (``tests/`` is on ``sys.path``)."""

from .server import Body, FakeKube, RequestRecord

__all__ = ["Body", "FakeKube", "RequestRecord"]
