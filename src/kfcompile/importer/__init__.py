"""Existing manifests back to a ``JobSpec``: the targets' placement tables, read backwards.

``import_manifest(obj)`` reads a PyTorchJob (``kubeflow.org/v1``) or a TrainJob
(``trainer.kubeflow.org/v1alpha1``, written for any Trainer release v2.0-v2.3) and returns the
``JobSpec`` that renders it. ``import_manifest_lossy`` returns the same spec with what it
detected and every *loss*: a field of the input that no spec field holds, one ``Problem`` per
field path of the input manifest, saying what happens to it. ``convert_manifest`` imports and
renders for another target, adding what that target cannot hold.

How it reads (``read.run``). The kind's shape is read as the one shape the targets' tables
describe (``shapes``: PyTorchJob replicas, TrainJob overrides and patches). Every slot the field
table fills (``targets/fields.py``: ``container.env``, ``pod.tolerations``...) is looked up in the
targets' tables (for a TrainJob, in the tables of every Trainer release, so any of the three
pod-customisation shapes reads) and *taken out* of a working copy of the manifest
(``document``); the field table, walked backward, turns the slot values into spec fields
(``fields``; the special cases by their own ``read``, run in ``special``). What is left at the
end is exactly what the spec could not hold: each left-over field is a loss, so nothing is
dropped silently. Left-over pod and container fields that a target's table passes through become
``pod_spec_overrides`` / ``container_overrides``.

Detection, from the manifest alone: apiVersion and kind; for a TrainJob the Trainer release from
the fields only some releases have, each release's ``marks`` (``kfcompile.targets.RELEASES``;
today ``podSpecOverrides``: v2.0; ``podTemplateOverrides``: v2.1;
``runtimePatches``, ``activeDeadlineSeconds``: v2.2+; ``terminationGracePeriodSeconds`` in a
patch: v2.3; ``spec.labels``/``spec.annotations`` or a string ``numProcPerNode``: v2.0-v2.1).
When several releases fit, ``Imported.detected`` says so ("v2.2 or v2.3").

Dropped without a loss line, because the API server or a controller sets them and a new object
must not carry them: ``status``; ``metadata`` ``managedFields``, ``resourceVersion``, ``uid``,
``creationTimestamp``, ``generation``, ``selfLink``, ``ownerReferences``, ``deletionTimestamp``,
``deletionGracePeriodSeconds``; the ``kubectl.kubernetes.io/last-applied-configuration``
annotation; ``creationTimestamp`` in pod template metadata; Kueue's own runtime patch (manager
``kueue.x-k8s.io/manager``) and every patch's ``time``; ``managedBy`` equal to the kind's default
controller (the TrainJob CRD's default; what the Training Operator takes an absent one for).

A PyTorchJob's own torchrun line (``torchrun ...``, ``python -m torch.distributed.run ...`` or
``bash -c "torchrun ..."``, with ``$(RANK)``, ``$(MASTER_ADDR)``, ``$(MASTER_PORT)`` as
``kubectl get -o yaml`` gives most v1 jobs) becomes the torchrun ``launcher``: the rendezvous
flags the target supplies are dropped, the nodes and processes it asks for checked against the
job (``importer.launcher``). A line that cannot be carried stays as written; ``convert`` then
refuses to write it as a TrainJob if it names what only the Training Operator sets.

kfcompile's own artefacts are recognised, so that importing a rendered job gives its spec back:
the memory-backed ``/dev/shm`` volume (``shm_size``; any ``emptyDir: {medium: Memory,
sizeLimit}`` mounted at ``/dev/shm``), the inline script (its ConfigMap, passed as a companion,
with the ``kfcompile-script`` volume and mount), the ``torchrun``/``python`` commands of
``launcher``, the PyTorchJob master port, the ``secret_env`` entries, and PyTorchJob replicas
whose pods are the same.

Normalisation: for a spec ``s`` that renders on target ``t``, ``import(render(s, t))`` equals
``s`` after these rewrites (``tests/test_import.py::normalise`` implements them):

1. ``nprocs_per_node`` is omitted when it equals its default (``gpus_per_node`` or 1), but
   for a PyTorchJob's ``python`` launcher with more than one GPU, which must say it.
2. GPUs of a resource that is not a known accelerator (see ``GPU_RESOURCES``) become extra
   resource requests and limits (``nprocs_per_node`` then keeps their count); ``gpu_resource``
   is dropped when there are no GPUs.
3. The environment is split again as the importer splits the container's list: the leading plain
   ``{name, value}`` entries are ``env``, the trailing ``<job>-env`` Secret references (key = name)
   are ``secret_env``, everything between is ``env_list``.
4. ``labels`` holding the Kueue queue or priority label (non-empty) become ``queue`` /
   ``priority_class``; an empty ``queue`` / ``priority_class`` is dropped (it renders nothing).
5. ``runtime_ref`` equal to the default runtime is omitted.
6. ``managed_by`` equal to the target kind's default controller is omitted.
7. A ``command`` (without ``args``) shaped like a launcher's becomes that launcher (``python
   -m module ...`` and torchrun's ``-m module`` the ``module`` form); with a ``script``, the
   default entrypoint ``train.py`` is written out. On a PyTorchJob a torchrun line (its
   ``args`` too) is read as below.
8. ``work_dir`` becomes its volume (``workdir``) and mount: its local directory is not in any
   manifest.
"""

from __future__ import annotations

from kfcompile.importer.convert import Converted, convert_manifest
from kfcompile.importer.fields import SLOTS
from kfcompile.importer.identify import Job, jobs_in
from kfcompile.importer.read import import_manifest, import_manifest_lossy
from kfcompile.importer.state import Imported, LossyImport, NotImportable
from kfcompile.spec.additions import GPU_RESOURCES

__all__ = [
    "GPU_RESOURCES",
    "SLOTS",
    "Converted",
    "Imported",
    "Job",
    "LossyImport",
    "NotImportable",
    "convert_manifest",
    "import_manifest",
    "import_manifest_lossy",
    "jobs_in",
]
