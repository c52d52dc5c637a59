"""``kfcompile import`` / ``kfcompile convert``: golden conversions of realistic manifests, and
the command line (exit status, stdout/stderr, ``--out`` with its summary, 200 manifests).

Golden files in ``golden/conversions/<case>/``: ``input.yaml`` is written by hand; ``spec.yaml``
(the import), ``<target>.yaml`` (``convert --allow-lossy``) and ``report.txt`` (detected shape
and every loss line) are regenerated only by ``pytest --update-golden``: review the diff.

The commands are run through ``cli.main``, as a user runs them.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import schema_check

from kfcompile import TARGETS, load_spec, render
from kfcompile.cli import file_stem, main
from kfcompile.cli.manifests import convert_text
from kfcompile.spec import yamlio
from kfcompile.spec.errors import UnsupportedFeature

ROOT = Path(__file__).resolve().parents[1]
CONVERSIONS = ROOT / "golden" / "conversions"
CASES = sorted(p.parent.name for p in CONVERSIONS.glob("*/input.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
CRD_FILES = {
    "pytorchjob/v1": "pytorchjobs-v1.9.4.yaml",
    "trainjob/v2.0": "trainjobs-v2.0.1.yaml",
    "trainjob/v2.1": "trainjobs-v2.1.0.yaml",
    "trainjob/v2.2": "trainjobs-v2.2.1.yaml",
    "trainjob/v2.3": "trainjobs-v2.3.0.yaml",
}
SERVER_SET = (
    "status:",
    "managedFields",
    "resourceVersion",
    "uid:",
    "creationTimestamp",
    "generation",
)


def run(capsys: pytest.CaptureFixture[str], *argv: str, stdin: str = "") -> tuple[int, str, str]:
    """The command as ``kfcompile`` runs it: 2 for usage errors, 1 for failures."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdin", io.StringIO(stdin))
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yamlio.load_all(text) if d is not None]


def rendered(example: Path, target: str) -> list[dict[str, Any]] | None:
    try:
        return render(load_spec(example.read_text(encoding="utf-8")), target)
    except UnsupportedFeature:
        return None


# --- golden conversions -----------------------------------------------------------------------


def expected_files(case: str) -> dict[str, str]:
    text = (CONVERSIONS / case / "input.yaml").read_text(encoding="utf-8")
    files: dict[str, str] = {}
    report = ["# kfcompile import/convert --allow-lossy of input.yaml (pytest --update-golden)"]
    for target in (None, *TARGETS):
        outcomes = convert_text(text, "input.yaml", target, allow_lossy=True)
        stem = "spec" if target is None else file_stem(target)
        texts = [o.text for o in outcomes if o.text]
        if texts:
            files[f"{stem}.yaml"] = "---\n".join(texts)
        report.append(f"{'import' if target is None else target}:")
        for o in outcomes:
            report.append(f"  {o.label}: {o.detected}: {o.result}")
            report += [f"    {line}" for line in o.lines]
    files["report.txt"] = "\n".join(report) + "\n"
    return files


def test_conversion_cases_exist() -> None:
    assert CASES == [
        "kubectl-get-dump",
        "pytorchjob-3node-volcano",
        "pytorchjob-elastic",
        "pytorchjob-torchrun-lines",
        "trainjob-v21-overrides",
    ]


@pytest.mark.parametrize("case", CASES)
def test_golden_conversion(case: str, request: pytest.FixtureRequest) -> None:
    folder = CONVERSIONS / case
    wanted = expected_files(case)
    if request.config.getoption("--update-golden"):
        for old in folder.iterdir():
            if old.name != "input.yaml":
                old.unlink()
        for name, text in wanted.items():
            (folder / name).write_text(text, encoding="utf-8")
    present = {p.name for p in folder.iterdir()} - {"input.yaml"}
    assert present == set(wanted), "golden files differ; run with --update-golden"
    for name, text in wanted.items():
        assert (folder / name).read_text(encoding="utf-8") == text, f"{case}/{name} drifted"


@pytest.mark.parametrize(("case", "target"), [(c, t) for c in CASES for t in TARGETS])
def test_golden_conversion_passes_the_crd(case: str, target: str) -> None:
    schema_check.require_shared()
    path = CONVERSIONS / case / f"{file_stem(target)}.yaml"
    objects = docs(path.read_text(encoding="utf-8"))
    assert objects
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            assert schema_check.configmap_errors(obj) == []
        else:
            assert schema_check.crd_errors(obj, CRD_FILES[target]) == []


def test_golden_specs_load() -> None:
    for case in CASES:
        for text in (CONVERSIONS / case / "spec.yaml").read_text(encoding="utf-8").split("---\n"):
            assert load_spec(text).name


def losses(case: str, target: str | None) -> list[str]:
    text = (CONVERSIONS / case / "input.yaml").read_text(encoding="utf-8")
    return [line for o in convert_text(text, "in", target) for line in o.lines]


def test_pytorchjob_to_trainjob_maps_and_reports_run_policy() -> None:
    """Master + 2 Workers are 3 nodes; the pytorch container becomes the trainer, its torchrun
    line the launcher without the rendezvous flags naming $(RANK), $(MASTER_ADDR) and
    $(MASTER_PORT); runPolicy fields without a TrainJob equivalent and the Volcano policy are
    each reported on their input path."""
    text = (CONVERSIONS / "pytorchjob-3node-volcano" / "input.yaml").read_text(encoding="utf-8")
    [outcome] = convert_text(text, "in", "trainjob/v2.3", allow_lossy=True)
    [job] = docs(outcome.text)
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 3
    assert trainer["numProcPerNode"] == 8
    assert trainer["image"] == "ghcr.io/acme/bert-train:1.4.2"
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "8"
    assert {e["name"] for e in trainer["env"]} == {"NCCL_DEBUG", "HF_HOME"}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "nlp-gpu"  # Kueue kept
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod = patch["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "bert-data"}} in pod["volumes"]
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    paths = [line.split(": ")[0] for line in outcome.lines]
    for where in (
        "spec.runPolicy.cleanPodPolicy",
        "spec.runPolicy.ttlSecondsAfterFinished",
        "spec.runPolicy.schedulingPolicy",
        "spec.runPolicy.backoffLimit",
        "spec.pytorchReplicaSpecs.Master.template.spec.schedulerName",
    ):
        assert where in paths, where
    assert trainer["command"] == ["torchrun", "/workspace/train.py", "--epochs", "3"]
    assert "args" not in trainer
    assert not [line for line in outcome.lines if "command" in line or "MASTER_ADDR" in line]
    assert outcome.status == "lossy"
    assert losses("pytorchjob-3node-volcano", "pytorchjob/v1") == []  # its own kind: exact


def test_each_dropped_sidecar_is_named() -> None:
    """The runtime's node pod has no such containers: each loss names its container."""
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "demo"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
            "containers": [
                {"name": "pytorch", "image": "img", "command": ["python", "a.py"]},
                {"name": "envoy", "image": "envoy"},
                {"name": "logger", "image": "fluent"},
            ],
        }}}}},
    }  # fmt: skip
    [outcome] = convert_text(yamlio.dump(job), "in", "trainjob/v2.3")
    at = "spec.pytorchReplicaSpecs.Master.template.spec.containers"
    assert outcome.lines == tuple(
        f"{at}[name={name}]: runtime torch-distributed has no such container: dropped"
        for name in ("envoy", "logger")
    )


def test_elastic_pytorchjob_keeps_its_program_and_reports_the_policy() -> None:
    text = (CONVERSIONS / "pytorchjob-elastic" / "input.yaml").read_text(encoding="utf-8")
    [outcome] = convert_text(text, "in", "trainjob/v2.2", allow_lossy=True)
    [job] = docs(outcome.text)
    assert job["spec"]["trainer"]["command"] == [
        "torchrun",
        "/opt/imagenet/train.py",
        "--arch",
        "resnet50",
    ]
    assert any(line.startswith("spec.elasticPolicy: ") for line in outcome.lines)
    assert "spec.elasticPolicy.metrics: no JobSpec field holds it: dropped" in outcome.lines


def test_trainjob_v21_to_v22_moves_overrides_into_the_patch() -> None:
    """podTemplateOverrides -> runtimePatches, numProcPerNode auto -> omitted, spec.labels ->
    the JobSet and Job labels of the patch: nothing lost."""
    text = (CONVERSIONS / "trainjob-v21-overrides" / "input.yaml").read_text(encoding="utf-8")
    for target in ("trainjob/v2.2", "trainjob/v2.3"):
        [outcome] = convert_text(text, "in", target)
        assert outcome.status == "ok", outcome.lines
        [job] = docs(outcome.text)
        assert "podTemplateOverrides" not in job["spec"] and "labels" not in job["spec"]
        assert "numProcPerNode" not in job["spec"]["trainer"]
        template = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
        assert template["metadata"]["labels"] == {"cost-center": "4711"}
        node = template["spec"]["replicatedJobs"][0]["template"]
        assert node["metadata"]["labels"] == {"cost-center": "4711"}
        pod = node["spec"]["template"]
        assert pod["metadata"]["labels"] == {"app.kubernetes.io/part-of": "llm-sft"}
        assert pod["spec"]["imagePullSecrets"] == [{"name": "registry-example"}]
        assert "nodeAffinity" in pod["spec"]["affinity"]
    v20 = losses("trainjob-v21-overrides", "trainjob/v2.0")
    assert sorted(line.split(": ")[0] for line in v20) == [
        "spec.podTemplateOverrides[0].metadata.labels",
        "spec.podTemplateOverrides[0].spec.affinity",
        "spec.podTemplateOverrides[0].spec.imagePullSecrets",
    ]


def test_kubectl_dump_drops_server_fields_without_a_word() -> None:
    text = (CONVERSIONS / "kubectl-get-dump" / "input.yaml").read_text(encoding="utf-8")
    for target in (None, *TARGETS):
        outcomes = convert_text(text, "in", target, allow_lossy=True)
        assert [o.label for o in outcomes] == ["in[0]", "in[1]"]
        for o in outcomes:
            assert o.text
            for word in (*SERVER_SET, "last-applied", "kueue.x-k8s.io/manager", "nvidia-l4"):
                assert word not in o.text, (target, word)
                assert not any(word in line for line in o.lines), (target, word)
    assert losses("kubectl-get-dump", None) == []
    assert losses("kubectl-get-dump", "trainjob/v2.2") == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[name=pytorch].command: runs "
        "'python /opt/mnist/src/mnist.py' on 2 nodes without torchrun: a PyTorchJob sets "
        "MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for it, a TrainJob sets only the PET_* "
        "variables torchrun reads, so the nodes cannot rendezvous (run it with torchrun, or use "
        "launcher kind torchrun): kept as written",
        "spec.pytorchReplicaSpecs.Master.restartPolicy: not supported by trainjob/v2.2 "
        "(supported by: pytorchjob/v1): dropped",
    ]


# --- the command line -------------------------------------------------------------------------


def write_rendered(path: Path, example: Path, target: str) -> list[dict[str, Any]]:
    objects = rendered(example, target)
    assert objects is not None
    path.write_text(yamlio.dump_all(objects), encoding="utf-8")
    return objects


def test_convert_prints_what_render_prints(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "job.yaml"
    write_rendered(source, ROOT / "examples" / "inline-script.yaml", "pytorchjob/v1")
    code, out, err = run(capsys, "convert", str(source), "--to", "trainjob/v2.2")
    assert code == 0
    assert docs(out) == rendered(ROOT / "examples" / "inline-script.yaml", "trainjob/v2.2")
    assert err == f"{source}: detected PyTorchJob kubeflow.org/v1\n"


def test_lossy_convert_exits_1_and_lists_each_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "elastic.yaml"
    write_rendered(source, ROOT / "examples" / "elastic-pytorchjob.yaml", "pytorchjob/v1")
    code, out, err = run(capsys, "convert", str(source), "--to", "trainjob/v2.3")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[-1] == f"{source}: detected PyTorchJob kubeflow.org/v1"
    fields = sorted(line.split(": ")[1] for line in lines[:-1])
    assert fields == [
        "spec.elasticPolicy",
        "spec.pytorchReplicaSpecs.Worker.restartPolicy",
        "spec.runPolicy.backoffLimit",
        "spec.runPolicy.cleanPodPolicy",
        "spec.runPolicy.ttlSecondsAfterFinished",
    ]
    code, out, err = run(capsys, "convert", str(source), "--to", "trainjob/v2.3", "--allow-lossy")
    assert code == 0
    [job] = docs(out)
    assert job["kind"] == "TrainJob" and job["spec"]["trainer"]["numNodes"] == 4
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert sorted(w.split(": ")[2] for w in warnings) == fields


def test_import_prints_a_spec_that_loads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    example = ROOT / "examples" / "llama-4x8-efa.yaml"
    source = tmp_path / "llama.yaml"
    write_rendered(source, example, "trainjob/v2.1")
    code, out, err = run(capsys, "import", str(source))
    assert code == 0
    assert load_spec(out) == load_spec(example.read_text(encoding="utf-8"))
    assert "detected TrainJob for Trainer v2.1 (podTemplateOverrides)" in err


def test_stdin_and_multi_document_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    jobs = [rendered(example, "trainjob/v2.3") for example in EXAMPLES]
    text = yamlio.dump_all([obj for objects in jobs if objects for obj in objects])
    code, out, err = run(capsys, "convert", "-", "--to", "pytorchjob/v1", stdin=text)
    names = [d["metadata"]["name"] for d in docs(out) if d["kind"] == "PyTorchJob"]
    assert len(names) == sum(1 for objects in jobs if objects) == err.count("detected")
    assert code == 0
    listed = yamlio.dump({"apiVersion": "v1", "kind": "List", "items": docs(text)})
    code, out2, _ = run(capsys, "convert", "-", "--to", "pytorchjob/v1", stdin=listed)
    assert (code, out2) == (0, out)


def test_other_documents_are_losses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "mixed.yaml"
    objects = write_rendered(source, ROOT / "examples" / "minimal.yaml", "trainjob/v2.3")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "tb"}}
    source.write_text(yamlio.dump_all([service, *objects]), encoding="utf-8")
    code, out, err = run(capsys, "convert", str(source), "--to", "trainjob/v2.2")
    assert (code, out) == (1, "")
    assert (
        f"{source}: documents[0]: Service tb is not a PyTorchJob or TrainJob: not converted" in err
    )
    code, out, err = run(capsys, "convert", str(source), "--to", "trainjob/v2.2", "--allow-lossy")
    assert code == 0 and [d["kind"] for d in docs(out)] == ["TrainJob"]


def test_unreadable_manifests_fail_with_their_place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: PyTorchJob\n  name: [x\n", encoding="utf-8")
    code, out, err = run(capsys, "import", str(bad))
    assert (code, out) == (1, "")
    assert err.startswith(f"{bad}: line ")
    wrong = tmp_path / "deployment.yaml"
    wrong.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n")
    code, _, err = run(capsys, "convert", str(wrong), "--to", "trainjob/v2.3")
    assert code == 1
    assert "Deployment web is not a PyTorchJob or TrainJob" in err
    noimage = tmp_path / "noimage.yaml"
    noimage.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\n"
        "spec: {runtimeRef: {name: torch-distributed}}\n"
    )
    code, _, err = run(capsys, "import", str(noimage))
    assert code == 1
    assert f"{noimage}: spec.trainer.image: required: the training image" in err


def test_a_directory_run_survives_unreadable_files_and_skips_its_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_rendered(tmp_path / "job.yaml", ROOT / "examples" / "minimal.yaml", "pytorchjob/v1")
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    out = tmp_path / "converted"
    for _ in range(2):  # the second run must not read the first run's output
        code, stdout, err = run(
            capsys, "convert", str(tmp_path), "--to", "trainjob/v2.3", "--out", str(out)
        )
        assert code == 1
        assert stdout.splitlines()[-1] == (  # an unreadable file is no job
            "1 job: 1 ok, 0 written with losses, 0 not written (losses), 0 failed; "
            "1 file unreadable"
        )
        assert err.startswith(f"{tmp_path / 'latin1.yaml'}: cannot read: ")
    assert [p.name for p in out.iterdir()] == ["job.yaml"]


def test_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, "convert", str(empty), "--to", "trainjob/v2.3")[0] == 2
    assert run(capsys, "import", str(tmp_path / "missing.yaml"))[0] == 2
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        write_rendered(tmp_path / folder / "x.yaml", EXAMPLES[0], "pytorchjob/v1")
    out = str(tmp_path / "out")
    a, b = str(tmp_path / "a" / "x.yaml"), str(tmp_path / "b" / "x.yaml")
    assert run(capsys, "import", a, b, "--out", out)[0] == 2  # both would write out/x.yaml
    with pytest.raises(SystemExit):
        run(capsys, "convert", a, "--to", "trainjob/v9")


def make_manifests(folder: Path, count: int) -> dict[str, str]:
    """``count`` manifests: every example rendered for every target it renders on (renamed
    per copy), hand-written golden inputs, and a few broken files; the expected result of
    converting each to trainjob/v2.3 without --allow-lossy."""
    expected: dict[str, str] = {}
    sources: list[tuple[str, str, str]] = []  # (kind, stem, text)
    for example in EXAMPLES:
        for target in TARGETS:
            objects = rendered(example, target)
            if objects is not None:
                ok = rendered(example, "trainjob/v2.3") is not None
                sources.append(
                    (
                        "ok" if ok else "lossy",
                        f"{example.stem}-{file_stem(target)}",
                        yamlio.dump_all(objects),
                    )
                )
    for case in ("pytorchjob-3node-volcano", "pytorchjob-elastic"):
        sources.append(("lossy", case, (CONVERSIONS / case / "input.yaml").read_text()))
    sources.append(
        ("ok", "trainjob-v21", (CONVERSIONS / "trainjob-v21-overrides" / "input.yaml").read_text())
    )
    sources.append(("unreadable", "broken", "apiVersion: v1\nkind: [\n"))
    sources.append(
        ("skipped", "configmap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    )
    for i in range(count):
        kind, stem, text = sources[i % len(sources)]
        sub = folder / f"team-{i % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        name = f"{stem}-{i:03d}.yaml"
        (sub / name).write_text(text, encoding="utf-8")
        expected[f"{folder / sub.name / name}"] = kind
    return expected


def test_convert_a_directory_of_200_manifests(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source, out = tmp_path / "manifests", tmp_path / "converted"
    expected = make_manifests(source, 200)
    code, stdout, err = run(
        capsys, "convert", str(source), "--to", "trainjob/v2.3", "--out", str(out)
    )
    counted = [re.search(r"(\d+) (?:lost|problem)", row) for row in stdout.splitlines()]
    skipped = stdout.count("skipped, not a job")  # one document each, one line for it
    assert err.count("\n") == sum(int(m[1]) for m in counted if m) + skipped  # a line each
    assert code == 1  # some are lossy or broken
    header, *rows, total = stdout.splitlines()
    assert header.split() == ["file", "detected", "target", "result"]
    assert len(rows) == 200
    results = {row.split()[0]: row for row in rows}
    assert set(results) == set(expected)
    words = {
        "ok": "trainjob/v2.3  ok",
        "lossy": "trainjob/v2.3  not written, ",
        "unreadable": "trainjob/v2.3  unreadable, 1 problem",
        "skipped": "trainjob/v2.3  skipped, not a job",
    }
    for label, kind in expected.items():
        assert words[kind] in results[label], results[label]
        assert (results[label].split()[1] == "ConfigMap") is (kind == "skipped")
    counts = {k: list(expected.values()).count(k) for k in words}
    jobs = counts["ok"] + counts["lossy"]
    assert total == (
        f"{jobs} jobs: {counts['ok']} ok, 0 written with losses, {counts['lossy']} not written "
        f"(losses), 0 failed; {counts['unreadable']} files unreadable; {counts['skipped']} files "
        "with no job (skipped)"
    )
    written = sorted(out.rglob("*.yaml"))
    assert len(written) == counts["ok"]
    for path in written[:: max(1, len(written) // 25)]:  # a sample: each one checked is 5 ms
        [*_, job] = docs(path.read_text(encoding="utf-8"))
        assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
        if schema_check.SHARED is not None:
            assert schema_check.crd_errors(job, CRD_FILES["trainjob/v2.3"]) == []


def test_wired_into_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "job.yaml"
    write_rendered(source, ROOT / "examples" / "minimal.yaml", "trainjob/v2.1")
    assert main(["convert", str(source), "--to", "pytorchjob/v1"]) == 0
    assert docs(capsys.readouterr().out)[0]["kind"] == "PyTorchJob"
    assert main(["import", str(tmp_path / "nothing.yaml")]) == 2


def test_a_directory_summary_counts_jobs_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    write_rendered(source / "job.yaml", ROOT / "examples" / "minimal.yaml", "pytorchjob/v1")
    (source / "settings.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"
    )
    out = tmp_path / "out"
    code, stdout, err = run(
        capsys, "convert", str(source), "--to", "trainjob/v2.3", "--out", str(out)
    )
    _, *rows, total = stdout.splitlines()
    assert code == 1  # a document not converted is a loss, as inside a job's file
    assert rows[1].split() == [
        str(source / "settings.yaml"), "ConfigMap", "trainjob/v2.3", "skipped,", "not", "a", "job"
    ]  # fmt: skip
    assert total == (
        "1 job: 1 ok, 0 written with losses, 0 not written (losses), 0 failed; "
        "1 file with no job (skipped)"
    )
    assert err == (
        f"{source / 'settings.yaml'}: documents[0]: ConfigMap settings is not a PyTorchJob or "
        "TrainJob: not converted\n"
    )
    # --allow-lossy: a warning, and the run succeeds; an unreadable file still fails it.
    args = ["convert", str(source), "--to", "trainjob/v2.3", "--allow-lossy"]
    code, stdout, err = run(capsys, *args, "--out", str(out))
    assert code == 0 and err.startswith(f"warning: {source / 'settings.yaml'}: documents[0]: ")
    code, stdout, err = run(capsys, *args)  # to stdout: only the job is "detected"
    assert code == 0 and "detected ConfigMap" not in err and "detected PyTorchJob" in err
    (source / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    code, stdout, _ = run(capsys, *args, "--out", str(out))
    assert code == 1
    assert stdout.splitlines()[-1].endswith("; 1 file unreadable; 1 file with no job (skipped)")
    assert stdout.splitlines()[-1].startswith("1 job: ")
