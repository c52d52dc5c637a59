"""Loading and rendering are linear in the size of the spec: four times the entries, at most four
times the work.

Work is counted, not timed: every Python and C function call the step makes (``sys.setprofile``),
so a list scanned once per entry shows as a count that grows with the square of the entries.
Comparisons C makes inside ``==`` or ``in`` are invisible to that count; where they are the work
(a list merge), the values compare through a ``str`` subclass whose ``__eq__`` is a Python call.
``bench/render_scaling.py`` prints the seconds.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfcompile import JobSpec, UnsupportedFeature, load_spec, render
from kfcompile.spec import object_paths, yamlio

N = 300  # entries in the small spec; the large one has 4 * N
TARGETS = ["trainjob/v2.3", "pytorchjob/v1"]
HEAD = "name: hello\nimage: img:1\ncommand: [python, train.py]\n"


def work(step: Callable[[], object]) -> int:
    """Function calls made by ``step()``, with the path caches emptied first so that both sizes
    start alike."""
    for cache in (object_paths.parse, object_paths.key, object_paths.select):
        cache.cache_clear()
    calls = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    sys.setprofile(count)
    try:
        step()
    finally:
        sys.setprofile(None)
    return calls


def assert_linear(step: Callable[[int], Callable[[], object]]) -> None:
    small, large = work(step(N)), work(step(4 * N))
    assert large <= 4 * small, f"{4 * N} entries cost {large / small:.1f} times {N}"


def rendering(spec: JobSpec, target: str) -> Callable[[], object]:
    """Render ``spec``; past a CRD's maxItems (128 env on Trainer v2.2+) the render is refused
    after its check of the output, whose work counts as well."""

    def step() -> object:
        try:
            return render(spec, target)
        except UnsupportedFeature as exc:
            return exc

    return step


def spec_text(field: str, n: int) -> str:
    lines = {
        "env": ["env:", *(f"  V{i}: 'value {i}'" for i in range(n))],
        "env_list": [
            "env_list:",
            *(
                f"  - {{name: F{i}, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}"
                for i in range(n)
            ),
        ],
        "secret_env": ["secret_env:", *(f"  - S{i}" for i in range(n))],
        "volumes": [
            "volumes:",
            *(f"  - {{name: v{i}, emptyDir: {{}}}}" for i in range(n)),
            "volume_mounts:",
            *(f"  - {{name: v{i}, mountPath: /mnt/{i}}}" for i in range(n)),
        ],
        "labels": [
            "labels:",
            *(f"  l{i}: x" for i in range(n)),
            "node_selector:",
            *(f"  example.com/n{i}: x" for i in range(n)),
        ],
    }[field]
    return HEAD + "\n".join(lines) + "\n"


FIELDS = ["env", "env_list", "secret_env", "volumes", "labels"]


@pytest.mark.parametrize("field", FIELDS)
def test_loading_is_linear(field: str) -> None:
    assert_linear(lambda n: lambda: load_spec(spec_text(field, n)))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("field", FIELDS)
def test_rendering_is_linear(field: str, target: str) -> None:
    def step(n: int) -> Callable[[], object]:
        return rendering(load_spec(spec_text(field, n)), target)

    assert_linear(step)


@pytest.mark.parametrize("target", TARGETS)
def test_dumping_the_output_is_linear(target: str) -> None:
    def step(n: int) -> Callable[[], object]:
        objects = render(load_spec(spec_text("labels", n)), target)
        return lambda: yamlio.dump_all(objects)

    assert_linear(step)


class Counted(str):
    """A string whose comparisons are Python calls, so the profile counts them."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other) is True


@pytest.mark.parametrize("target", TARGETS)
def test_merging_a_named_list_override_is_linear(target: str) -> None:
    """``container_overrides.env`` merges item by item, by name, into the generated env (half
    its items name generated ones, with the same value: nothing is replaced)."""

    def step(n: int) -> Callable[[], object]:
        env = {f"V{i}": "generated" for i in range(n)}
        over = [{"name": Counted(f"V{i}"), "value": "generated"} for i in range(0, 2 * n, 2)]
        spec = JobSpec(
            name="hello",
            image="img:1",
            command=["python"],
            env=env,
            container_overrides={"env": over},
        )
        return rendering(spec, target)

    assert_linear(step)


@pytest.mark.parametrize("target", TARGETS)
def test_merging_a_pod_list_override_is_linear(target: str) -> None:
    """``pod_spec_overrides.volumes`` merges by name into the generated volumes."""

    def step(n: int) -> Callable[[], object]:
        def volumes(keys: range) -> list[dict[str, Any]]:
            return [{"name": Counted(f"v{i}"), "emptyDir": {}} for i in keys]

        spec = JobSpec(
            name="hello",
            image="img:1",
            command=["python"],
            volumes=volumes(range(n)),
            pod_spec_overrides={"volumes": volumes(range(0, 2 * n, 2))},
        )
        return rendering(spec, target)

    assert_linear(step)


def test_builder_work_per_put_is_constant() -> None:
    """Creating ``n`` named items, then replacing each (which forgets the containers remembered
    below it) costs the same per item at any ``n``."""

    def step(n: int) -> Callable[[], object]:
        created = [object_paths.parse(f"c[name=n{i}].x") for i in range(n)]
        replaced = [object_paths.parse(f"c[name=n{i}]") for i in range(n)]

        def build() -> None:
            builder = object_paths.Builder({})
            for i, path in enumerate(created):
                builder.put(path, i)
            for i, path in enumerate(replaced):
                builder.put(path, {"y": i})

        return build

    assert_linear(step)


PATHS = [
    *(
        "c[name=a]",
        "c[name=b]",
        "c[name=a].x",
        "c[name=b].x.y",
        "c[mountPath=a]",
        "c[mountPath=a].z",
    ),
    *("c[0]", "c[1]", "c[0].name", "c[name=b].name", "c[0].mountPath", "c"),
]
VALUES = st.one_of(
    st.integers(0, 3),
    st.sampled_from(["a", "b"]),
    st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c"])}),
    st.fixed_dictionaries({"mountPath": st.sampled_from(["a", "b"]), "name": st.just("b")}),
    st.lists(st.fixed_dictionaries({"name": st.sampled_from(["a", "b"])}), max_size=3),
)


def outcome(put: Callable[[], None]) -> str:
    try:
        put()
    except object_paths.MergeConflict:  # `place` reports it and goes on: nothing was stored
        return "conflict"
    except (LookupError, TypeError, AttributeError) as exc:  # shapes that do not fit: a bug
        return type(exc).__name__
    return "ok"


@settings(max_examples=4 * settings().max_examples)
@given(st.lists(st.tuples(st.sampled_from(PATHS), VALUES, st.booleans()), max_size=12))
def test_one_builder_puts_what_a_builder_per_value_puts(
    steps: list[tuple[str, Any, bool]],
) -> None:
    """The builder's remembered containers and list indexes never change the result: one builder
    for every value builds what a fresh one per value (which walks and indexes anew) builds,
    items renamed, replaced and selected by two keys included."""
    kept: dict[str, Any] = {}
    fresh: dict[str, Any] = {}
    builder = object_paths.Builder(kept)
    for text, value, merge in steps:
        path = object_paths.parse(text)
        how = object_paths.ANY if merge else None
        one = outcome(functools.partial(builder.put, path, object_paths.copied(value), how))
        assert one == outcome(functools.partial(object_paths.put, fresh, path, value, how))
        assert kept == fresh
        if one not in ("ok", "conflict"):
            break  # a render stops there
