"""Find the cluster: a kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``), else the
pod's service account. Error messages name files and contexts, never credentials.

An ``exec`` credential plugin is run by ``exec_credential`` (bounded by ``exec_timeout``), not by
the client, whose runner has no time limit and carries on unauthenticated when a plugin fails.
A bearer token (a kubeconfig's ``token`` or ``tokenFile``, a plugin's, the service account's) is
checked, sent and renewed by ``bearer``, not by the client, which sends a token file's newline.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
from attrs import evolve, frozen

from kfcompile.spec.errors import KfcompileError, Problem
from kfcompile_kube import compat
from kfcompile_kube.bearer import Bearer, Fetched, TokenError, checked, file_source, utc_now
from kfcompile_kube.client_modules import (
    ConfigException,
    ConfigNode,
    Configuration,
    InClusterConfigLoader,
    KubeConfigLoader,
    KubeConfigMerger,
)
from kfcompile_kube.compat import Client, RestClient
from kfcompile_kube.errors import server_of
from kfcompile_kube.exec_credential import EXEC_TIMEOUT, ExecPlugin
from kfcompile_kube.proxy import ProxyError, chosen
from kfcompile_kube.transport import REQUEST_TIMEOUT

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
    now: Callable[[], datetime] = utc_now,
) -> Connection:
    """Connect as kubectl would: ``kubeconfig`` (a path, or ``$KUBECONFIG``'s list of paths, merged
    like kubectl does, or ``~/.kube/config``) with ``context`` (default: its current context);
    without any kubeconfig file, the in-cluster service account in ``service_account_dir``.

    Raises ``ConfigError``. An explicit ``kubeconfig`` or ``context`` never falls back to the
    service account: asking for one thing and silently getting another would be worse. A user's
    ``exec`` plugin gets ``exec_timeout`` seconds per run (again when its token expires).
    ``request_timeout``: kubectl's ``--request-timeout`` in seconds (0 or ``None``: no limit),
    kept on the connection for the ``KubeCluster`` made from it. ``now``: the clock tokens
    are timed by (a token file's minute, an exec plugin token's expiry).
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
        connection = _from_kubeconfig(found, context, exec_timeout, env, now)
        return evolve(connection, request_timeout=timeout)

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
        connection = _in_cluster(Path(service_account_dir), env, now)
        return evolve(connection, request_timeout=timeout)
    except _NotInCluster as e:
        raise ConfigError(f"no cluster configuration: {missing}; in-cluster: {e}") from None


def _from_kubeconfig(
    paths: list[str],
    context: str | None,
    exec_timeout: float,
    env: Mapping[str, str],
    now: Callable[[], datetime],
) -> Connection:
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
        token = _take_credential(merged, name, exec_timeout, now)
    except TokenError as e:
        raise ConfigError(f"{at}: {e}") from None
    configuration = Configuration()
    try:
        loader = KubeConfigLoader(config_dict=merged, active_context=name, config_base_path=None)  # type: ignore[no-untyped-call]
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as e:
        raise ConfigError(f"{at}: {e}") from None
    except OSError as e:
        raise ConfigError(f"{at}: cannot read {e.filename}: {e.strerror or e}") from None
    except Exception as e:
        user = _mapping(_entry(merged, "users", _refs(merged, name)[0]), "user")
        said = _auth_provider_failure(e, user.get("auth-provider"))
        if said is None:
            raise
        raise ConfigError(f"{at}: {said}") from None
    if token is not None:
        # Replaces the loader's hook, if any (basic auth's), which puts its header back each time.
        hook = Bearer(*token, lambda e: ConfigError(f"{at}: {e}"), now)
        compat.bear(configuration, hook, hook.header)
    cluster = _mapping(_entry(merged, "clusters", _refs(merged, name)[1]), "cluster")
    try:
        configuration.proxy = chosen(configuration.host, cluster.get("proxy-url"), env)
    except ProxyError as e:
        raise ConfigError(f"{at}: {e}") from None
    if not configuration.verify_ssl and configuration.host.startswith("https://"):
        _unverified(configuration.host, f"insecure-skip-tls-verify in {at}")
    namespace = (loader.current_context.get("context") or {}).get("namespace") or "default"
    source = f"{where}, context {name}"
    return Connection(RestClient(configuration), str(namespace), source, context=name)


_said_unverified: set[str] = set()  # the servers warned of in this process


def _unverified(host: str, why: str) -> None:
    """Say once per process, in kfcompile's words, that ``host``'s certificate is not verified
    (logged: the command prints it alone on stderr), instead of urllib3's warning per request."""
    server, hostname = server_of(host), urlsplit(host).hostname or ""
    if server not in _said_unverified:
        _said_unverified.add(server)
        logging.getLogger("kfcompile_kube").warning(
            "kfcompile: warning: the TLS certificate of %s is not verified (%s): whoever is on "
            "the way can read and change every request, its credentials included",
            server,
            why,
        )
    # urllib3 warns per request ("Unverified HTTPS request is being made to host '<host>'").
    warnings.filterwarnings(
        "ignore",
        f"Unverified HTTPS request is being made to host '\\[?{re.escape(hostname)}\\]?'",
        urllib3.exceptions.InsecureRequestWarning,
    )


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


def _take_credential(
    merged: ConfigNode, context: str, timeout: float, now: Callable[[], datetime]
) -> tuple[Fetched, Callable[[], Fetched] | None] | None:
    """Take ``token``, ``tokenFile`` and ``exec`` out of the context's user, so the client
    neither sends a token unchecked nor runs the plugin, and give the bearer token they make and
    how to fetch it again (``bearer``); None when they make none. A user with an
    ``auth-provider`` keeps its token keys (the client's loader tries the provider first); a
    plugin runs only when the client's loader would have run it (no auth-provider, token or
    tokenFile), and a client certificate it gives takes its place in the user. TokenError (a
    PluginError too) when there is no usable credential."""
    user_name, cluster_name = _refs(merged, context)
    entry = _entry(merged, "users", user_name)
    user = _mapping(entry, "user")
    if entry is None:
        return None
    token_keys = () if "auth-provider" in user else ("token", "tokenFile")
    rest = {k: v for k, v in user.items() if k not in ("exec", *token_keys)}
    # Relative to the kubeconfig that names it, as the client's loader and kubectl resolve it.
    base = Path(os.path.abspath(os.path.dirname(entry.path))) if entry.path else Path()
    token: tuple[Fetched, Callable[[], Fetched] | None] | None = None
    if "tokenFile" in token_keys and "tokenFile" in user:
        fetch = file_source(base / str(user["tokenFile"]), "user tokenFile", now)
        try:
            token = fetch(), fetch
        except TokenError:
            if "token" not in user:
                raise
            # kubectl then sends the token beside it, and tries the file again each time.
            token = Fetched(checked(str(user["token"] or ""), "user token"), now()), fetch
    elif "token" in token_keys and "token" in user:
        token = Fetched(checked(str(user["token"] or ""), "user token")), None
    elif token_keys and "exec" in user:
        cwd = str(Path(entry.path).expanduser().resolve().parent) if entry.path else None
        cluster = _mapping(_entry(merged, "clusters", cluster_name), "cluster")
        plugin = ExecPlugin.from_config(user["exec"], cwd, cluster, timeout)
        credential = plugin.run()
        if credential.token is not None:
            token = plugin.bearer(credential), plugin.fetch
        else:  # a client certificate: the kubeconfig's *-data keys hold base64
            rest["client-certificate-data"] = _b64(credential.client_certificate or "")
            rest["client-key-data"] = _b64(credential.client_key or "")
    entry.value = {**entry.value, "user": rest}  # a new dict: the files' own stay as read
    return token


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


def _in_cluster(sa_dir: Path, env: Mapping[str, str], now: Callable[[], datetime]) -> Connection:
    for var in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        if not env.get(var):
            raise _NotInCluster(f"{var} is not set (not running in a pod)")
    token, ca = sa_dir / "token", sa_dir / "ca.crt"
    for f in (token, ca):
        if not f.is_file():
            raise _NotInCluster(f"{f}: file not found")
    configuration = Configuration()
    fetch = file_source(token, "service account token", now)
    try:
        InClusterConfigLoader(str(token), str(ca), environ=env).load_and_set(configuration)  # type: ignore[no-untyped-call]
        # The loader's hook would put back the file's content untrimmed, read each minute.
        hook = Bearer(fetch(), fetch, lambda e: ConfigError(f"in-cluster: {e}"), now)
    except (ConfigException, TokenError) as e:  # "Token file exists but empty." and the like
        raise _NotInCluster(str(e)) from None
    compat.bear(configuration, hook, hook.header)
    try:
        configuration.proxy = chosen(configuration.host, None, env)
    except ProxyError as e:
        raise ConfigError(f"in-cluster: {e}") from None
    ns_file = sa_dir / "namespace"
    namespace = ns_file.read_text().strip() if ns_file.is_file() else ""
    source = f"in-cluster service account ({configuration.host})"
    return Connection(RestClient(configuration), namespace or "default", source)
