"""A training run's progress as its TrainJob reports it, and how a user is shown it.

Trainer v2.2+ writes ``status.trainerStatus`` (alpha, behind the controller's ``TrainJobStatus``
feature gate) from what the training process reports (the Kubeflow SDK's progress helper,
HuggingFace Transformers' callback): ``progressPercentage`` (0-100), ``estimatedRemainingSeconds``,
``metrics`` (``{name, value}`` strings) and ``lastUpdatedTime``. PyTorchJob has no such field.

The status comes from the cluster, so it is read as hostile input: each value within what the
CRD allows or absent, at most ``MAX_METRICS`` metrics, text cut to the CRD's length, and shown
escaped (``terminal.printable``: a metric name must not move a terminal's cursor nor reverse
what follows it). Pure: the caller passes "now" (the core reads no clock), for the age of a
report and whether it is stale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from attrs import frozen

from kfcompile.terminal import printable

# trainjobs-v2.2.1.yaml and v2.3.0, status.trainerStatus: progressPercentage int32 0..100,
# estimatedRemainingSeconds int32 >= 0, metrics maxItems 256, name/value maxLength 64.
MAX_PERCENT: Final = 100
MAX_SECONDS: Final = 2**31 - 1
MAX_METRICS: Final = 256
MAX_TEXT: Final = 64
# A running job's report older than this is said to be stale: the process stopped reporting
# (hung, or between phases that report nothing) or the controller stopped copying it.
STALE_AFTER: Final = 600.0
# Metrics a one-line display shows (the rest are in `status` and `-o json`).
SHOWN_METRICS: Final = 3

NONE_REPORTED: Final = (
    "none reported (TrainJob on Trainer v2.2+ with the TrainJobStatus feature gate on, and a "
    "training process that reports it)"
)
NOT_REPORTED_BY: Final = "PyTorchJob reports no progress"


@frozen(repr=False)
class Progress:
    """What the training process last reported; a field it did not report is ``None``."""

    percent: int | None
    remaining_seconds: int | None
    metrics: tuple[tuple[str, str], ...]
    updated: datetime | None

    def age(self, now: datetime) -> float | None:
        """Seconds since the report (never negative: clocks differ)."""
        return None if self.updated is None else max((now - self.updated).total_seconds(), 0.0)

    def stale(self, now: datetime) -> bool:
        age = self.age(now)
        return age is not None and age > STALE_AFTER

    @property
    def shown(self) -> tuple[object, ...]:
        """What a display shows: a change in it is worth a new line."""
        return self.percent, self.remaining_seconds, self.metrics

    def cell(self) -> str:
        """For a table column: ``42% ETA 1h02m``."""
        parts = [] if self.percent is None else [f"{self.percent}%"]
        if self.remaining_seconds is not None:
            parts.append(f"ETA {duration(self.remaining_seconds)}")
        return " ".join(parts) or "reported"

    def line(self, now: datetime, metrics: int = SHOWN_METRICS) -> str:
        """``42% · ETA 1h02m · loss 0.31, lr 1e-4 · 12s ago``, stale ones said so; the metrics
        escaped."""
        parts = [self.cell()]
        if self.metrics:
            shown = printable(", ".join(f"{k} {v}" for k, v in self.metrics[:metrics]))
            more = len(self.metrics) - metrics
            parts.append(shown + (f" (+{more} more)" if more > 0 else ""))
        age = self.age(now)
        if age is not None:
            ago = f"{duration(math.floor(age))} ago"
            parts.append(f"stale: last update {ago}" if self.stale(now) else ago)
        return " · ".join(parts)

    def as_json(self, now: datetime) -> dict[str, Any]:
        age = self.age(now)
        return {
            "percent": self.percent,
            "remainingSeconds": self.remaining_seconds,
            "metrics": dict(self.metrics),
            "lastUpdatedTime": None if self.updated is None else timestamp(self.updated),
            "ageSeconds": None if age is None else round(age, 1),
            "stale": self.stale(now),
        }


def read_progress(cr: Mapping[str, Any]) -> Progress | None:
    """The job's ``status.trainerStatus``, or ``None`` when it has none (or none readable)."""
    status = cr.get("status")
    found = status.get("trainerStatus") if isinstance(status, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    metrics = found.get("metrics")
    pairs = []
    for item in metrics[:MAX_METRICS] if isinstance(metrics, list) else ():
        if isinstance(item, Mapping):
            name, value = _text(item.get("name")), _text(item.get("value"))
            if name and value:
                pairs.append((name, value))
    return Progress(
        percent=_bounded(found.get("progressPercentage"), MAX_PERCENT),
        remaining_seconds=_bounded(found.get("estimatedRemainingSeconds"), MAX_SECONDS),
        metrics=tuple(pairs),
        updated=parse_time(found.get("lastUpdatedTime")),
    )


def note(progress: Progress | None, now: datetime) -> str:
    """``; progress 42% ETA 1h02m · ...``, for the end of a job's state message ("" when the
    process reported nothing): how a launcher's status carries it."""
    return "" if progress is None else f"; progress {progress.line(now)}"


def absent_reason(kind: str) -> str:
    """Why a job shows no progress."""
    return NOT_REPORTED_BY if kind == "PyTorchJob" else NONE_REPORTED


def bar(percent: int | None, width: int = 20) -> str:
    """``[########------------]``; all blanks when the percentage is unknown."""
    if percent is None:
        return f"[{' ' * width}]"
    filled = round(width * percent / MAX_PERCENT)
    return f"[{'#' * filled}{'-' * (width - filled)}]"


def duration(seconds: int) -> str:
    """``45s``, ``12m05s``, ``1h02m``, ``3d04h``."""
    minutes, secs = divmod(max(seconds, 0), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time as Kubernetes writes them (``2026-12-01T10:00:00Z``), else ``None``."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def timestamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bounded(value: object, most: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        return None
    return value


def _text(value: object) -> str:
    return value[:MAX_TEXT] if isinstance(value, str) else ""
