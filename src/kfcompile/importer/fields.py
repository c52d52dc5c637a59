"""The field table read backward: each slot's value, as the targets' tables placed it, back to
the spec fields of the rows that fill it (``targets/fields.py``).

Every slot a row fills is read once, merged from every place it was found (a map slot is the
union of its places; any other the first place's value, the others lost where they differ).
Then, in three steps:

1. the rows that take a part of a slot value (``runtime_ref.name`` takes ``.name``), each by its
   codec's ``decode``; a part the manifest has but whose rows found nothing is ``{}``;
2. the special cases, each by the ``read`` beside its ``render`` (``targets/special.py``, run in
   ``importer/special.py``'s order): they may take parts of a slot too (the GPUs from
   ``.limits``, the ``/dev/shm`` volume from the volumes);
3. the rows that take what is left of a slot (``labels`` after ``queue``, ``volumes`` after the
   volumes kfcompile adds itself, ``extra_resource_requests`` after cpu, memory and GPUs).

What no row took of a slot value is a loss, at its input path.
"""

from __future__ import annotations

from typing import Final

from attrs import frozen

from kfcompile.importer import special
from kfcompile.importer.document import Doc
from kfcompile.importer.state import NOT_HELD, Reading
from kfcompile.spec import object_paths
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.targets import fields
from kfcompile.targets.codecs import LEAVE, MISSING, SKIP, Hatch, Keyed, present
from kfcompile.targets.fields import Field
from kfcompile.targets.special import TAKES_PARTS

# Every slot the table fills, the escape hatches' groups (``pod.*``) too: those are read from
# what the other slots leave in the pod and the container (``shapes.escape_hatches``).
SLOTS: Final = fields.slots()
READ: Final = tuple(s for s in SLOTS if not s.endswith(".*"))
ROWS: Final = tuple(r for r in fields.ROWS if not isinstance(r.codec, Hatch))
VALUE_SLOTS: Final = tuple(dict.fromkeys(r.slot for r in ROWS))
SUBS: Final = {r: object_paths.parse(r.sub) for r in ROWS}


def _rest(row: Field) -> bool:
    """Whether ``row`` takes what others leave of its slot: its sub-path is a prefix of another
    row's, or a special takes parts of the slot."""
    mine = SUBS[row]
    return row.slot in TAKES_PARTS or any(
        other.slot == row.slot and other is not row and SUBS[other][: len(mine)] == mine
        for other in ROWS
    )


FIRST: Final = tuple(r for r in ROWS if not _rest(r))
# The deeper first, so that a row takes what is left below another's part (stable: table order).
LAST: Final = tuple(sorted((r for r in ROWS if _rest(r)), key=lambda r: -len(SUBS[r])))
# A part's own slot: where the part is, even empty (a part whose slot others fill, such as
# ``topology`` in the pod annotations, is there only when a row of it finds its value).
PARTS: Final = {
    r.part: r.slot
    for r in ROWS
    if r.part is not None and all(o.part == r.part for o in ROWS if o.slot == r.slot)
}
UNION: Final = frozenset(r.slot for r in ROWS if isinstance(r.codec, Keyed) and not r.sub)


@frozen(repr=False, eq=False)
class SlotValue:
    """A slot's value where it was read, as a working copy the rows take their parts of."""

    where: FieldPath
    doc: Doc


def read_table(r: Reading) -> None:
    """Fill ``r.data`` from the slots ``r.found`` holds (see the module docstring)."""
    values = {slot: v for slot in VALUE_SLOTS if (v := _slot_value(r, slot)) is not None}
    for row in FIRST:
        _decode(r, values, row)
    for part, slot in PARTS.items():
        if slot in values and part not in r.data:  # an empty part is still a part
            r.put(part, {}, values[slot].where)
    special.read_specials(r, {slot: (v.where, v.doc) for slot, v in values.items()})
    for row in LAST:
        _decode(r, values, row)
    for value in values.values():
        for path in value.doc.leftovers():
            r.lose(value.where.join(FieldPath(path)), NOT_HELD)


def _slot_value(r: Reading, slot: str) -> SlotValue | None:
    if slot in UNION:
        merged = r.union(slot)
    elif any(SUBS[row] for row in ROWS if row.slot == slot):  # rows take parts: a mapping
        merged = r.one_mapping(slot)
    else:
        merged = r.one(slot)
    return None if merged is None else SlotValue(merged[0], Doc(merged[1]))


def _decode(r: Reading, values: dict[str, SlotValue], row: Field) -> None:
    value = values.get(row.slot)
    if value is None:
        return
    sub = SUBS[row]
    found = value.doc.get(sub)
    if found is MISSING:
        return
    decoded = row.codec.decode(row, present(found))
    if decoded.value is LEAVE:
        return
    value.doc.take(sub)
    at = value.where.join(FieldPath(sub))
    for below, message in decoded.losses:
        r.lose(at.join(FieldPath(below)), message)
    if decoded.value is SKIP:
        return
    r.put(FieldPath(row.chain), decoded.value, at)
    for n in range(1, len(row.chain)):  # the part's own place, and each place between
        r.note(FieldPath(row.chain[:n]), value.where.join(FieldPath(sub[: n - 1])))
    for spec_below, input_below in decoded.sources:
        r.note(FieldPath((*row.chain, *spec_below)), at.join(FieldPath(input_below)))
