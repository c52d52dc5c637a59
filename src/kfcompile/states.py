"""The normalized states a job is in, whatever its kind (``status.job_state`` decides which)."""

from __future__ import annotations

import enum
from typing import Final

import attrs


class State(enum.Enum):
    PENDING = "PENDING"
    SUSPENDED = "SUSPENDED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    DELETING = "DELETING"  # being deleted before it finished (a finished job keeps its state)


FINISHED_STATES: Final = frozenset({State.SUCCEEDED, State.FAILED})


@attrs.frozen
class JobState:
    state: State = attrs.field(validator=attrs.validators.instance_of(State))
    reason: str = attrs.field(validator=attrs.validators.instance_of(str))
    message: str = attrs.field(validator=attrs.validators.instance_of(str))

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES
