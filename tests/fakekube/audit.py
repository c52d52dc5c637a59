"""Every request the cluster commands make in the test suite, as the authorizer sees it (verb,
API group, resource[/subresource], namespace or cluster-wide, name): recorded by the clusters
lifecycle and CLI tests run against (``cluster.PortCluster`` at the port, ``LocalCluster`` on
the wire), never by tests that probe the fake itself; checked against
``kfcompile.lifecycle.rbac`` at the end of the session (``tests/conftest.py``) and by
``tests/test_rbac_requests.py``. Discovery needs no Role and is not recorded. An exec (a
WebSocket upgrade, a GET) is authorized as ``get`` up to Kubernetes 1.34 and as ``create`` from
1.35 (KEP-4006), so it needs both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kfcompile.lifecycle import rbac
from kfcompile.lifecycle.target_evidence import TRAINER_NAMESPACE

from .requestlog import RequestLog, RequestRecord
from .resources import StoreError

__all__ = ["AUDIT", "Access", "Seen", "denied", "of_call", "of_request", "recording", "unused"]


@dataclass(frozen=True)
class Access:
    """One authorization a request needs. ``namespace`` None: cluster-wide (a cluster-scoped
    resource, or a list across namespaces)."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None = None

    def __str__(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {what}{f' {self.name}' if self.name else ''} {where}"


def _exec(group: str, resource: str, namespace: str | None, name: str | None) -> list[Access]:
    return [Access(verb, group, resource, namespace, name) for verb in ("get", "create")]


def of_call(call: RequestRecord, kind_of: Callable[[str, str], Any]) -> list[Access]:
    """What one call of a port fake needs (``served`` is discovery: nothing); ``kind_of``: the
    served kind (its ``group``, ``plural``, ``namespaced``), None or ``StoreError`` if none."""
    try:
        kind = kind_of(call.api_version, call.kind) if call.method != "served" else None
    except StoreError:
        kind = None
    if kind is None:
        return []  # not served: the adapter finds that out by discovery, before any request
    namespace = call.namespace if kind.namespaced else None
    if call.method == "pod_log":
        return [Access("get", "", "pods/log", namespace, call.name)]
    if call.method == "exec":
        return _exec("", "pods/exec", namespace, call.name)
    name = call.name if call.method not in ("list", "watch") else None
    return [Access(call.method, kind.group, kind.plural, namespace, name)]


def of_request(method: str, path: str, watch: bool) -> list[Access]:
    """What one HTTP request needs, from its method and path (discovery: nothing)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return []  # /version, /api, /apis, /apis/<group>
    if not rest:
        return []  # /api/v1, /apis/<group>/<version>: a resource list
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], (rest[1:2] or [None])[0], (rest[2:3] or [None])[0]
    resource = f"{resource}/{sub}" if sub is not None else resource
    if sub == "exec":
        return _exec(group, resource, namespace, name)
    verbs = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}
    verb = verbs.get(method) or ("get" if name else "watch" if watch else "list")
    return [Access(verb, group, resource, namespace, name)]


class Seen:
    """Distinct accesses, each with the first test that needed it."""

    def __init__(self) -> None:
        self.accesses: dict[Access, str] = {}
        self._also: list[Seen] = []

    def add(self, accesses: Iterable[Access]) -> None:
        where = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        for access in accesses:
            self.accesses.setdefault(access, where)
        for other in self._also:
            other.add(accesses)

    def calls(self, log: RequestLog, kind_of: Callable[[str, str], Any]) -> None:
        """Record each call made through ``log``'s port from now on."""
        log.listeners.append(lambda call: self.add(of_call(call, kind_of)))

    def requests(self, log: RequestLog) -> None:
        """Record each request ``log``'s server answers from now on."""
        log.listeners.append(lambda r: self.add(of_request(r.method, r.path, r.watch)))


AUDIT = Seen()  # the whole session's


@contextmanager
def recording() -> Iterator[Seen]:
    """What the clusters record while this lasts (as well as into ``AUDIT``)."""
    seen = Seen()
    AUDIT._also.append(seen)
    try:
        yield seen
    finally:
        AUDIT._also.remove(seen)


_SCOPES = {"the namespace": rbac.NAMESPACED, "cluster-wide": rbac.CLUSTER,
           "the Trainer's namespace": rbac.TRAINER}  # fmt: skip


def _scope(access: Access) -> str:
    if access.namespace == TRAINER_NAMESPACE:
        return "the Trainer's namespace"
    return "cluster-wide" if access.namespace is None else "the namespace"


def denied(seen: Seen) -> list[str]:
    """Each access no rule of ``kfcompile.lifecycle.rbac`` allows, with the first test that
    needed it."""
    return [
        f"{access}: not allowed by the Role for {_scope(access)} ({where})"
        for access, where in sorted(seen.accesses.items(), key=lambda kv: str(kv[0]))
        if not rbac.allows(_SCOPES[_scope(access)], access.verb, access.group, access.resource,
                           access.name)
    ]  # fmt: skip


def unused(seen: Seen) -> list[str]:
    """Each verb of each rule of ``kfcompile.lifecycle.rbac`` that no access needed: broader
    than the commands are."""
    used = {(_scope(a), a.verb, a.group, a.resource) for a in seen.accesses}
    return [
        f"{scope}: {verb} {rule.resource}{'.' + rule.group if rule.group else ''} ({rule.why}) "
        "is granted but no request needed it"
        for scope, rules in _SCOPES.items()
        for rule in rules
        for verb in rule.verbs
        if (scope, verb, rule.group, rule.resource) not in used
    ]
