"""A small launcher built only on kfcompile's public API: ``import kfcompile`` (the names in
``kfcompile.__all__``) and the port Protocols in ``kfcompile.ports``. It is what another tool
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
4. the lifecycle (submit, watch, logs) goes through a ``kfcompile.ports.Cluster``: see
   ``kfcompile.ports`` for the Protocol a launcher implements or takes from
   ``kfcompile_kube``.

Prints the objects to apply as one JSON ``List`` on stdout and a one-line summary on stderr;
exit status 1 with one line per problem when the spec is invalid or the target cannot hold it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import kfcompile


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
    p.add_argument("entrypoint", help="Python file in the image")
    p.add_argument("program_args", nargs=argparse.REMAINDER, help="its arguments")
    return p


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
    json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
