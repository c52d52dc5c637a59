"""The one field table (``targets/fields.py``) and each target's table, resolved.

Render walks the field table forward and the importer walks it backward; these tests check the
table itself: that every target resolves it when built, that what ``explain`` reports is where
the resolved table says, and that looking a slot up never answers for another table.
"""

from __future__ import annotations

import strategies as S
from hypothesis import HealthCheck, given, settings

from kfcompile import TARGETS, JobSpec, UnsupportedFeature, explain
from kfcompile.spec.fieldpath import FieldPath, field_path
from kfcompile.targets import base, fields
from kfcompile.targets.base import Slot


def test_lookup_answers_for_the_table_it_is_given() -> None:
    """Tables made and dropped in a loop reuse the same ids: a cache keyed by ``id(table)``
    answered with an earlier table's row."""
    for i in range(2000):
        table = {"pod.tolerations": Slot.at(f"spec.pod{i}.tolerations"), "container.*": None}
        assert base.lookup(table, "pod.tolerations") == Slot.at(f"spec.pod{i}.tolerations")
        wildcard = {"pod.*": Slot.at(f"spec.pod{i}")}
        assert base.lookup(wildcard, "pod.hostNetwork") == Slot.at(f"spec.pod{i}.hostNetwork")


def test_a_target_resolves_the_table_when_built() -> None:
    """Where ``tolerations`` lands in ``trainjob/v2.1``, read in one place."""
    rows = {r.source: r for r in TARGETS["trainjob/v2.1"].fields}
    assert rows["tolerations"] == base.Resolved(
        "tolerations", "pod.tolerations", ("spec.podTemplateOverrides[0].spec.tolerations",)
    )
    assert rows["runtime_ref.name"].paths == ("spec.runtimeRef.name",)
    assert rows["termination_grace_period_seconds"].paths is None  # v2.1 cannot hold it
    assert [r.source for r in TARGETS["pytorchjob/v1"].fields] == [f.source for f in fields.feeds()]


def test_every_field_of_the_spec_is_in_the_table() -> None:
    import attrs

    tops = {f.field for f in fields.feeds()}
    assert tops == {a.name for a in attrs.fields(JobSpec)} - {"gpu_resource"}
    # gpu_resource only names the key gpus_per_node lands under


def _within(source: str, feed: str) -> bool:
    """Whether spec path ``source`` (a placement's) is at or below ``feed`` (a table row's)."""
    inner, outer = field_path(source).parts, field_path(feed).parts
    return inner[: len(outer)] == outer


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=S.job_specs())
def test_explain_places_every_value_where_the_resolved_table_says(spec: JobSpec) -> None:
    for name, target in TARGETS.items():
        try:
            placements = explain(spec, name)
        except UnsupportedFeature:
            continue
        for p in placements:
            if p.merge or (name == "pytorchjob/v1" and p.source == "num_nodes"):
                continue  # the escape hatches' keys; the replica counts PyTorchJob writes itself
            rows = [r for r in target.fields if r.paths and _within(p.source, r.source)]
            assert any(p.path.startswith(path) for r in rows for path in r.paths or ()), (name, p)


def test_problems_carry_their_path_as_a_value() -> None:
    reserved = {"name": "j", "image": "i", "env": {"PET_NNODES": "2", "MY.VAR": "1"}}
    from kfcompile import render, structure

    try:
        render(structure(reserved), "trainjob/v2.3")
    except UnsupportedFeature as exc:
        [problem] = exc.problems
    assert problem.at == FieldPath.of("env", "PET_NNODES")
    assert (problem.at.top, problem.path) == ("env", "env.PET_NNODES")
    # an env name that is no plain key is quoted as every other path quotes it
    dotted = explain(structure(reserved | {"env": {"MY.VAR": "1"}}), "trainjob/v2.3")
    assert [p.source for p in dotted if p.source.startswith("env")] == ['env["MY.VAR"]']
