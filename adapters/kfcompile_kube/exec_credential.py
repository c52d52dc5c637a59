"""Run a kubeconfig ``exec`` credential plugin with a time limit, as kubectl would.

The ``kubernetes`` client's own runner (``kubernetes/config/exec_provider.py``) waits for the
plugin without a limit, raises its stderr verbatim, and the loader only logs that and goes on
unauthenticated. ``config.connect`` therefore takes ``exec`` out of the user it hands the loader
and runs the plugin here instead: bounded, non-interactive, and failing with one line that names
the plugin's command. The plugin's output is hostile input: stdout may carry a token and is never
quoted; of stderr only a short excerpt is, with long opaque strings (tokens) redacted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from attrs import frozen

from kfcompile_kube.bearer import Fetched, TokenError, checked

EXEC_TIMEOUT: Final = 60.0  # seconds a plugin may take (an SSO login included)
EXCERPT_CHARS: Final = 120  # of the plugin's last stderr line, in an error
# Bytes of a plugin's output read: its stdout (an ExecCredential, a few KiB with a client
# certificate chain), the end of its stderr (of which only the last line is quoted).
STDOUT_LIMIT: Final = 4 * 2**20
STDERR_KEPT: Final = 64 * 2**10
EXPIRY_SKEW: Final = timedelta(seconds=30)  # run again this long before the credential expires
# A run of token characters this long, with a letter and a digit in it, is taken for a secret.
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_.\-]{20,}")
# The kubeconfig cluster keys an exec plugin may be told about (ExecCredential spec.cluster).
_CLUSTER_KEYS: Final = (
    "server",
    "tls-server-name",
    "insecure-skip-tls-verify",
    "certificate-authority-data",
    "proxy-url",
    "disable-compression",
)
_EXEC_EXTENSION: Final = "client.authentication.k8s.io/exec"


class PluginError(TokenError):
    """Why the plugin gave no credential, in one line that names its command."""


@frozen(repr=False, eq=False)
class Credential:
    token: str | None = None
    client_certificate: str | None = None  # PEM
    client_key: str | None = None  # PEM
    expiry: datetime | None = None


@frozen(repr=False, eq=False)
class ExecPlugin:
    """A user's ``exec`` section, ready to run."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]  # added to this process's environment
    api_version: str
    install_hint: str
    cwd: str | None  # the directory of the kubeconfig that names it (relative commands)
    cluster: Mapping[str, Any] | None  # provideClusterInfo
    timeout: float = EXEC_TIMEOUT

    @classmethod
    def from_config(
        cls,
        section: Any,
        cwd: str | None,
        cluster: Mapping[str, Any] | None,
        timeout: float = EXEC_TIMEOUT,
    ) -> ExecPlugin:
        """From a kubeconfig ``user.exec`` mapping; PluginError when it is malformed."""
        if not isinstance(section, Mapping):
            raise PluginError("exec: not a mapping")
        command = section.get("command")
        if not isinstance(command, str) or not command:
            raise PluginError("exec: command missing")
        api_version = section.get("apiVersion")
        if not isinstance(api_version, str) or not api_version:
            raise PluginError(f"exec plugin {command}: apiVersion missing")
        args = section.get("args") or []
        env_items = section.get("env") or []
        if not isinstance(args, list) or not isinstance(env_items, list):
            raise PluginError(f"exec plugin {command}: args and env must be lists")
        env = {}
        for item in env_items:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise PluginError(f"exec plugin {command}: env items need a name and a value")
            env[item["name"]] = str(item.get("value", ""))
        hint = section.get("installHint")
        return cls(
            command,
            tuple(str(a) for a in args),
            env,
            api_version,
            hint.strip().splitlines()[0] if isinstance(hint, str) and hint.strip() else "",
            cwd,
            _cluster_info(cluster) if section.get("provideClusterInfo") else None,
            timeout,
        )

    def run(self) -> Credential:
        """Run the plugin once; PluginError (naming the command) when it gives no credential."""
        info: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            info["cluster"] = dict(self.cluster)
        request = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": info}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(request)}
        try:
            process = subprocess.Popen(
                [self.command, *self.args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,  # its own process group: a timeout stops all of it
            )
        except FileNotFoundError:
            hint = f" ({_sanitised(self.install_hint)})" if self.install_hint else ""
            raise self._error(f"command not found{hint}") from None
        except OSError as e:
            raise self._error(f"cannot run: {e.strerror or e}") from None
        with process:  # closes the pipes and reaps it on every path
            try:
                stdout, stderr = _output(process, time.monotonic() + self.timeout)
            except subprocess.TimeoutExpired:
                _stop(process)
                raise self._error(f"no answer within {self.timeout:g}s; stopped") from None
            except _TooLong:
                _stop(process)
                limit = f"{STDOUT_LIMIT // 2**20} MiB"
                what = f"printed over {limit} (an ExecCredential is a few KiB); stopped"
                raise self._error(what) from None
        if process.returncode != 0:
            said = _excerpt(stderr)
            status = _exit_status(process.returncode)
            raise self._error(f"{status}{': ' + said if said else ''}")
        return self._credential(stdout)

    def fetch(self) -> Fetched:
        """Run the plugin for a token (``Bearer``'s fetch); PluginError when it gives none."""
        credential = self.run()
        if credential.token is None:
            raise self._error("gave no token this time")
        return self.bearer(credential)

    def bearer(self, credential: Credential) -> Fetched:
        """``credential``'s token (checked), fetched again ``EXPIRY_SKEW`` before it expires."""
        token = checked(credential.token or "", f"exec plugin {self.command}: status.token")
        expiry = credential.expiry
        return Fetched(token, None if expiry is None else expiry - EXPIRY_SKEW, expiry)

    def _credential(self, stdout: bytes) -> Credential:
        try:
            answer = json.loads(stdout)
        except ValueError:
            raise self._error("printed no ExecCredential (not JSON)") from None
        if not isinstance(answer, Mapping) or answer.get("kind") != "ExecCredential":
            raise self._error("printed no ExecCredential")
        if answer.get("apiVersion") != self.api_version:  # not quoted: its output is hostile
            raise self._error(f"answered with an apiVersion other than {self.api_version}")
        status = answer.get("status")
        status = status if isinstance(status, Mapping) else {}
        token, cert, key = (
            status.get(k) for k in ("token", "clientCertificateData", "clientKeyData")
        )
        expiry = _timestamp(status.get("expirationTimestamp"))
        if isinstance(token, str) and token:
            return Credential(token=token, expiry=expiry)
        if isinstance(cert, str) and cert and isinstance(key, str) and key:
            return Credential(client_certificate=cert, client_key=key, expiry=expiry)
        raise self._error("its ExecCredential has no status.token nor a client certificate and key")

    def _error(self, what: str) -> PluginError:
        return PluginError(f"exec plugin {self.command}: {what}")


def _cluster_info(cluster: Mapping[str, Any] | None) -> dict[str, Any]:
    """ExecCredential ``spec.cluster``: the cluster's connection keys and its exec extension."""
    cluster = cluster or {}
    info = {k: cluster[k] for k in _CLUSTER_KEYS if k in cluster}
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == _EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


class _TooLong(Exception):
    pass


def _output(process: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes]:
    """The plugin's stdout (``_TooLong`` past ``STDOUT_LIMIT``) and the end of its stderr
    (``STDERR_KEPT``), once it has exited; ``TimeoutExpired`` at ``deadline`` (monotonic)."""
    stdout, stderr = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, stdout)  # type: ignore[arg-type]
        selector.register(process.stderr, selectors.EVENT_READ, stderr)  # type: ignore[arg-type]
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(process.args, 0)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 64 * 1024)
                if not chunk:
                    selector.unregister(key.fileobj)
                buffer: bytearray = key.data
                buffer += chunk
                if len(stdout) > STDOUT_LIMIT:
                    raise _TooLong
                del stderr[:-STDERR_KEPT]
    process.wait(max(0.0, deadline - time.monotonic()))  # its pipes closed: it may not be done
    return bytes(stdout), bytes(stderr)


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended just now
        os.killpg(process.pid, signal.SIGKILL)


def _exit_status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _excerpt(stderr: bytes) -> str:
    """The last line the plugin wrote to stderr, printable, short, with tokens redacted."""
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return _sanitised(lines[-1]) if lines else ""


def _sanitised(text: str) -> str:
    text = "".join(c if c.isprintable() else " " for c in text).strip()
    text = _OPAQUE.sub(_redact, text)
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 3] + "..."


def _redact(match: re.Match[str]) -> str:
    word = match.group()
    opaque = any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
    return "[redacted]" if opaque else word


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
