"""Which proxy the requests to an API server go through, chosen as kubectl chooses it, whatever
the client line (27.x reads no proxy setting; 36.x no kubeconfig ``proxy-url``; 36.x and 37.x
read the environment but proxy loopback too, so over plain http a proxy read the token):

- the cluster's ``proxy-url`` when the kubeconfig gives one, for every server, loopback
  included (client-go's ``http.ProxyURL``); http, https or socks5 (client-go's
  ``clientcmd/validation.go``), a SOCKS proxy resolving the server's name itself;
- else ``HTTPS_PROXY`` for an https server, ``HTTP_PROXY`` for an http one (upper case first,
  then lower: golang.org/x/net/http/httpproxy ``FromEnvironment``), a value without a scheme
  meaning http; never for ``localhost`` or a loopback address, nor for a host ``NO_PROXY``
  names (an address, a CIDR, a domain and its subdomains, ``.domain`` for subdomains only, any
  of them with ``:port``; ``*`` for every host).

A proxy that cannot be used is ``ProxyError``: one line saying why, without its credentials.
"""

from __future__ import annotations

import importlib.util
import ipaddress
from collections.abc import Mapping
from typing import Final
from urllib.parse import SplitResult, urlsplit

SCHEMES: Final = ("http", "https", "socks5")
_PORTS: Final = {"http": 80, "https": 443}


class ProxyError(Exception):
    """A proxy setting that cannot be used, in one line naming it (never its credentials)."""


def chosen(server: str, proxy_url: object, environ: Mapping[str, str]) -> str | None:
    """The proxy for the API server at ``server`` (None: connect directly), from a kubeconfig
    cluster's ``proxy-url`` (None when it has none) or else ``environ``."""
    if proxy_url is not None:
        return _usable(str(proxy_url), "cluster proxy-url")
    parts = urlsplit(server)
    name = "HTTPS_PROXY" if parts.scheme == "https" else "HTTP_PROXY"
    value = environ.get(name) or environ.get(name.lower())
    if not value or _bypassed(parts, environ.get("NO_PROXY") or environ.get("no_proxy") or ""):
        return None
    if "://" not in value:
        value = f"http://{value}"
    return _usable(value, name)


def _usable(url: str, name: str) -> str:
    """``url``, checked to be a proxy urllib3 can use; a SOCKS one given as ``socks5h``."""
    shown = _shown(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        port_text = url.rpartition("@")[2].partition("/")[0].rpartition(":")[2]
        if "port" in str(e).lower() and not port_text.startswith("["):
            why = f"port {port_text!r} is not a number from 1 to 65535"
        else:
            why = "not a URL"
        raise ProxyError(f"{name} {shown}: {why}") from None
    if parts.scheme not in SCHEMES:
        raise ProxyError(f"{name} {shown}: unsupported scheme {parts.scheme!r}, must be "
                         "http, https or socks5")  # fmt: skip
    if not parts.hostname:
        raise ProxyError(f"{name} {shown}: no host")
    if port == 0:
        raise ProxyError(f"{name} {shown}: port '0' is not a number from 1 to 65535")
    if parts.scheme != "socks5":
        return url
    if importlib.util.find_spec("socks") is None:  # PySocks: urllib3's SOCKS support needs it
        raise ProxyError(
            f"{name} {shown}: a SOCKS proxy needs the PySocks package (pip install PySocks)"
        )
    # kubectl's SOCKS5 dialer hands the proxy the server's name: urllib3 does so for socks5h.
    return "socks5h" + url.removeprefix("socks5")


def default_port(parts: SplitResult) -> int:
    """The port of a URL, its scheme's when it names none (1080 for SOCKS)."""
    return parts.port or _PORTS.get(parts.scheme, 1080)


def _shown(url: str) -> str:
    """``url`` without its credentials (``user:password@``) nor path."""
    scheme, _, rest = url.rpartition("://")
    where = rest.partition("/")[0].rpartition("@")[2]
    return f"{scheme}://{where}" if scheme else where


def _bypassed(server: SplitResult, no_proxy: str) -> bool:
    """Whether no proxy may be used for ``server``: loopback, or a host ``no_proxy`` names."""
    host = (server.hostname or "").lower().rstrip(".")
    port = default_port(server)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if host == "localhost" or (address is not None and address.is_loopback):
        return True
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            pass  # a name, or an address with a port
        else:
            if address is not None and address in network:
                return True
            continue
        name, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
        if entry_port and entry_port != str(port):
            continue
        name = name.strip("[]")
        if name.startswith("."):
            if host.endswith(name):
                return True
        elif host == name or host.endswith(f".{name}"):
            return True
    return False


def _has_port(entry: str) -> bool:
    """Whether a NO_PROXY entry ends in ``:port`` (an IPv6 address alone does not)."""
    head, colon, tail = entry.rpartition(":")
    return bool(colon) and tail.isdigit() and (head.endswith("]") or ":" not in head)
