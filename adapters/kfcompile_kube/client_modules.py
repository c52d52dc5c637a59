"""The modules of the ``kubernetes`` client the adapter uses, imported without the rest of it.

Importing any module of a package runs the package's ``__init__`` first, and the client's import
every part of it: ``kubernetes/__init__`` imports config, dynamic, watch, stream, utils,
leaderelection and informer; up to 36.x ``kubernetes.client``'s imports every API class and
model; ``kube_config`` imports ``ApiClient`` (pydantic, dateutil, a thread pool) and
``OAuth2Session`` (requests) at its top but calls them only to refresh an OIDC token, and 27.x's
imports google-auth for the gcp auth provider. Plainly imported, they made a cold ``kfcompile
status`` 1,574 M instructions with kubernetes 37 and 1,858 M with 27.2, against 227 M for
``kubectl get`` (``bench/cold.py``).

So before importing the modules below, this module puts each package of ``PACKAGES`` not yet
imported in ``sys.modules`` with its ``__init__`` not yet run, as ``importlib.util.LazyLoader``
leaves a module, and runs the ``__init__`` on the first use of a name it would bind (PEP 562):

- a submodule (``kubernetes.client.rest``) is imported on its own, as ``import`` does;
- a name of ``DEFINED_IN`` comes from the module defining it, the object the ``__init__`` binds;
- any other name (``CoreV1Api``, ``__version__``, ``dir()``) runs the ``__init__``, once: from
  then on the package is the one its ``__init__`` makes, for any code in the process.

Only while this module imports the client's modules is a name of ``LATER`` a stand-in, the real
object from its first use (called, subclassed, an attribute read, an ``isinstance``): so only
``kube_config``'s own globals hold one. A package whose ``__init__`` fails fails on that first
use, and again on the next.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

# The packages whose ``__init__`` waits for a name it binds, parents first. kubernetes.utils: 37's
# rest.py imports its retry and keepalive, its __init__ the whole client (create_from_yaml).
PACKAGES: Final = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.utils",
    "requests_oauthlib",
    "oauthlib.oauth2",
    "google.auth",
    "google.auth.transport.requests",
)
# (package, name) -> the module defining it: what the client's modules import from the packages.
DEFINED_IN: Final = {
    ("kubernetes.client", "Configuration"): "kubernetes.client.configuration",
    ("kubernetes.client", "ApiClient"): "kubernetes.client.api_client",
    ("requests_oauthlib", "OAuth2Session"): "requests_oauthlib.oauth2_session",
}
LATER: Final = {("kubernetes.client", "ApiClient"), ("requests_oauthlib", "OAuth2Session")}

_importing = threading.local()  # .now: this thread is importing the client's modules here


def leave_init(name: str) -> None:
    """Put package (or module) ``name`` in ``sys.modules`` with its ``__init__`` (its body) run
    on first use; nothing when it is imported already, or not installed."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent package is not installed
        return
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    _Init(module, spec).arm()
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system binds a submodule on its package
        setattr(sys.modules[parent], child, module)


class _Init:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) until its ``__init__`` has run."""

    def __init__(self, module: ModuleType, spec: ModuleSpec) -> None:
        self.module, self.spec = module, spec
        self.lock = threading.RLock()  # another thread waits for an __init__ being run
        self.state = "waiting"  # then "running", "ran"

    def arm(self) -> None:
        vars(self.module).update(__getattr__=self.getattr, __dir__=self.dir)

    def getattr(self, name: str) -> object:
        sub = f"{self.spec.name}.{name}"
        if self.spec.submodule_search_locations is not None and importlib.util.find_spec(sub):
            return importlib.import_module(sub)
        defined_in = DEFINED_IN.get((self.spec.name, name))
        if defined_in is not None:
            if (self.spec.name, name) in LATER and getattr(_importing, "now", False):
                return StandIn(name, defined_in)
            value = getattr(importlib.import_module(defined_in), name)
            setattr(self.module, name, value)
            return value
        self.run()
        if vars(self.module).get("__getattr__") == self.getattr:  # running here: not bound yet
            raise AttributeError(f"module {self.spec.name!r} has no attribute {name!r}")
        return getattr(self.module, name)

    def dir(self) -> list[str]:
        self.run()
        return sorted(vars(self.module))

    def run(self) -> None:
        with self.lock:
            if self.state != "waiting":
                return  # ran already, or running in this thread (a name it has yet to bind)
            self.state = "running"
            try:
                assert self.spec.loader is not None
                self.spec.loader.exec_module(self.module)
            except BaseException:
                self.state = "waiting"  # as a failed import is tried again by the next one
                raise
            self.state = "ran"
            for hook, mine in (("__getattr__", self.getattr), ("__dir__", self.dir)):
                if vars(self.module).get(hook) == mine:  # the __init__ defined none of its own
                    del vars(self.module)[hook]


class StandIn:
    """A name bound before its module is imported: the real object from its first use."""

    def __init__(self, name: str, defined_in: str) -> None:
        self._name, self._defined_in = name, defined_in

    def resolved(self) -> Any:
        return getattr(importlib.import_module(self._defined_in), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolved()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolved(), name)

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self.resolved())

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self.resolved())

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type, ...]:
        return (self.resolved(),)

    def __repr__(self) -> str:
        return f"<{self._defined_in}.{self._name}, imported on first use>"


@contextmanager
def _standing_in() -> Iterator[None]:
    _importing.now = True
    try:
        yield
    finally:
        _importing.now = False


for _package in PACKAGES:
    leave_init(_package)
with _standing_in():
    from kubernetes.client import rest
    from kubernetes.client.configuration import Configuration
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader
    from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger

__all__ = [
    "ConfigException",
    "ConfigNode",
    "Configuration",
    "InClusterConfigLoader",
    "KubeConfigLoader",
    "KubeConfigMerger",
    "StandIn",
    "leave_init",
    "rest",
]
