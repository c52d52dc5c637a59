"""Find the cluster: a kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``), else the
pod's service account. Error messages name files and contexts, never credentials.

An ``exec`` credential plugin is run by ``exec_credential`` (bounded by ``exec_timeout``), not by
the client, whose runner has no time limit and carries on unauthenticated when a plugin fails.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attrs import evolve, frozen
from kubernetes.client.configuration import Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger

from kfcompile.spec.errors import KfcompileError, Problem
from kfcompile_kube.cluster import REQUEST_TIMEOUT
from kfcompile_kube.compat import Client, RestClient
from kfcompile_kube.errors import server_of
from kfcompile_kube.exec_credential import (
    EXEC_TIMEOUT,
    Credential,
    ExecPlugin,
    PluginError,
    TokenRefresher,
)

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ConfigError(KfcompileError):
    """No usable cluster configuration; the message says what was tried and why it failed."""

    def __init__(self, message: str) -> None:
        super().__init__([Problem("", message)])


@frozen
class Connection:
    """An API client for one cluster, the namespace to work in by default, and how long each
    request may wait for its answer (``KubeCluster(request_timeout=)``; ``None``: no limit)."""

    api_client: Client
    namespace: str
    source: str  # where the configuration came from, for messages ("kubeconfig ... context ...")
    request_timeout: float | None = REQUEST_TIMEOUT
    context: str | None = None  # the kubeconfig context used (None: in-cluster)

    def close(self) -> None:
        self.api_client.close()


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
    exec_timeout: float = EXEC_TIMEOUT,
    request_timeout: float | None = REQUEST_TIMEOUT,
) -> Connection:
    """Connect as kubectl would: ``kubeconfig`` (a path, or ``$KUBECONFIG``'s list of paths, merged
    like kubectl does, or ``~/.kube/config``) with ``context`` (default: its current context);
    without any kubeconfig file, the in-cluster service account in ``service_account_dir``.

    Raises ``ConfigError``. An explicit ``kubeconfig`` or ``context`` never falls back to the
    service account: asking for one thing and silently getting another would be worse. A user's
    ``exec`` plugin gets ``exec_timeout`` seconds per run (again when its token expires).
    ``request_timeout``: kubectl's ``--request-timeout`` in seconds (0 or ``None``: no limit),
    kept on the connection for the ``KubeCluster`` made from it.
    """
    env = os.environ if environ is None else environ
    if kubeconfig is not None:
        paths = [kubeconfig]
    elif env.get("KUBECONFIG"):
        paths = [p for p in env["KUBECONFIG"].split(os.pathsep) if p]
    else:
        home = env.get("HOME")
        paths = [str(Path(home) / ".kube" / "config") if home else "~/.kube/config"]
    found = [p for p in paths if Path(p).expanduser().is_file()]
    timeout = request_timeout or None
    if found:
        return evolve(_from_kubeconfig(found, context, exec_timeout), request_timeout=timeout)

    if kubeconfig is not None:
        raise ConfigError(f"kubeconfig {kubeconfig}: file not found (from --kubeconfig)")
    missing = f"kubeconfig {os.pathsep.join(paths)}: " + (
        "no such file (from KUBECONFIG)"
        if env.get("KUBECONFIG")
        else "file not found (set KUBECONFIG or pass --kubeconfig)"
    )
    if context is not None:
        raise ConfigError(f"context {context!r} asked for, but {missing}")
    try:
        return evolve(_in_cluster(Path(service_account_dir), env), request_timeout=timeout)
    except _NotInCluster as e:
        raise ConfigError(f"no cluster configuration: {missing}; in-cluster: {e}") from None


def _from_kubeconfig(paths: list[str], context: str | None, exec_timeout: float) -> Connection:
    where = f"kubeconfig {os.pathsep.join(paths)}"
    try:
        merger: Any = KubeConfigMerger(os.pathsep.join(paths))  # type: ignore[no-untyped-call]
        merged = merger.config
    except ConfigException as e:  # its messages name keys and paths only
        raise ConfigError(f"{where}: {e}") from None
    except OSError as e:
        raise ConfigError(f"{where}: {e.strerror}") from None
    except Exception as e:
        # A YAML error quotes the offending line, which may hold a token: give its position only.
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{where}: not a valid kubeconfig{at}") from None
    if merged is None:
        raise ConfigError(f"{where}: empty")
    config: dict[str, Any] = merged.value
    names = [str(c["name"]) for c in config.get("contexts") or [] if "name" in c]
    available = f"available: {', '.join(names)}" if names else "it defines no contexts"
    # kubectl takes the first current-context of the list; the client's merger the last.
    current = next((c["current-context"] for c in merger.config_files.values()
                    if c.get("current-context")), None)  # fmt: skip
    name = context if context is not None else current
    if not name:
        raise ConfigError(f"{where}: no current-context; pass --context ({available})")
    if name not in names:
        raise ConfigError(f"{where}: no context {name!r} ({available})")

    at = f"{where}, context {name!r}"
    try:
        plugin, credential = _run_exec_plugin(merged, name, exec_timeout)
    except PluginError as e:
        raise ConfigError(f"{at}: {e}") from None
    configuration = Configuration()
    try:
        loader = KubeConfigLoader(config_dict=merged, active_context=name, config_base_path=None)  # type: ignore[no-untyped-call]
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as e:
        raise ConfigError(f"{at}: {e}") from None
    except OSError as e:  # the client opens a user's tokenFile unguarded
        user = _mapping(_entry(merged, "users", _refs(merged, name)[0]), "user")
        what = "user tokenFile" if "tokenFile" in user else "cannot read"
        raise ConfigError(f"{at}: {what} {e.filename}: {e.strerror or e}") from None
    except Exception as e:
        user = _mapping(_entry(merged, "users", _refs(merged, name)[0]), "user")
        said = _auth_provider_failure(e, user.get("auth-provider"))
        if said is None:
            raise
        raise ConfigError(f"{at}: {said}") from None
    if plugin is not None and credential is not None and credential.token is not None:
        # Replaces the loader's hook, which would put the first token back before each request.
        refresh = None
        if credential.expiry is not None:
            refresh = TokenRefresher(plugin, credential.expiry, lambda e: ConfigError(f"{at}: {e}"))
        configuration.refresh_api_key_hook = refresh  # type: ignore[assignment]
    namespace = (loader.current_context.get("context") or {}).get("namespace") or "default"
    source = f"{where}, context {name}"
    return Connection(_client(configuration), str(namespace), source, context=name)


# What an auth provider's token refresh (the client's oidc, gcp, azure) raises when its identity
# provider cannot be reached, or answers what it cannot use: (module, class), looked up only
# among the modules imported (an error of one not imported cannot have been raised).
_UNREACHABLE = (("urllib3.exceptions", "HTTPError"), ("requests.exceptions", "RequestException"))
_REFUSED = (
    ("oauthlib.oauth2.rfc6749.errors", "OAuth2Error"),
    ("google.auth.exceptions", "GoogleAuthError"),
    ("builtins", "ValueError"),  # not JSON
    ("builtins", "KeyError"),  # JSON without token_endpoint
)


def _classes(names: tuple[tuple[str, str], ...]) -> tuple[type, ...]:
    return tuple(getattr(sys.modules[m], c) for m, c in names if m in sys.modules)


def _auth_provider_failure(error: Exception, provider: object) -> str | None:
    """One line for ``error`` from the user's ``auth-provider``, naming the identity provider's
    server, never the tokens; None for anything else (a bug, raised as it is)."""
    if not isinstance(provider, Mapping):
        return None
    if isinstance(error, _classes(_UNREACHABLE)):
        why = "cannot reach it"
    elif isinstance(error, _classes(_REFUSED)):
        why = f"its answer was refused ({type(error).__name__})"
    else:
        return None
    config = provider.get("config")
    issuer = config.get("idp-issuer-url") if isinstance(config, Mapping) else None
    at = f" at {server_of(issuer)}" if isinstance(issuer, str) and issuer else ""
    name = provider.get("name", "?")
    return f"the user's {name} auth-provider cannot refresh its token{at}: {why}"


# --- exec credential plugins ----------------------------------------------------------------------


def _run_exec_plugin(
    merged: ConfigNode, context: str, timeout: float
) -> tuple[ExecPlugin | None, Credential | None]:
    """Take ``exec`` out of the context's user, so the client never runs it, and run it here
    when the client would have (no auth-provider, token or tokenFile); the credential it gives
    takes its place in the user. PluginError when it gives none."""
    user_name, cluster_name = _refs(merged, context)
    entry = _entry(merged, "users", user_name)
    user = _mapping(entry, "user")
    if entry is None or "exec" not in user:
        return None, None
    rest = {k: v for k, v in user.items() if k != "exec"}
    plugin = credential = None
    if not any(k in rest for k in ("auth-provider", "token", "tokenFile")):
        cwd = str(Path(entry.path).expanduser().resolve().parent) if entry.path else None
        cluster = _mapping(_entry(merged, "clusters", cluster_name), "cluster")
        plugin = ExecPlugin.from_config(user["exec"], cwd, cluster, timeout)
        credential = plugin.run()
        if credential.token is not None:
            rest["token"] = credential.token
        else:  # a client certificate: the kubeconfig's *-data keys hold base64
            rest["client-certificate-data"] = _b64(credential.client_certificate or "")
            rest["client-key-data"] = _b64(credential.client_key or "")
    entry.value = {**entry.value, "user": rest}  # a new dict: the files' own stay as read
    return plugin, credential


def _refs(merged: ConfigNode, context: str) -> tuple[object, object]:
    """The user and cluster names the context refers to."""
    ctx = _mapping(_entry(merged, "contexts", context), "context")
    return ctx.get("user"), ctx.get("cluster")


def _entry(merged: ConfigNode, key: str, name: object) -> ConfigNode | None:
    """The merged ``key[]`` entry called ``name`` (the merger wraps each in a ConfigNode)."""
    for entry in merged.value.get(key) or []:
        if isinstance(entry, ConfigNode) and _mapping(entry).get("name") == name:
            return entry
    return None


def _mapping(entry: ConfigNode | None, key: str | None = None) -> Mapping[str, Any]:
    value = entry.value if entry is not None else None
    if key is not None and isinstance(value, Mapping):
        value = value.get(key)
    return value if isinstance(value, Mapping) else {}


def _b64(text: str) -> str:
    return base64.standard_b64encode(text.encode()).decode()


class _NotInCluster(Exception):
    pass


def _in_cluster(sa_dir: Path, env: Mapping[str, str]) -> Connection:
    for var in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        if not env.get(var):
            raise _NotInCluster(f"{var} is not set (not running in a pod)")
    token, ca = sa_dir / "token", sa_dir / "ca.crt"
    for f in (token, ca):
        if not f.is_file():
            raise _NotInCluster(f"{f}: file not found")
    configuration = Configuration()
    try:
        # The loader re-reads the token file every minute: kubelet rotates bound tokens.
        InClusterConfigLoader(str(token), str(ca), environ=env).load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as e:  # "Token file exists but empty." and the like: no contents
        raise _NotInCluster(str(e)) from None
    ns_file = sa_dir / "namespace"
    namespace = ns_file.read_text().strip() if ns_file.is_file() else ""
    source = f"in-cluster service account ({configuration.host})"
    return Connection(_client(configuration), namespace or "default", source)


def _client(configuration: Configuration) -> RestClient:
    # The lifecycle retries with its own backoff; urllib3's silent retries would multiply timeouts.
    configuration.retries = False
    return RestClient(configuration)
