"""Every independent problem of a spec in one run (issue 27 item 1, issue 25 "one pass").

Loading used to come in phases: a field of the wrong type hid every rule between fields, a
missing required field hid them too, and the API server's rules on the spec's own objects ran
only at render, after the spec had loaded, so a spec with three mistakes reported two and the
third only once they were fixed. Now the field rules, the rules between fields (each skipped
only when it reads a field of the wrong type) and the Kubernetes rules of the objects a spec
embeds all run when it is loaded: N independent mistakes are N lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfcompile import SpecError, structure
from kfcompile.cli import main

BASE: dict[str, Any] = {"name": "job", "image": "img:1"}
GT_TEN = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gpu-count", "operator": "Gt", "values": ["ten"]}]}
            ]
        }
    }
}
GT_PATH = (
    "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0].values[0]"
)
EFA = "vpc.amazonaws.com/efa"

# Independent mistakes, each in fields of its own: what is written over BASE (None removes a
# field), and the one line it gives, by its path. Structuring errors, field rules, rules
# between fields and the API server's rules on the spec's objects, mixed.
MISTAKES: dict[str, tuple[dict[str, Any], str]] = {
    "unknown field": ({"imagee": "x"}, "imagee"),
    "missing field": ({"image": None}, "image"),
    "wrong type": ({"num_nodes": "two"}, "num_nodes"),
    "not a boolean": ({"suspend": 1}, "suspend"),
    "not a choice": ({"image_pull_policy": "Sometimes"}, "image_pull_policy"),
    "bad quantity": ({"cpu_request": "2x"}, "cpu_request"),
    "fractional EFA": ({"extra_resource_limits": {EFA: "1.5"}}, f'extra_resource_limits["{EFA}"]'),
    "unprefixed resource": (
        {"extra_resource_requests": {"pods": "2"}},
        "extra_resource_requests.pods",
    ),
    "GPU resource": ({"gpu_resource": "gpu"}, "gpu_resource"),
    "namespace": ({"namespace": "Team_A"}, "namespace"),
    "label value": ({"labels": {"team": "a b"}}, "labels.team"),
    "manager": ({"managed_by": "argo"}, "managed_by"),
    "toleration": ({"tolerations": [{"key": "gpu", "operator": "In"}]}, "tolerations[0].operator"),
    "Gt not an integer": ({"affinity": GT_TEN}, GT_PATH),
    "hostPath type": (
        {"volumes": [{"name": "h", "hostPath": {"path": "/x", "type": "Bogus"}}]},
        "volumes[0].hostPath.type",
    ),
    "secret name": (
        {"env_list": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "A_B", "key": "k"}}}]},
        "env_list[0].valueFrom.secretKeyRef.name",
    ),
    "privileged": (
        {
            "container_overrides": {
                "securityContext": {"privileged": True, "allowPrivilegeEscalation": False}
            }
        },
        "container_overrides.securityContext.allowPrivilegeEscalation",
    ),
    "dnsPolicy": (
        {"pod_spec_overrides": {"dnsPolicy": "Sometimes"}},
        "pod_spec_overrides.dnsPolicy",
    ),
    "args without command": ({"args": ["--x"]}, "args"),
    "mount of no volume": (
        {"volume_mounts": [{"name": "nope", "mountPath": "/x"}]},
        "volume_mounts[0].name",
    ),
    "launcher without program": ({"launcher": {"kind": "python"}}, "launcher.entrypoint"),
}


def _spec(names: list[str]) -> dict[str, Any]:
    data = dict(BASE)
    for name in names:
        data.update(MISTAKES[name][0])
    return {k: v for k, v in data.items() if v is not None}


def _lines(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        structure(data)
    return [p.path for p in info.value.problems]


@pytest.mark.parametrize("name", MISTAKES)
def test_each_mistake_is_one_line(name: str) -> None:
    assert _lines(_spec([name])) == [MISTAKES[name][1]]


@settings(deadline=None)
@given(st.lists(st.sampled_from(sorted(MISTAKES)), min_size=1, unique=True))
def test_n_independent_mistakes_are_n_lines(names: list[str]) -> None:
    assert sorted(_lines(_spec(names))) == sorted(MISTAKES[n][1] for n in names)


def test_a_rule_that_reads_a_field_of_the_wrong_type_is_the_only_one_skipped() -> None:
    """``num_nodes: two`` cannot be compared with the elastic bounds (that line depends on
    it), but the bounds' own order does not read it."""
    data = {**BASE, "num_nodes": "two", "elastic": {"min_nodes": 3, "max_nodes": 2}}
    assert _lines(data) == ["num_nodes", "elastic.min_nodes"]
    data["num_nodes"] = 1
    assert _lines(data) == ["elastic.min_nodes", "num_nodes"]


def _validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> tuple[int, list[str]]:
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    code = main(["validate", str(spec), "--target", "pytorchjob/v1"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, [line.removeprefix(f"{spec}: ") for line in err.splitlines()]


def test_the_issues_cases_report_every_mistake_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 27 item 1: both names are invalid; the second was told only once the first was fixed
    code, lines = _validate(
        tmp_path,
        capsys,
        "name: job\nimage: img:1\ngpu_resource: gpu\nextra_resource_requests: {pods: '2'}\n",
    )
    assert code == 1
    assert [line.split(":")[0] for line in lines] == [
        "gpu_resource",
        "extra_resource_requests.pods",
    ]
    # issue 25: a typo, a bad quantity and a fractional EFA count
    code, lines = _validate(
        tmp_path,
        capsys,
        f"name: job\nimage: img:1\nimagee: x\ncpu_request: 2x\n"
        f"extra_resource_requests: {{{EFA}: '1.5'}}\nextra_resource_limits: {{{EFA}: '1.5'}}\n",
    )
    assert code == 1
    assert [line.split(": ")[0] for line in lines] == [
        "imagee",
        "cpu_request",
        f'extra_resource_requests["{EFA}"]',
        f'extra_resource_limits["{EFA}"]',
    ]
