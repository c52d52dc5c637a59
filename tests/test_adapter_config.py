"""kfcompile_kube.config.connect: which configuration wins, what errors say, and that they never
quote credentials. Kubeconfigs and service-account directories are written to tmp_path; the
process environment is passed explicitly so the machine's own ~/.kube/config never leaks in."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
from fakekube import Body, FakeKube
from fakekube.unreachable import closed_port

from kfcompile_kube.config import ConfigError, connect

TOKEN = "s3cr3t-t0ken-do-not-print"
NO_SA = "/nonexistent/serviceaccount"


def kubeconfig(path: Path, *, contexts: dict[str, str | None], current: str | None = "one") -> Path:
    """A kubeconfig with one cluster and user, and ``contexts`` (name -> namespace)."""
    lines = [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: c1",
        "  cluster: {server: 'http://127.0.0.1:1'}",
        "users:",
        "- name: u1",
        f"  user: {{token: {TOKEN}}}",
        "contexts:",
    ]
    for name, namespace in contexts.items():
        ns = f", namespace: {namespace}" if namespace else ""
        lines.append(f"- {{name: {name}, context: {{cluster: c1, user: u1{ns}}}}}")
    if current:
        lines.append(f"current-context: {current}")
    path.write_text("\n".join(lines) + "\n")
    return path


def service_account(directory: Path, namespace: str | None = "team-sa") -> Path:
    directory.mkdir()
    (directory / "token").write_text(TOKEN)
    (directory / "ca.crt").write_text(
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    )
    if namespace:
        (directory / "namespace").write_text(namespace + "\n")
    return directory


IN_CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def bearer(conn: object) -> str | None:
    settings = conn.api_client.configuration.auth_settings()  # type: ignore[attr-defined]
    return settings["BearerToken"]["value"] if "BearerToken" in settings else None


def test_explicit_path_uses_current_context_and_its_namespace(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", contexts={"one": "team-a", "two": None})
    conn = connect(str(path), environ={})
    assert conn.namespace == "team-a"
    assert conn.api_client.configuration.host == "http://127.0.0.1:1"
    assert bearer(conn) == f"Bearer {TOKEN}"
    assert str(path) in conn.source and "context one" in conn.source
    assert TOKEN not in conn.source


def test_chosen_context_without_namespace_means_default(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", contexts={"one": "team-a", "two": None})
    conn = connect(str(path), "two", environ={})
    assert conn.namespace == "default"
    assert "context two" in conn.source


def test_explicit_path_wins_over_kubeconfig_env(tmp_path: Path) -> None:
    explicit = kubeconfig(tmp_path / "explicit", contexts={"one": "from-explicit"})
    env_file = kubeconfig(tmp_path / "env", contexts={"one": "from-env"})
    conn = connect(str(explicit), environ={"KUBECONFIG": str(env_file)})
    assert conn.namespace == "from-explicit"


def test_kubeconfig_env_list_skips_missing_files_and_merges(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a", contexts={"one": "team-a"})
    second = kubeconfig(tmp_path / "b", contexts={"extra": "team-b"}, current=None)
    env = {"KUBECONFIG": f"{tmp_path / 'missing'}:{first}:{second}"}
    assert connect(environ=env).namespace == "team-a"
    assert connect(context="extra", environ=env).namespace == "team-b"
    # As with kubectl, the first file's current-context wins.
    third = kubeconfig(tmp_path / "c", contexts={"late": "team-c"}, current="late")
    assert connect(environ={"KUBECONFIG": f"{first}:{third}"}).namespace == "team-a"
    assert connect(environ={"KUBECONFIG": f"{third}:{first}"}).namespace == "team-c"


def test_home_kube_config_is_the_default(tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path / ".kube" / "config", contexts={"one": "home-ns"})
    # In-cluster variables are set too: a kubeconfig, when there is one, comes first.
    conn = connect(environ={"HOME": str(tmp_path), **IN_CLUSTER_ENV})
    assert conn.namespace == "home-ns"


def test_unknown_context_lists_the_available_ones(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", contexts={"one": "a", "two": "b"})
    with pytest.raises(ConfigError) as err:
        connect(str(path), "three", environ={})
    assert "'three'" in str(err.value)
    assert "available: one, two" in str(err.value)


def test_no_current_context_asks_for_one(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", contexts={"one": "a"}, current=None)
    with pytest.raises(ConfigError, match=r"no current-context; pass --context \(available: one\)"):
        connect(str(path), environ={})


def test_missing_explicit_kubeconfig_does_not_fall_back_to_in_cluster(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa")
    with pytest.raises(ConfigError, match=r"file not found \(from --kubeconfig\)"):
        connect(str(tmp_path / "typo"), service_account_dir=str(sa), environ=IN_CLUSTER_ENV)


def test_in_cluster_service_account(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa")
    conn = connect(service_account_dir=str(sa), environ={"HOME": str(tmp_path), **IN_CLUSTER_ENV})
    assert conn.namespace == "team-sa"
    assert conn.api_client.configuration.host == "https://10.96.0.1:443"
    assert conn.api_client.configuration.ssl_ca_cert == str(sa / "ca.crt")
    assert (bearer(conn) or "").lower() == f"bearer {TOKEN}"
    assert conn.source.startswith("in-cluster") and TOKEN not in conn.source


def test_in_cluster_without_namespace_file_means_default(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa", namespace=None)
    conn = connect(service_account_dir=str(sa), environ={"HOME": str(tmp_path), **IN_CLUSTER_ENV})
    assert conn.namespace == "default"


def test_neither_names_both_attempts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        connect(service_account_dir=NO_SA, environ={"HOME": str(tmp_path)})
    message = str(err.value)
    assert message.startswith("no cluster configuration: ")
    assert f"kubeconfig {tmp_path}/.kube/config: file not found" in message
    assert "set KUBECONFIG or pass --kubeconfig" in message
    assert "in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod)" in message


def test_neither_with_kubeconfig_env_and_partial_service_account(tmp_path: Path) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()  # no token file
    env = {"KUBECONFIG": str(tmp_path / "nope"), **IN_CLUSTER_ENV}
    with pytest.raises(ConfigError) as err:
        connect(service_account_dir=str(sa), environ=env)
    message = str(err.value)
    assert f"kubeconfig {tmp_path / 'nope'}: no such file (from KUBECONFIG)" in message
    assert f"in-cluster: {sa / 'token'}: file not found" in message


def test_context_without_any_kubeconfig_is_an_error_not_in_cluster(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa")
    env = {"HOME": str(tmp_path), **IN_CLUSTER_ENV}
    with pytest.raises(ConfigError, match="context 'prod' asked for, but kubeconfig"):
        connect(context="prod", service_account_dir=str(sa), environ=env)


def _broken_yaml(tmp_path: Path) -> tuple[str | None, str | None, dict[str, str], str]:
    path = tmp_path / "kc"
    path.write_text(f"apiVersion: v1\nusers:\n- name: u\n  user: {{token: {TOKEN}\n  oops: [\n")
    return str(path), None, {}, "not a valid kubeconfig (line"


def _unknown_context(tmp_path: Path) -> tuple[str | None, str | None, dict[str, str], str]:
    path = kubeconfig(tmp_path / "kc", contexts={"one": "a"})
    return str(path), "three", {}, "no context 'three'"


def _missing_ca_file(tmp_path: Path) -> tuple[str | None, str | None, dict[str, str], str]:
    path = tmp_path / "kc"
    path.write_text(
        "clusters: [{name: c, cluster: {server: 'https://h:6443',"
        " certificate-authority: ca.pem}}]\n"
        f"users: [{{name: u, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    return str(path), None, {}, "ca.pem"


def _empty_in_cluster_token(tmp_path: Path) -> tuple[str | None, str | None, dict[str, str], str]:
    sa = service_account(tmp_path / "sa")
    (sa / "token").write_text("")
    return None, None, {"HOME": str(tmp_path), **IN_CLUSTER_ENV}, "empty"


@pytest.mark.parametrize(
    "case", [_broken_yaml, _unknown_context, _missing_ca_file, _empty_in_cluster_token]
)
def test_errors_never_quote_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, case: object
) -> None:
    caplog.set_level(logging.DEBUG)
    path, context, env, expected = case(tmp_path)  # type: ignore[operator]
    with pytest.raises(ConfigError) as err:
        connect(path, context, service_account_dir=str(tmp_path / "sa"), environ=env)
    assert expected in str(err.value)
    # Nor in what a traceback would print: the chained exceptions it shows.
    texts = [str(err.value), repr(err.value), caplog.text]
    exc: BaseException | None = err.value
    while exc is not None:
        texts.append(str(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    for text in texts:
        assert TOKEN not in text


# --- a user's tokenFile and exec credential plugins ---------------------------------------------

EXEC_API = "client.authentication.k8s.io/v1"


def kubeconfig_for_user(path: Path, user: str, server: str = "http://127.0.0.1:1") -> Path:
    """A kubeconfig whose one context uses the user section ``user`` (flow YAML)."""
    path.write_text(
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {user}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    return path


def plugin(path: Path, body: str) -> Path:
    """An executable shell script: a real credential plugin."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def answer(token: str, expiry: str | None = None) -> str:
    status = f'"token": "{token}"' + (f', "expirationTimestamp": "{expiry}"' if expiry else "")
    return f'{{"apiVersion": "{EXEC_API}", "kind": "ExecCredential", "status": {{{status}}}}}'


def exec_user(command: str, **extra: str) -> str:
    more = "".join(f", {k}: {v}" for k, v in extra.items())
    return f"{{exec: {{apiVersion: {EXEC_API}, command: '{command}'{more}}}}}"


def config_error(tmp_path: Path, kc: Path, **kwargs: float) -> str:
    """The one line ``connect`` fails with, checked to be one line and to hold no token."""
    with pytest.raises(ConfigError) as err:
        connect(str(kc), environ={}, service_account_dir=NO_SA, **kwargs)
    text = str(err.value)
    assert "\n" not in text and TOKEN not in text
    assert err.value.__cause__ is None and err.value.__suppress_context__
    return text


def test_a_missing_token_file_is_one_line_naming_it(tmp_path: Path) -> None:
    kc = kubeconfig_for_user(tmp_path / "kc", "{tokenFile: gone/token}")
    text = config_error(tmp_path, kc)
    assert text.endswith(f"user tokenFile {tmp_path / 'gone' / 'token'}: No such file or directory")
    assert f"kubeconfig {kc}, context 'x'" in text


def test_a_token_file_is_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN)
    kc = kubeconfig_for_user(tmp_path / "kc", "{tokenFile: token}")
    assert bearer(connect(str(kc), environ={})) == f"Bearer {TOKEN}"


def test_an_exec_plugin_gives_the_token(tmp_path: Path) -> None:
    # A relative command is the kubeconfig's neighbour, not the working directory's.
    plugin(
        tmp_path / "cred.sh",
        f'test "$EXTRA" = yes || exit 9\ncase "$KUBERNETES_EXEC_INFO" in *ExecCredential*) ;; '
        f"*) exit 8;; esac\necho '{answer(TOKEN)}'\n",
    )
    kc = kubeconfig_for_user(
        tmp_path / "kc", exec_user("./cred.sh", env="[{name: EXTRA, value: 'yes'}]")
    )
    conn = connect(str(kc), environ={})
    assert bearer(conn) == f"Bearer {TOKEN}"
    assert TOKEN not in conn.source


def test_an_exec_plugin_that_is_missing_names_it_and_its_install_hint(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-plugin"
    kc = kubeconfig_for_user(
        tmp_path / "kc", exec_user(str(missing), installHint="'install it with: brew x'")
    )
    text = config_error(tmp_path, kc)
    assert text.endswith(f"exec plugin {missing}: command not found (install it with: brew x)"), (
        text
    )


def test_an_exec_plugin_that_fails_gives_a_short_sanitised_excerpt(tmp_path: Path) -> None:
    long = "x" * 300
    script = plugin(
        tmp_path / "fail.sh",
        f"echo 'first line, not shown' >&2\necho '{answer(TOKEN)}'\n"
        f"printf 'error: token {TOKEN} rejected \\033[31m {long}\\n\\n' >&2\nexit 3\n",
    )
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)))
    text = config_error(tmp_path, kc)
    head = f"exec plugin {script}: exited with status 3: error: token [redacted] rejected"
    assert text.startswith(f"kubeconfig {kc}, context 'x': {head}"), text
    assert "\033" not in text and "first line" not in text and text.endswith("...")
    assert len(text) < len(head) + len(str(kc)) + 140


def test_an_exec_plugin_that_hangs_is_stopped(tmp_path: Path) -> None:
    script = plugin(tmp_path / "hang.sh", "sleep 20\n")
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)))
    text = config_error(tmp_path, kc, exec_timeout=0.3)
    assert text.endswith(f"exec plugin {script}: no answer within 0.3s; stopped")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (TOKEN, "printed no ExecCredential (not JSON)"),
        ('{"kind": "Pod"}', "printed no ExecCredential"),
        (
            answer(TOKEN).replace(EXEC_API, "client.authentication.k8s.io/v1beta1"),
            f"answered with an apiVersion other than {EXEC_API}",
        ),
        (
            answer("").replace('"token": ""', '"x": 1'),
            "its ExecCredential has no status.token nor a client certificate and key",
        ),
    ],
    ids=["not-json", "not-a-credential", "other-api-version", "no-token"],
)
def test_an_exec_plugin_answer_that_is_no_credential(
    tmp_path: Path, output: str, expected: str
) -> None:
    script = plugin(tmp_path / "odd.sh", f"echo '{output}'\n")
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)))
    assert config_error(tmp_path, kc).endswith(f"exec plugin {script}: {expected}")


def test_an_exec_plugin_client_certificate_is_used(tmp_path: Path) -> None:
    pem = "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n"
    key = "-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n"
    status = f'"clientCertificateData": "{pem}", "clientKeyData": "{key}"'
    credential = f'{{"apiVersion": "{EXEC_API}", "kind": "ExecCredential", "status": {{{status}}}}}'
    script = plugin(tmp_path / "cert.sh", f"printf '%s\\n' '{credential}'\n")
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)), server="https://h:6443")
    configuration = connect(str(kc), environ={}).api_client.configuration
    assert Path(configuration.cert_file).read_text() == pem.replace("\\n", "\n")
    assert Path(configuration.key_file).read_text() == key.replace("\\n", "\n")
    assert bearer(connect(str(kc), environ={})) is None


def counting_plugin(tmp_path: Path, expiry: str, fail_after: int = 99) -> Path:
    """A plugin answering token-1, token-2, ... (its runs counted in a file), then failing."""
    count = tmp_path / "runs"
    body = (
        f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        f'if [ $n -gt {fail_after} ]; then echo "refresh denied" >&2; exit 1; fi\n'
        f"echo '{answer('token-$n', expiry)}' | sed \"s/\\$n/$n/\"\n"
    )
    return plugin(tmp_path / "count.sh", body)


def test_an_expired_exec_token_is_fetched_again(tmp_path: Path) -> None:
    script = counting_plugin(tmp_path, "2000-01-01T00:00:00Z")
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)))
    conn = connect(str(kc), environ={})
    assert bearer(conn) == "Bearer token-2"  # expired at once: run again before the request
    assert bearer(conn) == "Bearer token-3"


def test_a_valid_exec_token_is_kept(tmp_path: Path) -> None:
    script = counting_plugin(tmp_path, "2999-01-01T00:00:00Z")
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)))
    conn = connect(str(kc), environ={})
    assert [bearer(conn), bearer(conn)] == ["Bearer token-1", "Bearer token-1"]


def test_a_failed_refresh_is_one_line_naming_the_plugin(tmp_path: Path) -> None:
    script = counting_plugin(tmp_path, "2000-01-01T00:00:00Z", fail_after=1)
    kc = kubeconfig_for_user(tmp_path / "kc", exec_user(str(script)))
    conn = connect(str(kc), environ={})
    with pytest.raises(ConfigError) as err:
        bearer(conn)
    assert str(err.value) == (
        f"kubeconfig {kc}, context 'x': exec plugin {script}: exited with status 1: refresh denied"
    )


def test_a_token_beside_exec_wins_and_the_plugin_never_runs(tmp_path: Path) -> None:
    script = plugin(tmp_path / "never.sh", f"touch {tmp_path / 'ran'}\necho '{answer('other')}'\n")
    user = exec_user(str(script)).removesuffix("}") + f", token: {TOKEN}}}"
    kc = kubeconfig_for_user(tmp_path / "kc", user)
    assert bearer(connect(str(kc), environ={})) == f"Bearer {TOKEN}"
    assert not (tmp_path / "ran").exists()


def test_the_composition_root_wires_the_session_as_the_cli_does(tmp_path: Path) -> None:
    """``kfcompile_kube.session``: the one place the ports become a lifecycle Session (the CLI,
    the TorchX scheduler, the NeMo-Run executor and the examples all take it)."""
    import random

    import kfcompile_kube
    from kfcompile_kube import KubeCluster
    from kfcompile_local import SystemClock

    path = kubeconfig(tmp_path / "kc", contexts={"one": "team-a", "two": None})
    told: list[str] = []
    session, conn = kfcompile_kube.session(
        str(path), "two", request_timeout=7, retry_for=3, on_retry=lambda what, _: told.append(what)
    )
    assert conn.namespace == "default" and conn.request_timeout == 7
    assert isinstance(session.cluster, KubeCluster) and isinstance(session.clock, SystemClock)
    assert session.cluster._transport.request_timeout == 7  # the connection's, not the default
    assert session.jitter is random.random  # real jitter: retries of many clients spread out
    assert session.retry_for == 3 and session.on_retry is not None
    with pytest.raises(kfcompile_kube.ConfigError):
        kfcompile_kube.session(str(tmp_path / "missing"))


# --- an OIDC auth-provider whose identity provider cannot help ------------------------------------

OIDC_SECRETS = ("oidc-client-s3cret", "oidc-refresh-t0ken")


def oidc_kubeconfig(path: Path, issuer: str) -> Path:
    """A user of the client's ``oidc`` auth-provider whose id-token has expired (``exp`` 1000),
    so loading the kubeconfig refreshes it at ``issuer``."""

    def b64(part: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")

    token = f"{b64({'alg': 'none'})}.{b64({'exp': 1000})}.sig"
    provider = {
        "name": "oidc",
        "config": {
            "client-id": "kfcompile",
            "client-secret": OIDC_SECRETS[0],
            "id-token": token,
            "idp-issuer-url": issuer,
            "refresh-token": OIDC_SECRETS[1],
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"auth-provider": provider}}],
        "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "one",
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_an_oidc_refresh_its_issuer_cannot_serve_is_one_line_without_secrets(
    tmp_path: Path,
) -> None:
    """The client's refresh raises urllib3's error for an issuer that refuses connections, and a
    KeyError for one whose discovery document has no ``token_endpoint``: either is one line
    naming the provider and the issuer, never its tokens."""
    unreachable = f"http://127.0.0.1:{closed_port()}"
    with FakeKube() as elsewhere:
        elsewhere.faults.add(answer=Body(b"{}"))  # a discovery document without keys
        for issuer, why in ((unreachable, "cannot reach it"), (elsewhere.url, "KeyError")):
            with pytest.raises(ConfigError) as info:
                connect(str(oidc_kubeconfig(tmp_path / "kc", issuer)), environ={})
            said = str(info.value)
            assert len(said.splitlines()) == 1, said
            assert f"oidc auth-provider cannot refresh its token at {issuer}" in said
            assert why in said and not any(s in said for s in OIDC_SECRETS)
