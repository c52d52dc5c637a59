"""The MultiKueue worker clusters a user maps for each manager (``lifecycle.multikueue.Workers``):
the mapping file (``$KFCOMPILE_CLUSTERS``, else ``$XDG_CONFIG_HOME/kfcompile/clusters.yaml``),
read with the safe bounded YAML loader and checked with one line per problem, and
``running_on``, which follows a job only to a mapped worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import schema_check
from fakekube.cluster import TwoClusters
from hypothesis import example, given
from hypothesis import strategies as st
from test_multikueue import submitted

from kfcompile.lifecycle import ClusterError, find
from kfcompile.lifecycle.multikueue import Unmapped, Workers, read_clusters, running_on
from kfcompile.testing.kueue import WORKER
from kfcompile_local.clusters import MAX_BYTES, mapped_workers

GOOD = """\
managers:
  prod-manager:          # the manager's kubeconfig context
    worker-1: prod-w1
    worker-2: "arn:aws:eks:us-east-1:1:cluster/w2"
  staging: {}
"""


def test_the_documented_shape_reads_as_manager_worker_context() -> None:
    assert read_clusters(GOOD, "clusters.yaml") == {
        "prod-manager": {"worker-1": "prod-w1", "worker-2": "arn:aws:eks:us-east-1:1:cluster/w2"},
        "staging": {},
    }
    assert read_clusters("", "clusters.yaml") == {}


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ("- a\n", ["f: expected a mapping with one key, managers"]),
        ("workers: {}\n", ["f: expected a mapping with one key, managers"]),
        ("managers: [a]\n", ["f: managers: expected a mapping of manager contexts"]),
        (
            "managers:\n  m: [w]\n",
            ["f: managers.m: expected a mapping of worker cluster -> context"],
        ),
        (
            "managers:\n  m:\n    Prod_W1: c\n    w2: 3\n    w3: ''\n",
            [
                "f: managers.m.Prod_W1: not a worker cluster name (a MultiKueueCluster's: a "
                "lowercase RFC 1123 subdomain)",
                "f: managers.m.w2: expected a kubeconfig context's name",
                "f: managers.m.w3: expected a kubeconfig context's name",
            ],
        ),
        (
            'managers:\n  m:\n    w: "a\\nb"\n',
            ["f: managers.m.w: expected a kubeconfig context's name"],
        ),
        ("managers: {m: {w: c}, m: {}}\n", None),  # a duplicate key: the loader's problem
        ("managers: &a [*a]\n", None),  # a recursive alias: refused before it is built
        ("managers:\n  m:\n    w: !!python/object:os.system c\n", None),  # safe loading
    ],
)
def test_a_malformed_file_is_one_line_per_problem(text: str, problems: list[str] | None) -> None:
    with pytest.raises(ClusterError) as caught:
        read_clusters(text, "f")
    lines = str(caught.value).splitlines()
    if problems is not None:
        assert lines == problems
    assert lines and all(line.startswith("f: ") for line in lines)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))  # fmt: skip
@example({"\xa0": None})  # a no-break space, once shown as "managers. : ..." (Hypothesis)
@example({"m": {"w\u2028": "c"}})
def test_any_yaml_value_reads_or_is_refused_in_printable_lines(value: object) -> None:
    try:
        found = read_clusters(json.dumps({"managers": value}), "f")
    except ClusterError as exc:
        assert all(line.isprintable() for line in str(exc).splitlines())
        return
    for workers in found.values():
        assert all(isinstance(c, str) and c for c in workers.values())


def test_the_file_is_found_by_env_else_in_the_config_home(tmp_path: Path) -> None:
    named = tmp_path / "mine.yaml"
    named.write_text("managers: {m: {w1: from-env}}\n")
    home = tmp_path / "config" / "kfcompile"
    home.mkdir(parents=True)
    (home / "clusters.yaml").write_text("managers: {m: {w1: from-home, w2: c2}}\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    found = mapped_workers("m", {"w2": "flag"}, environ=env)
    assert dict(found.contexts) == {"w1": "from-home", "w2": "flag"}  # given ones win
    found = mapped_workers("m", environ={**env, "KFCOMPILE_CLUSTERS": str(named)})
    assert dict(found.contexts) == {"w1": "from-env"} and found.file == str(named)
    assert dict(mapped_workers("other", environ=env).contexts) == {}
    assert dict(mapped_workers(None, {"w": "c"}, environ=env).contexts) == {"w": "c"}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, " (from KFCOMPILE_CLUSTERS): no such file"),
        (b"x" * (MAX_BYTES + 1), f": larger than {MAX_BYTES:,} bytes: not a cluster mapping"),
        (b"\xff\xfe", ": not UTF-8 text"),
        (b"managers: {m: {w: [c]}}", ": managers.m.w: expected a kubeconfig context's name"),
    ],
)
def test_a_file_that_cannot_be_used_is_one_line(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    path = tmp_path / "clusters.yaml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ClusterError) as caught:
        mapped_workers("m", environ={"KFCOMPILE_CLUSTERS": str(path)})
    assert str(caught.value) == f"{path}{problem}"


def test_running_on_follows_only_a_mapped_worker(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library's way: the mapping is given, and an unmapped worker is ``Unmapped`` before
    anything reaches any other cluster (``reach`` is never called)."""
    with TwoClusters(schema_check.require_shared(), mapped=False) as clusters:
        clusters.wire(monkeypatch)
        submitted(clusters, capsys, tmp_path)
        manager = clusters.manager.session()
        job = find(manager, "default", "demo")
        reached: list[tuple[str, str]] = []

        def reach(cluster: str, context: str) -> object:
            reached.append((cluster, context))
            return clusters.worker.session()

        with pytest.raises(Unmapped) as caught:
            running_on(manager, job, Workers("manager", {}), reach)  # type: ignore[arg-type]
        assert reached == [] and f"runs on worker cluster {WORKER}, which is not mapped" in str(
            caught.value
        )
        mapped = Workers("manager", {WORKER: "worker-ctx"})
        assert running_on(manager, job, mapped, reach) is not manager  # type: ignore[arg-type]
        assert reached == [(WORKER, "worker-ctx")]
