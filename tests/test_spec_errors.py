"""Everything a user can get wrong in a spec, and what they are told.

Each malformed spec is small YAML written here; ``load_spec`` must raise ``SpecError`` whose
problems are exactly the expected lines (field path + a key phrase of the message), all of them
at once, without Python internals leaking into the text. The second half covers the errors that
depend on the target (``render`` raising ``UnsupportedFeature``), with the release differences
taken from KUBEFLOW.md.
"""

from __future__ import annotations

import json
import re
import textwrap
from enum import Enum, IntEnum
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfcompile import (
    TARGETS,
    JobSpec,
    Launcher,
    SpecError,
    UnsupportedFeature,
    dump_spec,
    load_spec,
    render,
    structure,
)
from kfcompile.spec import object_paths, yamlio
from kfcompile.targets import trainjob_v2_2

PYTORCH = "pytorchjob/v1"
V20, V21, V22, V23 = "trainjob/v2.0", "trainjob/v2.1", "trainjob/v2.2", "trainjob/v2.3"
TRAINJOBS = (V20, V21, V22, V23)
ALL = (PYTORCH, *TRAINJOBS)

BASE = "name: job\nimage: img:1\n"
FIELDS = {a.name for a in attrs.fields(JobSpec)}
# Text that would mean an exception or a Python object leaked into a message.
NOISE = (
    "Traceback",
    "<class",
    "object at 0x",
    "has no attribute",
    "is not iterable",
    "NoneType",
    "not subscriptable",
    "unhashable",
)


def spec_text(body: str, base: bool = True) -> str:
    return (BASE if base else "") + textwrap.dedent(body)


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        load_spec(text)
    return [(p.path, p.message) for p in info.value.problems]


def assert_problems(got: list[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    """``got`` matches ``expected`` one to one: same path, message containing the phrase."""
    remaining = list(got)
    for path, phrase in expected:
        match = next((g for g in remaining if g[0] == path and phrase in g[1]), None)
        assert match is not None, f"no problem {path!r} ~ {phrase!r} in {got}"
        remaining.remove(match)
    assert not remaining, f"unexpected problems {remaining} (all: {got})"


# (id, yaml text, expected [(path, key phrase)])
MALFORMED: list[Any] = [
    # --- job name: RFC 1035 label (each target checks its own pod names: see below)
    ("name-uppercase", spec_text("name: MyJob\nimage: x\n", False), [("name", "DNS-1035 label")]),
    ("name-underscore", spec_text("name: my_job\nimage: x\n", False), [("name", "DNS-1035")]),
    ("name-leading-digit", spec_text("name: 1job\nimage: x\n", False), [("name", "DNS-1035")]),
    ("name-trailing-dash", spec_text("name: job-\nimage: x\n", False), [("name", "DNS-1035")]),
    (
        "name-64-chars",
        spec_text(f"name: {'a' * 64}\nimage: x\n", False),
        [("name", "no more than 63 characters")],
    ),
    # --- namespace, labels, annotations
    ("namespace-underscore", spec_text("namespace: Team_A\n"), [("namespace", "RFC 1123 label")]),
    ("namespace-dots", spec_text("namespace: team.a\n"), [("namespace", "must not contain dots")]),
    (
        "label-key-bad-prefix",
        spec_text("labels: {'Bad_Prefix/app': x}\n"),
        [('labels["Bad_Prefix/app"] (key)', "prefix part")],
    ),
    (
        "label-key-empty-prefix",
        spec_text("pod_labels: {'/app': x}\n"),
        [('pod_labels["/app"] (key)', "prefix part must be non-empty")],
    ),
    (
        "label-value-64-chars",
        spec_text(f"labels: {{team: {'v' * 64}}}\n"),
        [("labels.team", "no more than 63 characters")],
    ),
    (
        "label-value-bad-chars",
        spec_text("node_selector: {pool: 'gpu pool'}\n"),
        [("node_selector.pool", "valid label")],
    ),
    (
        "annotation-key-two-slashes",
        spec_text("annotations: {'a/b/c': x}\n"),
        [('annotations["a/b/c"] (key)', "qualified name")],
    ),
    (
        "annotation-key-name-too-long",
        spec_text(f"pod_annotations: {{'example.com/{'k' * 64}': x}}\n"),
        [
            (
                'pod_annotations["example.com/' + "k" * 64 + '"] (key)',
                "name part must be no more than 63",
            )
        ],
    ),
    # --- quantities
    ("quantity-1GB", spec_text("memory_request: 1GB\n"), [("memory_request", "'GB'")]),
    (
        "quantity-negative",
        spec_text("cpu_request: '-1'\n"),
        [("cpu_request", "greater than or equal to 0")],
    ),
    (
        "quantity-negative-unquoted",
        spec_text("cpu_limit: -1\n"),
        [("cpu_limit", "greater than or equal to 0")],
    ),
    # --- YAML integers where Kubernetes wants a string: their text is gone, never guessed
    (
        "env-integers",
        spec_text("env: {A: 0123, B: 0x1F, C: 1_000}\n"),
        [("env.A", "quote it"), ("env.B", "quote it"), ("env.C", "quote it")],
    ),
    ("label-integer", spec_text("labels: {build: 00042}\n"), [("labels.build", "quote it")]),
    ("args-integer", spec_text("command: [run]\nargs: [--epochs, 3]\n"), [("args[1]", "quote it")]),
    (
        "launcher-args-integer",
        spec_text("launcher: {kind: python, entrypoint: t.py, args: [7]}\n"),
        [("launcher.args[0]", "quote it")],
    ),
    ("quantity-100K", spec_text("memory_limit: 100K\n"), [("memory_limit", "'K'")]),
    ("quantity-shm", spec_text("shm_size: 1 Gi\n"), [("shm_size", "whitespace")]),
    (
        "quantity-extra",
        spec_text(
            """\
            extra_resource_requests: {example.com/fpga: 2x}
            extra_resource_limits: {example.com/fpga: 2x}
            """
        ),
        [
            ('extra_resource_requests["example.com/fpga"]', "'x'"),
            ('extra_resource_limits["example.com/fpga"]', "'x'"),
        ],
    ),
    # --- limits and requests
    (
        "cpu-limit-below-request",
        spec_text("cpu_request: '2'\ncpu_limit: 1500m\n"),
        [("cpu_limit", "must not be below cpu_request")],
    ),
    (
        "memory-limit-below-request",
        spec_text("memory_request: 2Gi\nmemory_limit: 2000Mi\n"),  # 2000Mi < 2048Mi
        [("memory_limit", "must not be below memory_request")],
    ),
    (
        "extended-request-without-limit",
        spec_text("extra_resource_requests: {vpc.amazonaws.com/efa: '4'}\n"),
        [('extra_resource_requests["vpc.amazonaws.com/efa"]', "needs an equal limit")],
    ),
    (
        "extended-request-other-limit",
        spec_text(
            """\
            extra_resource_requests: {vpc.amazonaws.com/efa: '4'}
            extra_resource_limits: {vpc.amazonaws.com/efa: '8'}
            """
        ),
        [('extra_resource_requests["vpc.amazonaws.com/efa"]', "must equal its limit")],
    ),
    (
        "hugepages-request-without-limit",
        spec_text("extra_resource_requests: {hugepages-2Mi: 1Gi}\nmemory_request: 1Gi\n"),
        [("extra_resource_requests.hugepages-2Mi", "needs an equal limit")],
    ),
    pytest.param(
        "gpu-limit-through-extra",
        spec_text("gpus_per_node: 2\nextra_resource_limits: {nvidia.com/gpu: '2'}\n"),
        [('extra_resource_limits["nvidia.com/gpu"]', "gpus_per_node")],
        id="gpu-limit-through-extra",
    ),
    pytest.param(
        "gpu-both-through-extra",
        spec_text(
            """\
            gpus_per_node: 1
            gpu_resource: amd.com/gpu
            extra_resource_requests: {amd.com/gpu: '1'}
            extra_resource_limits: {amd.com/gpu: '1'}
            """
        ),
        [
            ('extra_resource_requests["amd.com/gpu"]', "gpus_per_node"),
            ('extra_resource_limits["amd.com/gpu"]', "gpus_per_node"),
        ],
        id="gpu-both-through-extra",
    ),
    # gpu_resource names a resource a device plugin advertises, never one of the node's own
    # (IsExtendedResourceName): `cpu` made `4` CPUs into 2, `memory` made `memory: '2'` (bytes).
    (
        "gpu-resource-cpu",
        spec_text("gpus_per_node: 2\ngpu_resource: cpu\ncpu_request: '4'\n"),
        [("gpu_resource", "must be an extended resource")],
    ),
    ("gpu-resource-memory", spec_text("gpu_resource: memory\n"), [("gpu_resource", "extended")]),
    (
        "gpu-resource-kubernetes-io",
        spec_text("gpu_resource: kubernetes.io/gpu\n"),
        [("gpu_resource", "extended")],
    ),
    (
        "gpu-resource-quota-prefix",
        spec_text("gpu_resource: requests.example.com/gpu\n"),
        [("gpu_resource", "extended")],
    ),
    # No two fields write one resource: the override would silently win over the typed field.
    (
        "override-cpu-over-cpu-request",
        spec_text("cpu_request: '4'\ncontainer_overrides: {resources: {requests: {cpu: '2'}}}\n"),
        [("container_overrides.resources.requests.cpu", "also written by cpu_request")],
    ),
    (
        "override-memory-limit-over-memory-limit",
        spec_text("memory_limit: 8Gi\ncontainer_overrides: {resources: {limits: {memory: 8Gi}}}\n"),
        [("container_overrides.resources.limits.memory", "also written by memory_limit")],
    ),
    pytest.param(
        "cpu-through-extra",
        spec_text("extra_resource_requests: {cpu: '4'}\n"),
        [("extra_resource_requests.cpu", "cpu_request")],
        id="cpu-through-extra",
    ),
    # --- environment
    (
        "env-name-leading-digit",
        spec_text("env: {1ST: x}\n"),
        [('env["1ST"] (key)', "environment variable name")],
    ),
    (
        "env-name-space",
        spec_text("env: {MY VAR: x}\n"),
        [('env["MY VAR"] (key)', "environment variable name")],
    ),
    (
        "env-duplicate-across-env-and-env-list",
        spec_text("env: {FOO: a}\nenv_list: [{name: FOO, value: b}]\n"),
        [("env_list[0].name", "duplicate environment variable 'FOO'")],
    ),
    (
        "secret-env-repeats-env",
        spec_text("env: {TOKEN: a}\nsecret_env: [TOKEN, 1BAD]\n"),
        [
            ("secret_env[1]", "must not start with a digit"),
            ("secret_env[0]", "duplicate environment variable 'TOKEN'"),
        ],
    ),
    (
        "work-dir-relative-mount-and-taken-volume-name",
        spec_text(
            "volumes: [{name: workdir, emptyDir: {}}]\n"
            "work_dir: {local: src, pvc: Bad_Claim, mount_path: rel}\n"
        ),
        [
            ("work_dir.pvc", "RFC 1123 subdomain"),
            ("work_dir.mount_path", "must be an absolute path"),
            ("volumes[0].name", "the name 'workdir' is used by work_dir"),
        ],
    ),
    (
        "env-duplicate-in-env-list",
        spec_text("env_list: [{name: A, value: x}, {name: A, value: y}]\n"),
        [("env_list[1].name", "duplicate environment variable 'A'")],
    ),
    (
        "env-list-missing-name",
        spec_text("env_list: [{value: x}]\n"),
        [("env_list[0].name", "required")],
    ),
    (
        "env-list-value-and-value-from",
        spec_text(
            """\
            env_list:
              - name: TOKEN
                value: x
                valueFrom: {secretKeyRef: {name: s, key: k}}
            """
        ),
        [("env_list[0]", "value or valueFrom, not both")],
    ),
    (
        "env-list-unknown-key",
        spec_text("env_list: [{name: A, vlaue: x}]\n"),
        [("env_list[0].vlaue", "unknown field")],
    ),
    (
        "env-list-bad-name",
        spec_text("env_list: [{name: 'A=B', value: x}]\n"),
        [("env_list[0].name", "environment variable name")],
    ),
    # --- volumes and mounts
    (
        "mount-undefined-volume",
        spec_text("volume_mounts: [{name: scratch, mountPath: /scratch}]\n"),
        [("volume_mounts[0].name", "no volume named 'scratch'")],
    ),
    (
        "mount-relative-path",
        spec_text(
            """\
            volumes: [{name: data, emptyDir: {}}]
            volume_mounts: [{name: data, mountPath: data}]
            """
        ),
        [("volume_mounts[0].mountPath", "absolute path")],
    ),
    (
        "mount-duplicate-path",
        spec_text(
            """\
            volumes: [{name: a, emptyDir: {}}, {name: b, emptyDir: {}}]
            volume_mounts: [{name: a, mountPath: /data}, {name: b, mountPath: /data}]
            """
        ),
        [("volume_mounts[1].mountPath", "already mounted by volume_mounts[0]")],
    ),
    (
        "mount-missing-path",
        spec_text("volumes: [{name: a, emptyDir: {}}]\nvolume_mounts: [{name: a}]\n"),
        [("volume_mounts[0].mountPath", "required")],
    ),
    pytest.param(
        "mount-path-not-a-string",
        spec_text("volumes: [{name: a, emptyDir: {}}]\nvolume_mounts: [{name: a, mountPath: 5}]\n"),
        [("volume_mounts[0].mountPath", "string")],
        id="mount-path-not-a-string",
    ),
    pytest.param(
        "mount-name-not-a-string",
        spec_text(
            "volumes: [{name: a, emptyDir: {}}]\nvolume_mounts: [{name: 5, mountPath: /a}]\n"
        ),
        [("volume_mounts[0].name", "string")],
        id="mount-name-not-a-string",
    ),
    (
        "volume-missing-name",
        spec_text("volumes: [{emptyDir: {}}]\n"),
        [("volumes[0].name", "required")],
    ),
    (
        "volume-duplicate-name",
        spec_text("volumes: [{name: data, emptyDir: {}}, {name: data, emptyDir: {}}]\n"),
        [("volumes[1].name", "duplicate volume 'data'")],
    ),
    (
        "volume-no-source",
        spec_text("volumes: [{name: data}]\n"),
        [("volumes[0]", "exactly one volume source")],
    ),
    (
        "volume-two-sources",
        spec_text("volumes: [{name: data, emptyDir: {}, hostPath: {path: /mnt}}]\n"),
        [("volumes[0]", "exactly one volume source")],
    ),
    (
        "volume-name-taken-by-shm",
        spec_text("shm_size: 1Gi\nvolumes: [{name: dshm, emptyDir: {}}]\n"),
        [("volumes[0].name", "'dshm' is used by shm_size")],
    ),
    # What kfcompile mounts is reserved, compared as directories: a mount on the same place
    # silently replaced the generated one (and explain still reported it).
    (
        "work-dir-on-shm",
        spec_text("shm_size: 1Gi\nwork_dir: {local: src, pvc: code, mount_path: /dev/shm/}\n"),
        [("work_dir.mount_path", "already mounted by shm_size")],
    ),
    (
        "work-dir-on-the-script-dir",
        spec_text(
            "script: print(1)\nlauncher: {kind: python}\n"
            "work_dir: {local: src, pvc: code, mount_path: /opt/kfcompile//scripts}\n"
        ),
        [("work_dir.mount_path", "already mounted by script")],
    ),
    (
        "mount-on-shm-unnormalised",
        spec_text(
            """\
            shm_size: 1Gi
            volumes: [{name: a, emptyDir: {}}]
            volume_mounts: [{name: a, mountPath: /dev/./shm/}]
            """
        ),
        [("volume_mounts[0].mountPath", "already mounted by shm_size")],
    ),
    (
        "override-mount-on-the-work-dir",
        spec_text(
            """\
            work_dir: {local: src, pvc: code, mount_path: /work}
            container_overrides: {volumeMounts: [{name: other, mountPath: /work/}]}
            """
        ),
        [("container_overrides.volumeMounts[0].mountPath", "already mounted by work_dir")],
    ),
    (
        "override-mount-on-a-user-mount",
        spec_text(
            """\
            volumes: [{name: a, emptyDir: {}}]
            volume_mounts: [{name: a, mountPath: /data}]
            container_overrides: {volumeMounts: [{name: a, mountPath: /data/}]}
            """
        ),
        [("container_overrides.volumeMounts[0].mountPath", "already mounted by volume_mounts[0]")],
    ),
    (
        "override-volume-named-like-the-script",
        spec_text(
            "script: print(1)\nlauncher: {kind: python}\n"
            "pod_spec_overrides: {volumes: [{name: kfcompile-script, emptyDir: {}}]}\n"
        ),
        [("pod_spec_overrides.volumes[0].name", "'kfcompile-script' is used by script")],
    ),
    # --- tolerations
    (
        "toleration-bad-operator",
        spec_text("tolerations: [{key: gpu, operator: In, value: x}]\n"),
        [("tolerations[0].operator", "Exists or Equal")],
    ),
    (
        "toleration-bad-effect",
        spec_text("tolerations: [{key: gpu, value: x, effect: NoRun}]\n"),
        [("tolerations[0].effect", "NoSchedule, PreferNoSchedule, NoExecute")],
    ),
    (
        "toleration-value-with-exists",
        spec_text("tolerations: [{key: gpu, operator: Exists, value: x}]\n"),
        [("tolerations[0].value", "empty when operator is Exists")],
    ),
    (
        "toleration-unknown-key",
        spec_text("tolerations: [{key: gpu, operator: Exists, colour: red}]\n"),
        [("tolerations[0].colour", "unknown field")],
    ),
    (
        "toleration-equal-without-key",
        spec_text("tolerations: [{operator: Equal, value: x}]\n"),
        [("tolerations[0].key", "required unless operator is Exists")],
    ),
    # --- how the program starts
    (
        "launcher-and-command",
        spec_text(
            """\
            launcher: {kind: torchrun, entrypoint: /app/train.py}
            command: [python, /app/train.py]
            """
        ),
        [("command", "either command or launcher")],
    ),
    ("args-without-command", spec_text("args: [--lr, '0.1']\n"), [("args", "needs command")]),
    ("script-without-launcher", spec_text("script: print(1)\n"), [("script", "needs a launcher")]),
    (
        "script-with-path-entrypoint",
        spec_text(
            """\
            launcher: {kind: python, entrypoint: /app/train.py}
            script: print(1)
            """
        ),
        [("launcher.entrypoint", "file name")],
    ),
    (
        "launcher-without-entrypoint-or-script",
        spec_text("launcher: {kind: torchrun, args: [--x]}\n"),
        [("launcher.entrypoint", "required")],
    ),
    (
        "no-python-is-torchrun-s",
        spec_text("launcher: {kind: python, no_python: true, entrypoint: run.sh}\n"),
        [("launcher.no_python", "torchrun's mode")],
    ),
    (
        "no-python-with-a-module",
        spec_text("launcher: {kind: torchrun, no_python: true, module: pkg.train}\n"),
        [("launcher.module", "no module with no_python")],
    ),
    (
        "no-python-script-without-interpreter",
        spec_text("launcher: {kind: torchrun, no_python: true}\nscript: echo hi\n"),
        [("script", "start it with '#!'")],
    ),
    (
        "launcher-without-kind",
        spec_text("launcher: {entrypoint: a.py}\n"),
        [("launcher.kind", "required")],
    ),
    # --- elastic, scale, Kubeflow fields
    (
        "elastic-min-above-max",
        spec_text("num_nodes: 3\nelastic: {min_nodes: 4, max_nodes: 2}\n"),
        # no num_nodes lies in an empty range, so that is reported too
        [("elastic.min_nodes", "must not exceed elastic.max_nodes"), ("num_nodes", "between")],
    ),
    (
        "elastic-num-nodes-out-of-range",
        spec_text("num_nodes: 8\nelastic: {min_nodes: 2, max_nodes: 4}\n"),
        [("num_nodes", "between elastic.min_nodes and elastic.max_nodes")],
    ),
    (
        "elastic-bad-port",
        spec_text("elastic: {min_nodes: 1, max_nodes: 2, rdzv_port: 70000}\n"),
        [("elastic.rdzv_port", "port number")],
    ),
    ("num-nodes-zero", spec_text("num_nodes: 0\n"), [("num_nodes", "at least 1")]),
    ("gpus-negative", spec_text("gpus_per_node: -1\n"), [("gpus_per_node", "0 or more")]),
    ("nprocs-zero", spec_text("nprocs_per_node: 0\n"), [("nprocs_per_node", "at least 1")]),
    (
        "managed-by-unknown",
        spec_text("managed_by: argo\n"),
        [("managed_by", "must be one of: kueue.x-k8s.io/multikueue")],
    ),
    (
        "runtime-ref-bad-name",
        spec_text("runtime_ref: {name: Torch_Runtime}\n"),
        [("runtime_ref.name", "RFC 1123 subdomain")],
    ),
    (
        "initializer-not-a-uri",
        spec_text("initializer: {model: {storage_uri: meta-llama/Llama-3}}\n"),
        [("initializer.model.storage_uri", "URI")],
    ),
    ("queue-bad-label-value", spec_text("queue: 'team a'\n"), [("queue", "valid label")]),
    # --- wrong types
    ("type-string-for-int", spec_text("num_nodes: two\n"), [("num_nodes", "must be an integer")]),
    ("type-bool-for-int", spec_text("num_nodes: true\n"), [("num_nodes", "must be an integer")]),
    ("type-float-for-int", spec_text("gpus_per_node: 1.5\n"), [("gpus_per_node", "integer")]),
    ("type-int-for-bool", spec_text("suspend: 1\n"), [("suspend", "true or false")]),
    ("type-string-for-bool", spec_text("suspend: 'yes'\n"), [("suspend", "true or false")]),
    ("type-mapping-for-list", spec_text("command: {python: x}\n"), [("command", "must be a list")]),
    ("type-string-for-list", spec_text("tolerations: gpu\n"), [("tolerations", "must be a list")]),
    ("type-list-for-mapping", spec_text("env: [A=1]\n"), [("env", "must be a mapping")]),
    ("type-list-for-labels", spec_text("labels: [a]\n"), [("labels", "must be a mapping")]),
    ("type-list-for-affinity", spec_text("affinity: [a]\n"), [("affinity", "must be a mapping")]),
    (
        "type-null-for-string",
        spec_text("name: ~\nimage: x\n", False),
        [("name", "must be a string")],
    ),
    ("type-list-item", spec_text("command: [python, 3.5]\n"), [("command[1]", "must be a string")]),
    ("type-list-of-scalars", spec_text("env_list: [A]\n"), [("env_list[0]", "must be a mapping")]),
    ("type-bad-enum", spec_text("restart_policy: Sometimes\n"), [("restart_policy", "OnFailure")]),
    (
        "type-bad-launcher-kind",
        spec_text("launcher: {kind: bash, entrypoint: a}\n"),
        [("launcher.kind", "torchrun")],
    ),
    ("type-bad-nprocs", spec_text("nprocs_per_node: gpu\n"), [("nprocs_per_node", "'auto'")]),
    pytest.param(
        "type-list-for-launcher",
        spec_text("launcher: [torchrun, a.py]\n"),
        [("launcher", "must be a mapping")],
        id="type-list-for-launcher",
    ),
    pytest.param(
        "type-int-for-elastic",
        spec_text("elastic: 3\n"),
        [("elastic", "must be a mapping")],
        id="type-int-for-elastic",
    ),
    # --- unknown and missing keys
    (
        "unknown-top-level",
        spec_text("tolerationz: []\n"),
        [("tolerationz", "did you mean 'tolerations'?")],
    ),
    (
        "unknown-nested",
        spec_text("launcher: {kind: torchrun, entrypiont: train.py}\n"),
        [("launcher.entrypiont", "did you mean 'entrypoint'?")],
    ),
    (
        "unknown-nested-elastic",
        spec_text("elastic: {min_nodes: 1, max_nodes: 2, max_restart: 3}\n"),
        [("elastic.max_restart", "did you mean 'max_restarts'?")],
    ),
    ("unknown-unrelated", spec_text("colour: red\n"), [("colour", "unknown field")]),
    pytest.param(
        "unknown-int-key",
        spec_text("1: x\n"),
        [('["1"]', "unknown field")],
        id="unknown-int-key",
    ),
    pytest.param(
        "unknown-null-key",
        spec_text("~: x\n"),
        [("None", "unknown field")],
        id="unknown-null-key",
    ),
    (
        "missing-name-and-image",
        spec_text("namespace: team-a\n", False),
        [("name", "required"), ("image", "required")],
    ),
    (
        "missing-elastic-fields",
        spec_text("elastic: {}\n"),
        [("elastic.min_nodes", "required"), ("elastic.max_nodes", "required")],
    ),
    # --- the document itself
    ("document-list", "- name: job\n- image: x\n", [("", "must be a mapping, got a list")]),
    ("document-scalar", "just a job\n", [("", "must be a mapping")]),
    ("document-empty", "", [("", "must be a mapping")]),
    ("document-only-comments", "# TODO\n", [("", "must be a mapping")]),
    # The ':' after "image" on line 2 sits in column 8.
    ("yaml-bad-indent", "name: job\n  image: x\n", [("line 2, column 8", "mapping values")]),
    # libyaml says "found a tab character that violates indentation", the pure-Python scanner
    # "found character '\t' that cannot start any token": both point at the tab.
    ("yaml-tab", "name: job\n\timage: x\n", [("line 2, column 1", "character")]),
    ("yaml-unclosed-flow", "name: job\nimage: [x\n", [("line 3, column 1", "expected ',' or ']'")]),
    (
        "yaml-duplicate-key",
        "name: a\nimage: x\nname: b\n",
        [("line 3, column 1", 'duplicate key "name"')],
    ),
    (
        "yaml-python-tag",
        "name: !!python/object:os.system x\nimage: x\n",
        [("line 1, column 7", "could not determine a constructor")],
    ),
]


def _case_id(case: Any) -> str:
    return str(case.id if hasattr(case, "id") else case[0])


def _args(case: Any) -> tuple[str, list[tuple[str, str]]]:
    values = case.values if hasattr(case, "values") else case
    return values[1], values[2]


def _params(cases: list[Any]) -> list[Any]:
    out = []
    for case in cases:
        text, expected = _args(case)
        marks = case.marks if hasattr(case, "marks") else ()
        out.append(pytest.param(text, expected, marks=marks, id=_case_id(case)))
    return out


@pytest.mark.parametrize(("text", "expected"), _params(MALFORMED))
def test_malformed_spec_reports_exactly_these_problems(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert_problems(problems_of(text), expected)


def _hygiene_params() -> list[Any]:
    return [pytest.param(_args(case)[0], id=_case_id(case)) for case in MALFORMED]


@pytest.mark.parametrize("text", _hygiene_params())
def test_problems_are_clean_lines_about_real_fields(text: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(text)
    error = info.value
    assert error.problems, "a SpecError must carry at least one problem"
    lines = str(error).splitlines()
    assert lines == [str(p) for p in error.problems], "str() is one line per problem"
    assert len(set(lines)) == len(lines), f"duplicate lines: {lines}"
    for p in error.problems:
        assert p.message and "\n" not in p.message
        assert not any(n in p.message for n in NOISE), p.message
        # The path names a field the user can find in their spec (or a place in the file).
        if p.path and not p.path.startswith("line "):
            top = re.split(r"[.\[ ]", p.path, maxsplit=1)[0]
            # an unknown top-level key is the whole path, quoted when it is no identifier
            unknown_top_level = p.message.startswith("unknown field") and (
                top == p.path or p.path.startswith('["')
            )
            assert top in FIELDS or unknown_top_level, f"{p.path!r} is not a spec field"


def test_many_value_problems_are_all_reported() -> None:
    text = textwrap.dedent(
        """\
        name: Bad_Name
        namespace: Team_A
        image: img:1
        cpu_request: 1GB
        tolerations: [{key: gpu, operator: In}]
        managed_by: argo
        """
    )
    assert_problems(
        problems_of(text),
        [
            ("name", "DNS-1035"),
            ("namespace", "RFC 1123"),
            ("cpu_request", "'GB'"),
            ("tolerations[0].operator", "Exists or Equal"),
            ("managed_by", "must be one of"),
        ],
    )


def test_many_type_problems_are_all_reported() -> None:
    text = spec_text(
        """\
        num_nodes: two
        suspend: 1
        command: {a: b}
        env: [A]
        tolerationz: []
        """
    )
    assert_problems(
        problems_of(text),
        [
            ("num_nodes", "integer"),
            ("suspend", "true or false"),
            ("command", "list"),
            ("env", "mapping"),
            ("tolerationz", "did you mean"),
        ],
    )


def test_type_and_value_problems_are_reported_together() -> None:
    """A wrong shape in one field does not hide bad values in the fields that did load."""
    text = spec_text(
        """\
        num_nodes: two
        namespace: Not_A_Namespace
        cpu_request: 1GB
        labels: {team: "a b"}
        launcher: {kind: bash, entrypoint: t.py}
        """
    )
    assert_problems(
        problems_of(text),
        [
            ("num_nodes", "integer"),
            ("launcher.kind", "one of"),
            ("namespace", "RFC 1123"),
            ("cpu_request", "suffix"),
            ("labels.team", "alphanumeric"),
        ],
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_request", "64Gi"),
        ("cpu_request", "500m"),
        ("shm_size", "'1e3'"),
        ("memory_limit", "1.5Gi"),
        ("cpu_limit", "2"),  # an unquoted YAML int is an unambiguous quantity
        ("cpu_request", "'0.5'"),
        ("memory_request", "128974848"),
    ],
)
def test_valid_quantities_load(field: str, value: str) -> None:
    spec = load_spec(spec_text(f"{field}: {value}\n"))
    assert getattr(spec, field) == value.strip("'")


@pytest.mark.parametrize(
    "body",
    [
        "cpu_request: '2'\ncpu_limit: 2000m\n",  # equal in another unit
        "memory_request: 1Gi\nmemory_limit: 1024Mi\n",
        "extra_resource_requests: {vpc.amazonaws.com/efa: '4'}\n"
        "extra_resource_limits: {vpc.amazonaws.com/efa: '4'}\n",
        "extra_resource_requests: {ephemeral-storage: 10Gi}\n",  # native: may be overcommitted
        "gpus_per_node: 8\nextra_resource_limits: {vpc.amazonaws.com/efa: '32'}\n",
        "env: {FOO: a}\n"
        "env_list: [{name: BAR, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n",
        "tolerations: [{operator: Exists}]\n",  # tolerate everything
        "launcher: {kind: python}\nscript: print(1)\n",  # entrypoint defaults for a script
        "annotations: {example.com/note: " + "x" * 300 + "}\n",  # values are free text
    ],
)
def test_near_misses_are_valid(body: str) -> None:
    load_spec(spec_text(body))


# --- pod name budget: each target's own pod names must be DNS labels -------------------------


@st.composite
def _names(draw: st.DrawFn) -> str:
    """DNS-1035 labels of every length from 1 to 63, evenly (plain text strategies stay short)."""
    length = draw(st.integers(1, 63))
    inner = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=length))
    return ("a" + inner[: length - 2] + "z")[:length] if length > 1 else "a"


def _budget_problems(data: dict[str, Any], target: str) -> list[str]:
    try:
        render(structure(data), target)
    except UnsupportedFeature as exc:
        return [p.message for p in exc.problems if p.path == "name"]
    return []


@settings(max_examples=2 * settings().max_examples, deadline=None)
@given(name=_names(), num_nodes=st.integers(min_value=1, max_value=10**6))
def test_trainjob_pod_names_fit_jobsets_webhook(name: str, num_nodes: int) -> None:
    """JobSet's webhook: `<name>-<replicatedJob>-<jobIndex>-<podIndex>-<5 random>` is a DNS-1035
    label; with torch-distributed that is len(name) <= 49 - digits(num_nodes - 1)."""
    data = {"name": name, "image": "img:1", "num_nodes": num_nodes}
    allowed = 49 - len(str(num_nodes - 1))
    for target in TRAINJOBS:
        found = _budget_problems(data, target)
        if len(name) <= allowed:
            assert found == [], target
            continue
        pod = f"{name}-node-0-{num_nodes - 1}-xxxxx"
        assert len(found) == 1, target
        assert repr(pod) in found[0] and f"at most {allowed} characters" in found[0]


@settings(max_examples=2 * settings().max_examples, deadline=None)
@given(name=_names(), num_nodes=st.integers(min_value=1, max_value=10**6))
def test_pytorchjob_pod_names_have_their_own_shape(name: str, num_nodes: int) -> None:
    """`<name>-master-0` and `<name>-worker-<i>` (i < num_nodes - 1): no JobSet suffix."""
    data = {"name": name, "image": "img:1", "num_nodes": num_nodes}
    pods = [f"{name}-master-0"] + ([f"{name}-worker-{num_nodes - 2}"] if num_nodes > 1 else [])
    longest = max(pods, key=len)
    found = _budget_problems(data, PYTORCH)
    assert (found != []) == (len(longest) > 63)
    if found:
        assert repr(longest) in found[0]


def test_the_issues_examples_of_the_name_budget() -> None:
    spec = {"image": "img:1"}
    assert _budget_problems({**spec, "name": "a" * 52, "num_nodes": 4}, V23)  # stuck forever
    assert _budget_problems({**spec, "name": "a" * 48, "num_nodes": 4}, V23) == []
    assert _budget_problems({**spec, "name": "a" * 54, "num_nodes": 11}, PYTORCH) == []
    # An initializer job shortens it: `<name>-dataset-initializer-0-0-xxxxx`.
    cached = {
        **spec,
        "runtime_ref": {"name": "torch-distributed-with-cache"},
        "initializer": {"dataset": {"storage_uri": "hf://d"}},
    }
    assert _budget_problems({**cached, "name": "a" * 33}, V23) == []
    [message] = _budget_problems({**cached, "name": "a" * 34}, V23)
    assert f"'{'a' * 34}-dataset-initializer-0-0-xxxxx'" in message and "at most 33" in message
    # A runtime of the cluster's own: its initializer jobs are the ones the spec names.
    own = {
        **cached,
        "runtime_ref": {"name": "mine"},
        "initializer": {"model": {"storage_uri": "hf://m"}},
    }
    assert _budget_problems({**own, "name": "a" * 35}, V23) == []
    assert _budget_problems({**own, "name": "a" * 36}, V23) == [
        f"too long for a TrainJob (JobSet pods): pod name '{'a' * 36}-model-initializer-0-0-xxxxx' "
        "would be 64 characters (a DNS label allows 63); this spec allows names of at most 35 "
        "characters"
    ]


# --- target-level errors -------------------------------------------------------------------


def unsupported(text: str, target: str) -> list[tuple[str, str]]:
    with pytest.raises(UnsupportedFeature) as info:
        render(load_spec(text), target)
    return [(p.path, p.message) for p in info.value.problems]


def supported_by(message: str, target: str) -> set[str]:
    m = re.fullmatch(rf"not supported by {re.escape(target)} \(supported by: (.*)\)", message)
    assert m, message
    return set(m[1].split(", "))


RESERVED = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("var", RESERVED)
def test_reserved_pet_env_rejected_on_every_trainjob(var: str, target: str) -> None:
    text = spec_text(f"env: {{{var}: '2', OK_VAR: x}}\n")
    if target == PYTORCH and var not in PYTORCHJOB_RESERVED:
        job = render(load_spec(text), target)[-1]
        env = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        assert {"name": var, "value": "2"} in env["env"]
        return
    why = "the Training Operator sets it" if target == PYTORCH else "reserved"
    assert_problems(unsupported(text, target), [(f"env.{var}", why)])


# What the Training Operator appends to every container of a PyTorchJob with a Master, over
# the spec's own values (training-operator pkg/controller.v1/pytorch/envvar.go setPodEnv).
PYTORCHJOB_RESERVED = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
)


@pytest.mark.parametrize("var", PYTORCHJOB_RESERVED)
@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("env: {%s: '1'}", "env.%s"),
        ("env_list: [{name: %s, value: '1'}]", "env_list[0].name"),
        ("secret_env: [%s]", "secret_env[0]"),
        ("container_overrides: {env: [{name: %s, value: '1'}]}", "container_overrides.env[0].name"),
        (
            "pod_spec_overrides: {containers: [{name: pytorch, env: [{name: %s, value: '1'}]}]}",
            "pod_spec_overrides.containers[0].env[0].name",
        ),
    ],
)
def test_what_the_training_operator_sets_is_refused_on_pytorchjob(
    var: str, field: str, path: str
) -> None:
    """Accepted, then run with the operator's value: MASTER_PORT=1234 ran on 23456."""
    found = unsupported(spec_text(field.replace("%s", var) + "\n"), PYTORCH)
    assert_problems(found, [(path.replace("%s", var), "the Training Operator sets it")])


def test_an_elastic_pytorchjob_reserves_the_elastic_agents_settings() -> None:
    elastic = "elastic: {min_nodes: 1, max_nodes: 2, max_restarts: 3}\n"
    found = unsupported(
        spec_text(elastic + "env: {PET_RDZV_ENDPOINT: x, PET_MAX_RESTARTS: '1'}\n"), PYTORCH
    )
    assert [p for p, _ in found] == ["env.PET_RDZV_ENDPOINT", "env.PET_MAX_RESTARTS"]
    # Workers only: no Master, so no MASTER_PORT from the operator
    render(load_spec(spec_text(elastic + "env: {MASTER_PORT: '1'}\n")), PYTORCH)


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("var", ["LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"])
def test_what_torchrun_sets_is_refused_under_the_torchrun_launcher(var: str, target: str) -> None:
    """torchrun gives each process it starts its own LOCAL_RANK...: the spec's never ran."""
    launcher = "launcher: {kind: torchrun, entrypoint: /t.py}\n"
    found = unsupported(spec_text(launcher + f"env: {{{var}: '0'}}\n"), target)
    assert_problems(found, [(f"env.{var}", "torchrun sets it for each process it starts")])
    python = "launcher: {kind: python, entrypoint: /t.py}\n"
    render(load_spec(spec_text(python + f"env: {{{var}: '0'}}\n")), target)


# The env of the training container in pod_spec_overrides is that container's env: what the
# controller or torchrun sets is refused there too (from v2.2 a TrainJob refuses any env patch
# on `node`, which is its own error).
@pytest.mark.parametrize(
    ("target", "container", "why"),
    [
        ("trainjob/v2.0", "node", "reserved on TrainJob"),
        ("trainjob/v2.1", "node", "reserved on TrainJob"),
        (PYTORCH, "pytorch", "the Training Operator sets it"),
    ],
)
def test_reserved_env_in_the_training_containers_pod_override(
    target: str, container: str, why: str
) -> None:
    def override(var: str) -> str:
        return (
            f"pod_spec_overrides: {{containers: [{{name: {container}, env: [{{name: {var}}}]}}]}}\n"
        )

    at = "pod_spec_overrides.containers[0].env[0].name"
    assert_problems(unsupported(spec_text(override("PET_NNODES")), target), [(at, why)])
    torchrun = "launcher: {kind: torchrun, entrypoint: /t.py}\n"
    found = unsupported(spec_text(torchrun + override("LOCAL_RANK")), target)
    assert_problems(found, [(at, "torchrun sets it for each process it starts")])
    if target == PYTORCH:  # a sidecar's env is its own (a TrainJob's runtime has no sidecar)
        sidecar = (
            "pod_spec_overrides: {containers: [{name: side, image: i, env: [{name: RANK}]}]}\n"
        )
        render(load_spec(spec_text(torchrun + sidecar)), target)


def test_pod_restart_policy_override_is_refused_on_pytorchjob() -> None:
    """SetRestartPolicy writes the replica's policy over the pod's: the override never ran."""
    text = spec_text("pod_spec_overrides: {restartPolicy: Never}\n")
    assert_problems(
        unsupported(text, PYTORCH), [("pod_spec_overrides.restartPolicy", "use restart_policy")]
    )


def test_the_python_launcher_with_gpus_says_how_many_processes() -> None:
    """The operator sets WORLD_SIZE to nodes x nprocPerNode (default: the GPUs); python starts
    one process per node, so a torch.distributed program waited for ranks that never came."""
    text = spec_text(
        "num_nodes: 2\ngpus_per_node: 4\nlauncher: {kind: python, entrypoint: /t.py}\n"
    )
    assert_problems(unsupported(text, PYTORCH), [("launcher.kind", "WORLD_SIZE to 8")])
    for target in TRAINJOBS:  # the Torch runtime sets no WORLD_SIZE
        render(load_spec(text), target)
    for nprocs in ("1", "4"):  # said outright: the program starts that many
        render(load_spec(text + f"nprocs_per_node: {nprocs}\n"), PYTORCH)


@pytest.mark.parametrize("target", TRAINJOBS)
def test_reserved_pet_env_rejected_in_env_list(target: str) -> None:
    text = spec_text("env_list: [{name: A, value: x}, {name: PET_NNODES, value: '4'}]\n")
    assert_problems(unsupported(text, target), [("env_list[1].name", "reserved")])


@pytest.mark.parametrize("target", TRAINJOBS)
def test_training_operator_manager_rejected_on_trainjob(target: str) -> None:
    got = unsupported(spec_text("managed_by: kubeflow.org/training-operator\n"), target)
    assert_problems(got, [("managed_by", "trainer.kubeflow.org/trainjob-controller")])
    assert "kueue.x-k8s.io/multikueue" in got[0][1]


def test_trainjob_controller_manager_rejected_on_pytorchjob() -> None:
    got = unsupported(spec_text("managed_by: trainer.kubeflow.org/trainjob-controller\n"), PYTORCH)
    assert_problems(got, [("managed_by", "kubeflow.org/training-operator")])


@pytest.mark.parametrize("target", ALL)
def test_multikueue_manager_renders_everywhere(target: str) -> None:
    job = render(load_spec(spec_text("managed_by: kueue.x-k8s.io/multikueue\n")), target)[-1]
    where = "spec.runPolicy.managedBy" if target == PYTORCH else "spec.managedBy"
    assert object_paths.get(job, object_paths.parse(where)) == "kueue.x-k8s.io/multikueue"


# (yaml, problem path, targets that can express it), from KUBEFLOW.md's release differences.
RELEASE_DIFFERENCES = [
    ("active_deadline_seconds: 600", "active_deadline_seconds", {PYTORCH, V22, V23}),
    ("pod_labels: {app: x}", "pod_labels", {PYTORCH, V21, V22, V23}),
    ("pod_annotations: {note: x}", "pod_annotations", {PYTORCH, V21, V22, V23}),
    ("termination_grace_period_seconds: 30", "termination_grace_period_seconds", {PYTORCH, V23}),
    ("image_pull_secrets: [regcred]", "image_pull_secrets", {PYTORCH, V21, V22, V23}),
    (
        "affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: []}}",
        "affinity",
        {PYTORCH, V21, V22, V23},
    ),
    ("elastic: {min_nodes: 1, max_nodes: 2}", "elastic", {PYTORCH}),
    ("backoff_limit: 3", "backoff_limit", {PYTORCH}),
    ("clean_pod_policy: All", "clean_pod_policy", {PYTORCH}),
    ("ttl_seconds_after_finished: 60", "ttl_seconds_after_finished", {PYTORCH}),
    ("restart_policy: OnFailure", "restart_policy", {PYTORCH}),
    ("scheduling_policy: {min_available: 1}", "scheduling_policy", {PYTORCH}),
    ("image_pull_policy: Always", "image_pull_policy", {PYTORCH}),
    ("runtime_ref: {name: torch-custom}", "runtime_ref", set(TRAINJOBS)),
    ("runtime_labels: {team: a}", "runtime_labels", set(TRAINJOBS)),
    ("runtime_annotations: {note: a}", "runtime_annotations", set(TRAINJOBS)),
    ("pod_spec_overrides: {hostNetwork: true}", "pod_spec_overrides.hostNetwork", {PYTORCH}),
    (
        "container_overrides: {securityContext: {runAsNonRoot: true}}",
        "container_overrides.securityContext",
        {PYTORCH, V22, V23},
    ),
    (
        "pod_spec_overrides: {securityContext: {fsGroup: 1000}}",
        "pod_spec_overrides.securityContext",
        {PYTORCH, V22, V23},
    ),
]


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize(
    ("body", "field", "able"), RELEASE_DIFFERENCES, ids=[c[1] for c in RELEASE_DIFFERENCES]
)
def test_release_differences(body: str, field: str, able: set[str], target: str) -> None:
    text = spec_text(body + "\n")
    if target in able:
        assert render(load_spec(text), target)[-1]["metadata"]["name"] == "job"
        return
    got = unsupported(text, target)
    assert [path for path, _ in got] == [field]
    assert supported_by(got[0][1], target) == able


@pytest.mark.parametrize("target", TRAINJOBS)
def test_initializer_needs_a_runtime_with_initializer_jobs(target: str) -> None:
    """torch-distributed has no initializer jobs and torch-distributed-with-cache only a dataset
    one (../shared/crds/runtimes): Trainer would drop the rest, so kfcompile refuses it."""
    model = "initializer: {model: {storage_uri: 'hf://org/model'}}\n"
    dataset = "initializer: {dataset: {storage_uri: 'hf://org/data'}}\n"
    cache = "runtime_ref: {name: torch-distributed-with-cache}\n"
    assert_problems(unsupported(spec_text(model), target), [("initializer.model", "no model")])
    assert_problems(unsupported(spec_text(dataset), target), [("initializer.dataset", "no data")])
    assert_problems(
        unsupported(spec_text(cache + model), target), [("initializer.model", "runtime_ref")]
    )
    job = render(load_spec(spec_text(cache + dataset)), target)[-1]
    assert job["spec"]["initializer"] == {"dataset": {"storageUri": "hf://org/data"}}
    custom = "runtime_ref: {name: my-runtime}\n"  # a cluster's own runtime is trusted
    job = render(load_spec(spec_text(custom + model)), target)[-1]
    assert job["spec"]["initializer"] == {"model": {"storageUri": "hf://org/model"}}


def test_initializer_and_runtime_ref_are_trainjob_only() -> None:
    text = spec_text("runtime_ref: {name: r}\ninitializer: {model: {storage_uri: 'hf://m'}}\n")
    assert [path for path, _ in unsupported(text, PYTORCH)] == ["runtime_ref", "initializer"]


def test_host_network_override_reaches_every_pytorchjob_replica() -> None:
    spec = load_spec(spec_text("num_nodes: 3\npod_spec_overrides: {hostNetwork: true}\n"))
    job = render(spec, PYTORCH)[-1]
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    assert all(r["template"]["spec"]["hostNetwork"] is True for r in replicas.values())


@pytest.mark.parametrize("target", [V22, V23])
def test_container_security_context_lands_in_the_node_patch(target: str) -> None:
    text = spec_text("container_overrides: {securityContext: {runAsNonRoot: true}}\n")
    job = render(load_spec(text), target)[-1]
    node = object_paths.get(job, object_paths.parse(trainjob_v2_2.NODE))
    assert node["securityContext"] == {"runAsNonRoot": True}
    assert node["name"] == "node"


def test_every_unsupported_field_is_reported_at_once() -> None:
    text = spec_text(
        """\
        pod_labels: {app: x}
        affinity: {nodeAffinity: {}}
        backoff_limit: 2
        image_pull_secrets: [regcred]
        """
    )
    got = unsupported(text, V20)
    assert sorted(path for path, _ in got) == [
        "affinity",
        "backoff_limit",
        "image_pull_secrets",
        "pod_labels",
    ]


def test_reserved_env_and_unsupported_fields_are_reported_together() -> None:
    text = spec_text("env: {PET_NNODES: '1'}\nbackoff_limit: 2\n")
    assert_problems(
        unsupported(text, V23), [("env.PET_NNODES", "reserved"), ("backoff_limit", "not supported")]
    )


@pytest.mark.parametrize("target", ALL)
def test_command_item_limit_from_v2_2(target: str) -> None:
    items = ", ".join(["x"] * 129)
    text = spec_text(f"command: [{items}]\n")
    if target in (V22, V23):
        assert_problems(unsupported(text, target), [("command", "128")])
    else:
        render(load_spec(text), target)


def test_args_item_limit_names_args() -> None:
    items = ", ".join(["x"] * 129)
    text = spec_text(f"command: [sh]\nargs: [{items}]\n")
    assert_problems(unsupported(text, V23), [("args", "128")])


def test_targets_under_test_are_the_registry() -> None:
    assert set(TARGETS) == set(ALL)


@pytest.mark.parametrize(
    "field",
    ["num_nodes", "gpus_per_node", "nprocs_per_node", "backoff_limit", "active_deadline_seconds"],
)
def test_counts_fit_kubernetes_int32(field: str) -> None:
    too_big = 2**31
    assert_problems(
        problems_of(spec_text(f"{field}: {too_big}\n")), [(field, "at most 2147483647")]
    )
    load_spec(spec_text(f"{field}: {too_big - 1}\n"))  # the largest int32 is fine


# --- specs built in Python: checked exactly like YAML, and values all the way down -----------


def python_problems(**fields: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        JobSpec(name="job", image="img:1", **fields)
    return [(p.path, p.message) for p in info.value.problems]


def test_types_are_checked_when_a_spec_is_built_in_python() -> None:
    assert python_problems(num_nodes="2") == [("num_nodes", "must be an integer, got str")]
    assert_problems(
        python_problems(
            restart_policy="Sometimes",
            image_pull_policy="always",
            gpus_per_node=2.5,
            env={"A": 1},
            launcher={"kind": "bash", "entrypoint": "t.py"},
        ),
        [
            ("restart_policy", "must be one of"),
            ("image_pull_policy", "must be one of"),
            ("gpus_per_node", "must be an integer"),
            ("env.A", "quote it"),
            ("launcher.kind", "must be one of"),
        ],
    )
    with pytest.raises(SpecError) as info:
        Launcher(kind="bash", entrypoint="t.py")  # type: ignore[arg-type]
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("kind", "must be one of: torchrun, python")
    ]


def test_nested_parts_may_be_given_as_mappings() -> None:
    as_data = JobSpec(
        name="job",
        image="img:1",
        launcher={"kind": "torchrun", "entrypoint": "t.py"},  # type: ignore[arg-type]
        work_dir={"local": ".", "pvc": "work", "mount_path": "/w"},  # type: ignore[arg-type]
    )
    assert as_data.launcher == Launcher(kind="torchrun", entrypoint="t.py")
    assert as_data == load_spec(
        spec_text(
            "launcher: {kind: torchrun, entrypoint: t.py}\n"
            "work_dir: {local: ., pvc: work, mount_path: /w}\n"
        )
    )
    assert python_problems(launcher={"kind": "torchrun", "entrypont": "t.py"}) == [
        ("launcher.entrypont", "unknown field (did you mean 'entrypoint'?)")
    ]
    assert python_problems(work_dir={"local": "."}) == [
        ("work_dir.pvc", "required"),
        ("work_dir.mount_path", "required"),
    ]


def test_a_spec_is_immutable_at_every_depth_and_hashable() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": []}]
            }
        }
    }
    env = {"A": "1"}
    spec = JobSpec(
        name="job",
        image="img:1",
        env=env,
        affinity=affinity,
        tolerations=[{"operator": "Exists"}],  # type: ignore[arg-type]
        env_list=[{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],  # type: ignore[list-item]
    )
    env["A"] = "changed"  # the caller's data is copied, not shared
    affinity["nodeAffinity"] = {}
    assert spec.env == {"A": "1"}
    assert spec.affinity == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": []}]
            }
        }
    }
    assert spec.affinity is not None
    changes = [
        lambda: spec.env.update(B="2"),  # type: ignore[attr-defined]
        lambda: spec.affinity["x"].update(y=1),  # type: ignore[index]
        lambda: spec.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ].append({}),  # type: ignore[index]
        lambda: spec.tolerations[0].pop("operator"),  # type: ignore[attr-defined]
        lambda: spec.env_list[0]["valueFrom"].clear(),  # type: ignore[attr-defined]
    ]
    for change in changes:
        with pytest.raises((TypeError, KeyError)):
            change()
    assert spec.env_list[0]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    same = load_spec(
        spec_text(
            "env: {A: '1'}\n"
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:\n"
            "  {nodeSelectorTerms: [{matchExpressions: []}]}}}\n"
            "tolerations: [{operator: Exists}]\n"
            "env_list: [{name: B, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]\n"
        )
    )
    assert same == spec and hash(same) == hash(spec)
    assert len({spec, same, attrs.evolve(spec, num_nodes=2)}) == 2
    # Rendering still hands out plain, mutable data that shares nothing with the spec.
    job = render(spec, V23)[-1]
    job["spec"]["trainer"]["env"].append({"name": "C", "value": "3"})
    assert [e["name"] for e in render(spec, V23)[-1]["spec"]["trainer"]["env"]] == ["A", "B"]


def test_a_bug_while_structuring_is_raised_as_a_bug_not_a_spec_problem() -> None:
    """What a malformed spec raises (a group of KeyError/ValueError/TypeError leaves) is one
    problem per leaf; anything else is the code's fault and is not dressed as "required"."""
    from cattrs.errors import ClassValidationError

    from kfcompile.spec.structuring import problems_of

    bad = ClassValidationError("x", [KeyError("name"), ValueError("must be 1 or more")], JobSpec)
    assert [p.message for p in problems_of(bad, "spec")] == ["required", "must be 1 or more"]
    with pytest.raises(AttributeError):
        problems_of(ClassValidationError("x", [AttributeError("oops")], JobSpec), "spec")


# Issue 24 item 9: an env var's value comes from one place. Merged as a strategic merge patch
# would, an override's valueFrom beside the spec's value (or a value beside its valueFrom) made
# an entry with both, which the pods refuse (validateEnvVarValueFrom): it replaces what the
# spec writes, which the README says an override may never do.
_FIELD_REF = {"fieldRef": {"fieldPath": "metadata.name"}}


def _env_override(hatch: str, env: list[dict[str, Any]]) -> dict[str, Any]:
    """``env`` given the training container through ``hatch``; on TrainJob v2.0/v2.1 a pod
    override's ``node`` env is applied to the container the trainer's env fills (v2.2+ refuse
    env patches on ``node``)."""
    if hatch == "container_overrides":
        return {hatch: {"env": env}}
    return {hatch: {"containers": [{"name": "node", "env": env}]}}


# Where the override writes A, by escape hatch.
_ENV_AT = {
    "container_overrides": "container_overrides.env[name=A]",
    "pod_spec_overrides": "pod_spec_overrides.containers[name=node].env[name=A]",
}


@pytest.mark.parametrize(
    ("target", "hatch"),
    [
        *((t, "container_overrides") for t in ALL),
        ("trainjob/v2.0", "pod_spec_overrides"),
        ("trainjob/v2.1", "pod_spec_overrides"),
    ],
)
@pytest.mark.parametrize(
    ("spec_fields", "override", "writer"),
    [
        ({"env": {"A": "x"}}, {"name": "A", "valueFrom": _FIELD_REF}, "env.A"),
        (
            {"env_list": [{"name": "A", "valueFrom": _FIELD_REF}]},
            {"name": "A", "value": "y"},
            "env_list[0]",
        ),
        ({"secret_env": ["A"]}, {"name": "A", "value": "y"}, "secret_env[0]"),
    ],
)
def test_an_override_may_not_change_where_an_env_var_comes_from(
    target: str, hatch: str, spec_fields: dict[str, Any], override: dict[str, Any], writer: str
) -> None:
    data = {"name": "job", "image": "img:1", "command": ["python"], **spec_fields}
    with pytest.raises(UnsupportedFeature) as info:
        render(structure({**data, **_env_override(hatch, [override])}), target)
    assert [str(p).split(" (")[0] for p in info.value.problems] == [
        f"{_ENV_AT[hatch]}: would replace what {writer} writes"
    ]
    # an entry for A that gives no other source is no replacement
    render(structure({**data, **_env_override(hatch, [{"name": "A"}])}), target)


@pytest.mark.parametrize("target", ["trainjob/v2.0", "trainjob/v2.1"])
def test_a_pod_override_env_meets_the_trainer_env_where_the_pods_get_it(target: str) -> None:
    """TrainJob v2.0/v2.1 write the spec's env to ``spec.trainer.env`` and a pod override's
    ``node`` env to the overrides: both reach one container, so they are checked as one env."""
    data = {"name": "job", "image": "img:1", "command": ["python"]}
    with_value = _env_override("container_overrides", [{"name": "A", "value": "x"}])
    override = _env_override("pod_spec_overrides", [{"name": "A", "value": "y"}])
    with pytest.raises(UnsupportedFeature) as info:
        render(structure({**data, **with_value, **override}), target)
    assert [str(p) for p in info.value.problems] == [
        "pod_spec_overrides.containers[name=node].env[name=A].value: would replace what "
        "container_overrides.env writes (spec.trainer.env[name=A].value): give it in one place"
    ]
    # The same value, or a variable of its own, replaces nothing and lands in the overrides.
    same = _env_override("pod_spec_overrides", [{"name": "A", "value": "x"}, {"name": "B"}])
    job = render(structure({**data, "env": {"A": "x"}, **same}), target)[-1]
    overrides = job["spec"].get("podSpecOverrides") or job["spec"]["podTemplateOverrides"]
    containers = overrides[0].get("containers") or overrides[0]["spec"]["containers"]
    assert containers == [{"name": "node", "env": [{"name": "A", "value": "x"}, {"name": "B"}]}]
    assert job["spec"]["trainer"]["env"] == [{"name": "A", "value": "x"}]


# Issue 24 item 12: a spec built in Python may hold a str Enum (or another str, int or float
# subclass) where a YAML spec holds a string; it was kept in the rendered objects, and dumping
# them raised RepresenterError (a NeMo-Run dry run with such labels crashed). The spec keeps the
# plain value, at every depth.
class Tier(str, Enum):  # noqa: UP042 (the mixin users write, as in the issue)
    GOLD = "gold"


class Policy(str, Enum):  # noqa: UP042
    NEVER = "Never"


class Count(IntEnum):
    TWO = 2


def _plain_all_the_way(value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str, k
            _plain_all_the_way(v)
    elif isinstance(value, list):
        for v in value:
            _plain_all_the_way(v)
    else:
        assert type(value) in (str, int, float, bool, type(None)), repr(value)


@pytest.mark.parametrize("target", ALL)
def test_enums_in_a_spec_built_in_python_are_plain_values(target: str) -> None:
    pytorch = {
        "image_pull_policy": Policy.NEVER,
        "pod_labels": {Tier.GOLD: Tier.GOLD},
        "container_overrides": {"securityContext": {"runAsUser": Count.TWO}},
    }
    spec = JobSpec(
        name="job",
        image="img:1",
        labels={"tier": Tier.GOLD},
        env={"TIER": Tier.GOLD},
        env_list=[{"name": "B", "value": Tier.GOLD}],
        num_nodes=Count.TWO,
        extra_resource_limits={"example.com/fpga": Count.TWO},
        launcher=Launcher(kind="python", entrypoint=Tier.GOLD, args=[Tier.GOLD]),
        **(pytorch if target == PYTORCH else {}),
    )
    assert type(spec.labels["tier"]) is str and type(spec.num_nodes) is int
    assert spec.launcher is not None and type(spec.launcher.args[0]) is str
    objects = render(spec, target)
    _plain_all_the_way(objects)
    assert "tier: gold" in yamlio.dump_all(objects)
    assert json.loads(json.dumps(objects)) == objects
    assert load_spec(dump_spec(spec)) == spec
