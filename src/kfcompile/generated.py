"""What kfcompile adds to a job itself, by name: the volumes and mount paths of ``shm_size`` (a
memory-backed ``/dev/shm``), the inline ``script`` (its ConfigMap) and ``work_dir`` (its
claim), and the Kueue labels that ``queue`` and ``priority_class`` become. A spec may not use
these names for anything else (``between``)."""

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SHM_VOLUME, SHM_DIR = "dshm", "/dev/shm"
SCRIPT_VOLUME, SCRIPT_DIR = "kfcompile-script", "/opt/kfcompile/scripts"
WORKDIR_VOLUME = "workdir"
