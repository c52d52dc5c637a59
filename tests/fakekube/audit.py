"""Every call the commands make to the suite's clusters (``cluster.PortCluster``,
``LocalCluster``), as the authorizer sees it, checked against ``kfcompile.lifecycle.rbac`` at the
end of the session (``tests/conftest.py``) and by ``tests/test_rbac_requests.py``. Discovery
needs no Role; an exec (a WebSocket upgrade, a GET) is authorized as ``get`` up to Kubernetes
1.34 and ``create`` from 1.35 (KEP-4006), so it needs both."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kfcompile.lifecycle import rbac
from kfcompile.lifecycle.target_evidence import TRAINER_NAMESPACE
from kfcompile.testing import Call, Calls, Store


@dataclass(frozen=True)
class Access:
    """One authorization a call needs (``namespace`` None: cluster-wide)."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None = None

    def __str__(self) -> str:
        where = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{self.verb} {what}{f' {self.name}' if self.name else ''} {where}"


def of_call(call: Call, store: Store) -> list[Access]:
    """What one port call needs (nothing for a kind not served: discovery says so first)."""
    kind = store.served(call.api_version, call.kind) if call.method != "served" else None
    if kind is None:
        return []
    namespace = call.namespace if kind.namespaced else None
    if call.method in ("pod_log", "exec"):
        sub = "log" if call.method == "pod_log" else "exec"
        verbs = ("get",) if sub == "log" else ("get", "create")
        return [Access(verb, "", f"pods/{sub}", namespace, call.name) for verb in verbs]
    name = call.name if call.method not in ("list", "watch", "create") else None
    return [Access(call.method, kind.group, kind.plural, namespace, name)]


class Seen:
    """Distinct accesses, each with the first test that needed it; ``also``: more to tell."""

    def __init__(self) -> None:
        self.accesses: dict[Access, str] = {}
        self.also: list[Seen] = []

    def add(self, accesses: Iterable[Access]) -> None:
        where = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        for seen in (self, *self.also):
            for access in accesses:
                seen.accesses.setdefault(access, where)

    def calls(self, calls: Calls, store: Store) -> None:
        """Record each call of a fake (its ``FakeCluster.calls``) from now on."""
        calls.listeners.append(lambda call: self.add(of_call(call, store)))


AUDIT = Seen()  # the whole session's


@contextmanager
def recording() -> Iterator[Seen]:
    """What the clusters record while this lasts (as well as into ``AUDIT``)."""
    AUDIT.also.append(seen := Seen())
    try:
        yield seen
    finally:
        AUDIT.also.remove(seen)


_SCOPES = {"the namespace": rbac.NAMESPACED, "cluster-wide": rbac.CLUSTER,
           "the Trainer's namespace": rbac.TRAINER}  # fmt: skip


def _scope(access: Access) -> str:
    if access.namespace == TRAINER_NAMESPACE:
        return "the Trainer's namespace"
    return "cluster-wide" if access.namespace is None else "the namespace"


def denied(seen: Seen) -> list[str]:
    """Each access no rule of ``kfcompile.lifecycle.rbac`` allows, with its first test."""
    return [f"{access}: not allowed by the Role for {_scope(access)} ({where})"
            for access, where in sorted(seen.accesses.items(), key=lambda kv: str(kv[0]))
            if not rbac.allows(_SCOPES[_scope(access)], access.verb, access.group,
                               access.resource, access.name)]  # fmt: skip


def unused(seen: Seen) -> list[str]:
    """Each verb of each rule of ``kfcompile.lifecycle.rbac`` no access needed."""
    used = {(_scope(a), a.verb, a.group, a.resource) for a in seen.accesses}
    return [f"{scope}: {verb} {rule.resource}{'.' + rule.group if rule.group else ''} "
            f"({rule.why}) is granted but no request needed it"
            for scope, rules in _SCOPES.items() for rule in rules for verb in rule.verbs
            if (scope, verb, rule.group, rule.resource) not in used]  # fmt: skip
