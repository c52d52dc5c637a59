"""The ``kubernetes`` client's package ``__init__``s, deferred in the ``kfcompile`` process only.

``import kubernetes`` runs every part of the client: ``kubernetes/__init__`` imports ``config``
(the kubeconfig loader and what its auth providers use), ``dynamic``, ``watch``, ``stream``,
``leaderelection``; up to 36.x ``kubernetes.client`` imports every API class and model too.
A cluster command uses a few modules (``client.configuration``, ``client.rest``,
``config.kube_config``; ``stream.ws_client`` for an exec), so in the process the
``kfcompile`` command starts (``kfcompile.cli.run``, never when kfcompile is imported as a
library) those packages' modules are made without running their ``__init__``; each runs on
first use of a name it defines:

- a submodule (``kubernetes.client.rest``) is imported on its own, as ``import`` does;
- a name the ``__init__`` re-exports with ``from M import N`` at its top level (every API class
  and model up to 36.x) comes from ``M`` alone: what the client does itself from 37.0
  (``kubernetes/client/__init__.py``'s ``_exports`` and ``__getattr__``);
- any other name (``__version__``, ``__all__``, ``dir()``) runs the real ``__init__``, once;
  from then on the package is the complete one, so later code in the same process (a
  ``from kubernetes.client.models import *``) sees what it always does;
- a name in ``STAND_INS`` is a stand-in until first used (called, subclassed, an attribute
  read, an ``isinstance``), and then the real one: ``kube_config`` binds ``ApiClient`` and
  ``OAuth2Session`` at its top but calls them only to make a client of its own and to refresh
  an OIDC token, and importing them (pydantic; requests) cost a cold ``status`` about 90 ms.

A package whose ``__init__`` fails then fails on that first use, not at the ``import``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import re
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:  # importlib.abc imports importlib.resources: not at every `render`
    from importlib.abc import Loader

# What is deferred, each with whether its ``__init__`` re-exports names its modules define (then
# served from them alone). google-auth serves only the kubeconfig's gcp auth provider, yet
# 27.2's ``kube_config`` imports it and its requests transport at its top (37.x: where it is
# installed); its ``__init__`` has effects of its own (logging, warnings), so any of its names
# runs it.
PACKAGES: Final = {
    "kubernetes": True,
    "kubernetes.client": True,
    "kubernetes.client.models": True,
    "kubernetes.config": False,
    "kubernetes.stream": False,
    "kubernetes.utils": True,
    "google.auth": False,
    "google.auth.transport.requests": False,
    # What kube_config imports for its OIDC auth provider alone.
    "oauthlib.oauth2": False,
    "requests_oauthlib": False,
}

# (package, name): the module defining what ``from package import name`` binds as a stand-in.
STAND_INS: Final = {
    ("kubernetes.client", "ApiClient"): "kubernetes.client.api_client",
    ("requests_oauthlib", "OAuth2Session"): "requests_oauthlib.oauth2_session",
}

# ``from kubernetes.client.models.v1_pod import V1Pod``, ``from . import client``: one name,
# at the top level of the ``__init__`` (an indented one is conditional).
_REEXPORT: Final = re.compile(r"^from ([\w.]+) import (\w+)(?: as (\w+))?[ \t]*$", re.MULTILINE)


def install(packages: Sequence[str] = tuple(PACKAGES)) -> None:
    """Defer the bodies of ``packages`` (and modules) in this process from now on (those
    already imported are left as they are)."""
    sys.meta_path.insert(0, _Finder({name: PACKAGES.get(name, False) for name in packages}))


class _Finder:  # an importlib.abc.MetaPathFinder
    def __init__(self, packages: dict[str, bool]) -> None:
        self.packages = packages

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = cast("Loader", _Deferring(spec.loader, self.packages[fullname]))
        return spec


class _Deferring:  # an Loader
    """Makes the module as the real loader would, leaving its body for its first use."""

    def __init__(self, real: Loader, reexports: bool) -> None:
        self.real, self.reexports = real, reexports

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        assert spec is not None
        # Whatever asks for the loader (importlib.resources, reload) gets the real one.
        spec.loader = module.__loader__ = self.real
        exports = _exports(spec) if self.reexports else {}
        _Body(module, spec, self.real, exports).arm()


class _Body:
    """A deferred module's ``__getattr__`` and ``__dir__`` (PEP 562) until its body has run."""

    def __init__(
        self,
        module: ModuleType,
        spec: importlib.machinery.ModuleSpec,
        loader: Loader,
        exports: dict[str, tuple[str, str]],
    ) -> None:
        self.module, self.spec, self.loader, self.exports = module, spec, loader, exports
        self.lock = threading.RLock()  # another thread waits for a body being run
        self.state = "deferred"  # then "running", "ran"

    def arm(self) -> None:
        vars(self.module).update(__getattr__=self.getattr, __dir__=self.dir)
        # Bound from the start, whatever defines the package's names (37.x's ``__init__`` has a
        # ``__getattr__`` of its own); its body, run later, may bind the real ones over them.
        for (package, name), defined_in in STAND_INS.items():
            if package == self.spec.name:
                setattr(self.module, name, _StandIn(self.module, name, defined_in))

    def getattr(self, name: str) -> object:
        if self.spec.submodule_search_locations is not None:
            sub = f"{self.spec.name}.{name}"
            if importlib.util.find_spec(sub) is not None:
                return importlib.import_module(sub)
        if name in self.exports:
            module, attribute = self.exports[name]
            value = getattr(importlib.import_module(module), attribute)
            setattr(self.module, name, value)
            return value
        self.run()
        if vars(self.module).get("__getattr__") is self.getattr:  # the body is running here
            raise AttributeError(f"module {self.spec.name!r} has no attribute {name!r}")
        return getattr(self.module, name)

    def dir(self) -> list[str]:
        self.run()
        return sorted(vars(self.module))

    def run(self) -> None:
        with self.lock:
            if self.state != "deferred":
                return  # run already, or running in this thread (a name it has yet to bind)
            self.state = "running"
            try:
                self.loader.exec_module(self.module)
            except BaseException:
                self.state = "deferred"  # as a failed import is tried again by the next one
                raise
            self.state = "ran"
            for hook, mine in (("__getattr__", self.getattr), ("__dir__", self.dir)):
                if vars(self.module).get(hook) == mine:  # the body defined none of its own
                    del vars(self.module)[hook]


class _StandIn:
    """A name of a deferred package, bound before its body ran: the real object on first use,
    from then on the package's too."""

    def __init__(self, package: ModuleType, name: str, defined_in: str) -> None:
        self._package, self._name, self._defined_in = package, name, defined_in

    def resolved(self) -> Any:
        real = getattr(importlib.import_module(self._defined_in), self._name)
        if vars(self._package).get(self._name) is self:
            setattr(self._package, self._name, real)
        return real

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
        return f"<deferred {self._package.__name__}.{self._name}>"


def resolved(value: object) -> object:
    """``value``, or the real object a stand-in stands for."""
    return value.resolved() if isinstance(value, _StandIn) else value


def _exports(spec: importlib.machinery.ModuleSpec) -> dict[str, tuple[str, str]]:
    """The names the ``__init__`` re-exports: name -> (module, attribute)."""
    get_source = getattr(spec.loader, "get_source", None)  # an InspectLoader's
    source = get_source(spec.name) if get_source is not None else None
    found: dict[str, tuple[str, str]] = {}
    for module, attribute, alias in _REEXPORT.findall(source or ""):
        target = importlib.util.resolve_name(module, spec.name)
        if target not in ("__future__", spec.name):  # `from . import x`: a submodule
            found[alias or attribute] = (target, attribute)
    return found
