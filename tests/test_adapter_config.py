"""kfcompile_kube.config.connect: which configuration wins, what errors say, and that they never
quote credentials. Kubeconfigs and service-account directories are written to tmp_path; the
process environment is passed explicitly so the machine's own ~/.kube/config never leaks in."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

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
