"""Every request the cluster commands make in the test suite, as the authorizer sees it: (verb,
API group, resource[/subresource], namespace or cluster-wide, name). Filled by each cluster that
lifecycle and CLI tests run against (``cluster.PortCluster`` at the port, ``LocalCluster``
on the wire), never by tests that probe the fake itself; checked against
``kfcompile.lifecycle.rbac`` at the end of the session (``tests/conftest.py``) and by
``tests/test_rbac_requests.py``.

Discovery (``/api``, ``/apis/...``, ``/version``) needs no Role and is not recorded. An exec is
a WebSocket upgrade, a GET: authorized as ``get`` up to Kubernetes 1.34 and as ``create`` from
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


_PORT_VERBS = {op: op for op in ("get", "create", "patch", "delete", "list", "watch")}


def of_call(call: RequestRecord, kind_of: Callable[[str, str], Any]) -> list[Access]:
    """What one call of an in-memory port needs (``served`` is discovery: nothing);
    ``kind_of``: the served kind (its ``group``, ``plural``, ``namespaced``), None or
    ``StoreError`` when not served."""
    if call.method == "served":
        return []
    try:
        kind = kind_of(call.api_version, call.kind)
    except StoreError:
        kind = None
    if kind is None:
        return []  # not served: the adapter finds that out by discovery, before any request
    namespace = call.namespace if kind.namespaced else None
    if call.method == "pod_log":
        return [Access("get", "", "pods/log", namespace, call.name)]
    if call.method == "exec":
        return [Access(v, "", "pods/exec", namespace, call.name) for v in ("get", "create")]
    name = call.name if call.method not in ("list", "watch") else None
    return [Access(_PORT_VERBS[call.method], kind.group, kind.plural, namespace, name)]


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
    if sub is not None:
        resource = f"{resource}/{sub}"
    if sub == "exec":
        return [Access(v, group, resource, namespace, name) for v in ("get", "create")]
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


def _scope(access: Access) -> tuple[str, tuple[rbac.Rule, ...]]:
    if access.namespace == TRAINER_NAMESPACE:
        return "the Trainer's namespace", rbac.TRAINER
    if access.namespace is None:
        return "cluster-wide", rbac.CLUSTER
    return "the namespace", rbac.NAMESPACED


def denied(seen: Seen) -> list[str]:
    """Each access no rule of ``kfcompile.lifecycle.rbac`` allows, with the first test that
    needed it."""
    out = []
    for access, where in sorted(seen.accesses.items(), key=lambda kv: str(kv[0])):
        scope, rules = _scope(access)
        if not rbac.allows(rules, access.verb, access.group, access.resource, access.name):
            out.append(f"{access}: not allowed by the Role for {scope} ({where})")
    return out


def unused(seen: Seen) -> list[str]:
    """Each verb of each rule of ``kfcompile.lifecycle.rbac`` that no access needed: broader
    than the
    commands are."""
    used = {(_scope(a)[0], a.verb, a.group, a.resource) for a in seen.accesses}
    scopes = {
        "the namespace": rbac.NAMESPACED,
        "cluster-wide": rbac.CLUSTER,
        "the Trainer's namespace": rbac.TRAINER,
    }
    return [
        f"{scope}: {verb} {rule.resource}{'.' + rule.group if rule.group else ''} ({rule.why}) "
        "is granted but no request needed it"
        for scope, rules in scopes.items()
        for rule in rules
        for verb in rule.verbs
        if (scope, verb, rule.group, rule.resource) not in used
    ]
