"""Validate rendered objects against the real upstream schemas, the way the API server would.

* Kubeflow CRDs: the reference files in ``../shared/crds`` (``$KFCOMPILE_SHARED/crds``), checked
  with ``kfcompile.output.crd`` (the code behind ``kfcompile validate --crd``): each CRD's
  ``openAPIV3Schema`` is converted to JSON Schema honouring the structural-schema extensions, so
  unknown fields are errors exactly as with ``fieldValidation=Strict``.
* core/v1 objects: the ``-local-strict`` schemas shipped by ``kubernetes-validate``.

Validators are built once and cached. Not checked: CEL (``x-kubernetes-validations``, e.g. the
TrainJob name rule of v2.1+ and the ``managedBy`` values), ``format``, webhooks. Stricter than the
server on one point: a ``null`` in a non-nullable field is an error (the server would silently
prune it, which for a renderer is a bug too).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from referencing import Registry, Resource

from kfcompile.output import crd as kfcrd

Schema = dict[str, Any]


def _find_shared() -> Path | None:
    env = os.environ.get("KFCOMPILE_SHARED")
    shared = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"
    return shared if (shared / "crds").is_dir() else None


SHARED: Path | None = _find_shared()
CRDS: Path | None = SHARED / "crds" if SHARED else None

K8S_SCHEMAS = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
K8S_VERSIONS: tuple[str, ...] = tuple(
    sorted(
        (d.name.removesuffix("-local-strict") for d in K8S_SCHEMAS.glob("v*-local-strict")),
        key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)),
    )
)
K8S_VERSION: str = K8S_VERSIONS[-1]  # newest, e.g. "v1.37.0"
_DEFINITIONS_URI = "https://kubernetes.io/api/_definitions.json"


# The CRD of the release each target is checked against.
CRD_FILES: dict[str, str] = {
    "pytorchjob/v1": "pytorchjobs-v1.9.4.yaml",
    "trainjob/v2.0": "trainjobs-v2.0.1.yaml",
    "trainjob/v2.1": "trainjobs-v2.1.0.yaml",
    "trainjob/v2.2": "trainjobs-v2.2.1.yaml",
    "trainjob/v2.3": "trainjobs-v2.3.0.yaml",
}


def require_shared() -> Path:
    if SHARED is None and os.environ.get("KFCOMPILE_REQUIRE_SHARED"):
        pytest.fail("KFCOMPILE_REQUIRE_SHARED is set but ../shared/crds is missing")
    if SHARED is None:
        pytest.skip(
            reason='../shared/crds not found: the upstream CRDs (docs/contributing.md, "The '
            'reference CRDs": where to get them; or set KFCOMPILE_SHARED)'
        )
    return SHARED


# --- Kubeflow CRDs: conversion and validation live in kfcompile.output.crd ------------------

# The validator class, converter and error formatter of the product, for the core schemas below
# and for tests of the conversion itself.
_Validator: Any = kfcrd._validator_class()
_convert = kfcrd._convert


def _errors(validator: Any, obj: object) -> list[str]:
    """Every violation, as ``"<path>: <message>"`` with paths like ``spec.containers[0].name``."""
    return kfcrd._format(validator.iter_errors(obj))


@functools.lru_cache
def load_crd(crd_file: str) -> dict[str, Any]:
    """The parsed ``CRDS/crd_file`` (cached: one object per file, so kfcompile.output.crd caches
    too;
    do not mutate)."""
    crd: dict[str, Any] = yaml.load(
        (require_shared() / "crds" / crd_file).read_text(), Loader=yaml.CSafeLoader
    )
    return crd


@functools.lru_cache
def crd_schema(crd_file: str) -> Schema:
    """JSON Schema of the first served version of ``CRDS/crd_file`` (cached: do not mutate)."""
    return kfcrd.json_schema(load_crd(crd_file))


def crd_errors(obj: dict[str, Any], crd_file: str) -> list[str]:
    """Every violation of ``obj`` against the CRD, as ``"<path>: <message>"``."""
    return kfcrd.errors(obj, load_crd(crd_file))


# --- core/v1 via kubernetes-validate's strict schemas -----------------------------------------


@functools.lru_cache
def _core_validator(k8s_version: str, name: str) -> Any:
    root = K8S_SCHEMAS / f"{k8s_version}-local-strict"
    definitions = Resource.from_contents(json.loads((root / "_definitions.json").read_text()))
    registry: Registry[Any] = Registry().with_resource(_DEFINITIONS_URI, definitions)
    return _Validator(json.loads((root / f"{name}.json").read_text()), registry=registry)


def pod_template_errors(template: dict[str, Any], k8s_version: str = K8S_VERSION) -> list[str]:
    """Violations of a core/v1 PodTemplateSpec (unknown fields rejected)."""
    return _errors(_core_validator(k8s_version, "podtemplatespec-v1"), template)


def configmap_errors(obj: dict[str, Any], k8s_version: str = K8S_VERSION) -> list[str]:
    """Violations of a core/v1 ConfigMap (unknown fields rejected)."""
    return _errors(_core_validator(k8s_version, "configmap-v1"), obj)


def core_errors(obj: dict[str, Any], k8s_version: str = K8S_VERSION) -> list[str]:
    """Violations of a built-in Kubernetes object's schema, chosen by its kind and apiVersion
    (e.g. ``role-rbac-v1``; unknown fields rejected)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    short = group.split(".")[0] if group else ""
    name = "-".join(p for p in (obj["kind"].lower(), short, version) if p)
    return _errors(_core_validator(k8s_version, name), obj)
