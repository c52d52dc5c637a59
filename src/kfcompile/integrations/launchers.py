"""What the TorchX and NeMo-Run glue share: whether a cluster is configured at all, and the
``kfcompile`` command line's flags said in each launcher's terms.

What the layers below tell the user to do names the CLI's flags (``pass --kubeconfig``, ``give
--target trainjob/v2.2``), which TorchX and NeMo-Run do not have: each launcher says the same
its own way, by its table of ``(pattern, replacement)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

Rewording = Sequence[tuple[re.Pattern[str], str]]

# A target named after --target (``give --target trainjob/v2.3 to send ...``).
TARGET_VALUE = r"(?P<value>(?:trainjob|pytorchjob)/v[\d.]+)"


def configured(kubeconfig: str | None, environ: Mapping[str, str]) -> bool:
    """Whether ``kfcompile_kube.connect`` has a cluster to try (a kubeconfig given, named by
    ``KUBECONFIG`` or at ``~/.kube/config``, or a pod's service account), asked without
    importing the Kubernetes client: a dry run with none never loads it."""
    home = environ.get("HOME")
    return bool(
        kubeconfig
        or environ.get("KUBECONFIG")
        or (home and Path(home, ".kube", "config").is_file())
        or environ.get("KUBERNETES_SERVICE_HOST")
    )


def reworded(message: str, table: Rewording) -> str:
    """``message`` with each flag of the CLI said as ``table`` says it."""
    for pattern, replacement in table:
        message = pattern.sub(replacement, message)
    return message


# TorchX: run options (``-cfg key=value``), also read from .torchxconfig's [kfcompile] section.
TORCHX: Rewording = (
    (
        re.compile(r"pass --kubeconfig"),
        "give -cfg kubeconfig=PATH or kubeconfig = PATH in .torchxconfig's [kfcompile] section",
    ),
    (re.compile(r"from --kubeconfig"), "from -cfg kubeconfig or .torchxconfig"),
    (re.compile(r"pass --context"), "give -cfg context=NAME"),
    (re.compile(rf"--target {TARGET_VALUE}"), r"-cfg target=\g<value>"),
    (re.compile(r"--target\b"), "-cfg target=TARGET"),
)

# NeMo-Run: the kubeconfig is the environment's (KUBECONFIG, its current context); the target
# is the executor's parameter.
NEMO_RUN: Rewording = (
    (re.compile(r"set KUBECONFIG or pass --kubeconfig"), "set KUBECONFIG"),
    (re.compile(r"from --kubeconfig"), "from KUBECONFIG"),
    (
        re.compile(r"pass --context"),
        "set the kubeconfig's current-context (kubectl config use-context NAME)",
    ),
    (re.compile(rf"--target {TARGET_VALUE}"), r"KfcompileExecutor(target='\g<value>')"),
    (re.compile(r"--target\b"), "KfcompileExecutor(target=...)"),
)
