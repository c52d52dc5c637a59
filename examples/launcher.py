"""A small launcher built only on kfcompile's public API: ``import kfcompile`` (the names in
``kfcompile.__all__``) and the port Protocols in ``kfcompile.lifecycle.ports``. It is what another
tool
embeds to run training jobs on Kubeflow without writing any of its YAML.

    python examples/launcher.py --name demo --image pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime \\
        --nodes 2 --gpus 1 --target trainjob/v2.3 /app/train.py --epochs 3 | kubectl apply -f -

The steps, one function each:

1. ``build_spec``: a ``kfcompile.JobSpec`` built in code (typed, checked when built: a bad name
   or quantity raises ``kfcompile.SpecError`` listing every problem);
2. ``kfcompile.render``: the objects to apply for the cluster's Training Operator / Trainer
   release (``kfcompile.UnsupportedFeature`` names what that release cannot express);
3. ``kfcompile.import_manifest``: the rendered job read back, which must give the spec again,
   so nothing was lost on the way;
4. with ``--submit``, ``run_on_cluster``: the lifecycle (``kfcompile.lifecycle``: submit,
   wait, logs) through a ``kfcompile.lifecycle.ports.Cluster``, here the Kubernetes one from
   ``kfcompile_kube``; a launcher may pass any implementation of the Protocol instead.

Prints the objects to apply as one JSON ``List`` on stdout and a one-line summary on stderr;
exit status 1 with one line per problem when the spec is invalid or the target cannot hold it.
With ``--submit`` it runs the job instead and prints every rank's log when it ends; exit status
1 when the job failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import kfcompile
from kfcompile import lifecycle


def build_spec(args: argparse.Namespace) -> kfcompile.JobSpec:
    """The job, from the command line: torchrun on every node, one process per GPU."""
    return kfcompile.JobSpec(
        name=args.name,
        image=args.image,
        launcher=kfcompile.Launcher(
            kind="torchrun", entrypoint=args.entrypoint, args=tuple(args.program_args)
        ),
        num_nodes=args.nodes,
        gpus_per_node=args.gpus,
        shm_size="16Gi" if args.gpus else None,  # NCCL needs more than the default 64Mi
        queue=args.queue,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Render a torchrun training job for Kubeflow.")
    p.add_argument("--name", default="demo", help="job name")
    p.add_argument("--image", default="pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--gpus", type=int, default=0, help="GPUs per node")
    p.add_argument("--queue", help="Kueue LocalQueue")
    p.add_argument("--target", default=kfcompile.DEFAULT_TARGET, choices=list(kfcompile.TARGETS))
    p.add_argument("--submit", action="store_true", help="run it on the cluster and wait")
    p.add_argument("--kubeconfig", help="for --submit (default: as kubectl finds it)")
    p.add_argument("entrypoint", help="Python file in the image")
    p.add_argument("program_args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def run_on_cluster(spec: kfcompile.JobSpec, target: str, kubeconfig: str | None) -> int:
    """Submit, report each change of state, and print every rank's log at the end."""
    import kfcompile_kube

    session, connection = kfcompile_kube.session(kubeconfig)
    submitted = lifecycle.submit(
        session, spec, target, namespace=connection.namespace, environ=os.environ
    )

    def progress(obs: lifecycle.Observation, elapsed: float) -> None:
        print(
            f"launcher: {elapsed:5.1f}s {obs.state.state.value} {obs.state.reason}", file=sys.stderr
        )

    final = lifecycle.wait(session, submitted.ref, "done", on_change=progress)
    for line in lifecycle.logs(session, submitted.ref):
        print(f"[rank {line.rank}] {line.text}")
    return 0 if final.state.state is kfcompile.State.SUCCEEDED else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        spec = build_spec(args)
        objects = kfcompile.render(spec, args.target)
    except kfcompile.KfcompileError as exc:  # SpecError or UnsupportedFeature
        for problem in exc.problems:
            print(f"launcher: {problem}", file=sys.stderr)
        return 1
    *companions, job = objects
    back = kfcompile.import_manifest(job, companions)
    if back != spec:
        print("launcher: the rendered job does not read back as the spec", file=sys.stderr)
        return 1
    print(
        f"launcher: {job['kind']} {job['metadata']['name']} for {args.target}: "
        f"{len(objects)} object(s), read back unchanged",
        file=sys.stderr,
    )
    if args.submit:
        try:
            return run_on_cluster(spec, args.target, args.kubeconfig)
        except (lifecycle.ClusterError, kfcompile.KfcompileError) as exc:
            print(f"launcher: {exc}", file=sys.stderr)
            return 1
    json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
