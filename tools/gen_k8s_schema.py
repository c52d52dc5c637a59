"""Write ``src/kfcompile/k8s_core_v1.json``: the core/v1 objects a job spec embeds, as data.

    python tools/gen_k8s_schema.py

The source is the upstream Kubernetes OpenAPI schema as converted to JSON Schema by the
``kubernetes-validate`` package (a test dependency). Only the closure of ``PodSpec`` is kept
(containers, volumes, mounts, env, tolerations, affinity, security contexts, probes,
resources...), each object reduced to its properties' types and its required keys, so that the
runtime validator (``kfcompile.k8s_schema``) needs neither kubernetes-validate nor jsonschema.
``tests/test_k8s_schema.py`` regenerates the file and fails when the committed one differs.

Type notation in the file: ``"string"``, ``"boolean"``, ``"number"``, ``"int32"``,
``"int64"``, ``"integer"``, ``"quantity"``, ``"int-or-string"``, ``"object"`` (free-form
mapping), ``{"ref": Name}``, ``{"list": type}``, ``{"map": type}``, ``{"enum": [...]}``.
A list that a strategic merge patch merges rather than replaces carries its
``x-kubernetes-patch-merge-key`` as ``"merge"`` (``""``: a set of scalars, merged by value) and
``"retainKeys": true`` where its patch strategy has ``retainKeys`` (``paths.merged`` reads them).
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

# The release the pinned `kubernetes` client (37.x) speaks, and the newest kubernetes-validate
# carries: a superset of older releases' fields, so no valid field is called a typo.
KUBERNETES = "v1.37.0"
SOURCE = f"kubernetes-json-schema/{KUBERNETES}-local/_definitions.json"
ROOTS = ("io.k8s.api.core.v1.PodSpec",)
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"  # its grammar lives in k8s_rules
OUT = Path(__file__).resolve().parents[1] / "src" / "kfcompile" / "k8s_core_v1.json"


def upstream() -> dict[str, Any]:
    """The ``$defs`` of kubernetes-validate's copy of the Kubernetes OpenAPI definitions."""
    text = resources.files("kubernetes_validate").joinpath(SOURCE).read_text(encoding="utf-8")
    defs: dict[str, Any] = json.loads(text)["$defs"]
    return defs


def _short(ref: str) -> str:
    return ref.rsplit("/", 1)[-1].rsplit(".", 1)[-1]


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type", [])
    return [x for x in ([t] if isinstance(t, str) else t) if x != "null"]


def _type(schema: dict[str, Any], defs: dict[str, Any], todo: list[str]) -> Any:
    """The compact notation of one property's schema; referenced objects are queued."""
    if "$ref" in schema:
        full = schema["$ref"].rsplit("/", 1)[-1]
        if full == QUANTITY:
            return "quantity"
        target = defs[full]
        if "properties" not in target:  # a scalar wrapper: IntOrString, Time, FieldsV1
            return _type(target, defs, todo)
        todo.append(full)
        return {"ref": _short(full)}
    if "oneOf" in schema:
        options = sorted(t for option in schema["oneOf"] for t in _types(option))
        if options == ["integer", "string"]:
            return "int-or-string"
        raise ValueError(f"unexpected oneOf {schema['oneOf']}")
    if "enum" in schema:
        return {"enum": sorted(v for v in schema["enum"] if v is not None)}
    (kind,) = _types(schema)
    if kind == "integer":
        return schema.get("format", "integer")
    if kind in ("string", "boolean", "number"):
        return kind
    if kind == "array":
        out: dict[str, Any] = {"list": _type(schema["items"], defs, todo)}
        strategy = schema.get("x-kubernetes-patch-strategy", "").split(",")
        if "merge" in strategy:
            out["merge"] = schema.get("x-kubernetes-patch-merge-key", "")
        if "retainKeys" in strategy:
            out["retainKeys"] = True
        return out
    if kind == "object" and "additionalProperties" in schema:
        return {"map": _type(schema["additionalProperties"], defs, todo)}
    if kind == "object" and "properties" not in schema:
        return "object"
    raise ValueError(f"unexpected schema {schema}")


def generate(defs: dict[str, Any]) -> dict[str, Any]:
    """The closure of ``ROOTS`` in the compact notation, by short name."""
    out: dict[str, Any] = {}
    todo = list(ROOTS)
    full_names: dict[str, str] = {}
    while todo:
        full = todo.pop()
        short = _short(full)
        if full_names.setdefault(short, full) != full:
            raise ValueError(f"two definitions named {short}: {full_names[short]}, {full}")
        if short in out:
            continue
        schema = defs[full]
        entry: dict[str, Any] = {
            "properties": {
                name: _type(prop, defs, todo) for name, prop in sorted(schema["properties"].items())
            }
        }
        if schema.get("required"):
            entry["required"] = sorted(schema["required"])
        out[short] = entry
    return {"kubernetes": KUBERNETES, "source": SOURCE, "definitions": dict(sorted(out.items()))}


def dumps(data: dict[str, Any]) -> str:
    """One definition per line: small, and diffs show which objects changed."""
    lines = ["{"]
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in data.items() if k != "definitions"]
    lines.append('  "definitions": {')
    items = list(data["definitions"].items())
    for i, (name, entry) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(name)}: {json.dumps(entry, separators=(',', ':'))}{comma}")
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def main() -> int:
    OUT.write_text(dumps(generate(upstream())), encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
