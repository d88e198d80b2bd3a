"""Per-step round metrics to the experiment trackers researchers already run (``round.report_to``).

Each tracker is an optional extra and is imported only when chosen; :func:`require_trackers` checks them before
a round starts, so a missing package is one clear error instead of a failure after the first rollout step. What a
tracker receives is exactly the record appended to the round's ``metrics.jsonl`` (numbers only; ``None`` and
text fields are left out), logged at the record's global ``step``:

* ``wandb`` — W&B in offline mode, under ``<round>/wandb`` (``wandb sync`` uploads it later);
* ``tensorboard`` — ``torch.utils.tensorboard`` event files under ``<round>/tensorboard``
  (``tensorboard --logdir runs``);
* ``trackio`` — Hugging Face trackio's local store (``TRACKIO_DIR``, default ``$HF_HOME/trackio``;
  ``trackio show`` opens its dashboard), project ``intraskill``, one run per round.

Trackers only observe: they are not part of a round's plan, and a resumed round logs its remaining steps to the
same run (W&B and trackio resume it by the plan fingerprint; TensorBoard appends an event file).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any, Protocol

from intraskill.params import TrackerName
from intraskill.training.metrics import RoundStepMetrics

PACKAGES: dict[TrackerName, str] = {"wandb": "wandb", "tensorboard": "tensorboard", "trackio": "trackio"}
"""Tracker → the package it needs (each the optional extra of the same name: ``pip install 'intraskill[NAME]'``)."""

PROJECT = "intraskill"


class MetricsTracker(Protocol):
    """What a round logs to."""

    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TrackedRun:
    """Who is logging: the round directory, the run's display name, the plan fingerprint and the parameters."""

    root: Path
    name: str
    fingerprint: str
    config: Mapping[str, Any]


def require_trackers(names: Sequence[TrackerName]) -> None:
    """Raise a :class:`RuntimeError` naming ``round.report_to`` and the install command for every chosen tracker
    whose package is missing."""
    missing = [name for name in names if importlib.util.find_spec(PACKAGES[name]) is None]
    if missing:
        extras = ",".join(missing)
        raise RuntimeError(f"round.report_to: {', '.join(missing)} chosen but not installed "
                           f"(pip install 'intraskill[{extras}]', or remove it from round.report_to)")


def numeric_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The numeric fields of a metrics record (booleans and the ``step`` itself left out)."""
    return {key: float(value) for key, value in record.items()
            if isinstance(value, Real) and not isinstance(value, bool) and key != "step"}


class WandbTracker:
    """W&B, offline, resumed by the plan fingerprint."""

    def __init__(self, run: TrackedRun) -> None:
        # deferred: wandb is an optional extra
        import wandb

        self.run = wandb.init(project=PROJECT, name=run.name, mode="offline", dir=str(run.root),
                              id=run.fingerprint[:16], resume="allow",
                              config={"params": dict(run.config), "plan_fingerprint": run.fingerprint})

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class TensorBoardTracker:
    """TensorBoard event files under ``<round>/tensorboard``, one scalar series per metric."""

    def __init__(self, run: TrackedRun) -> None:
        # deferred: tensorboard is an optional extra (torch's writer imports it)
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run.root / "tensorboard"))
        self.writer.add_text("plan_fingerprint", run.fingerprint)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class TrackioTracker:
    """A trackio run in its local store, resumed by name."""

    def __init__(self, run: TrackedRun) -> None:
        # deferred: trackio is an optional extra
        import trackio

        self.run = trackio.init(project=PROJECT, name=f"{run.name}-{run.fingerprint[:8]}", resume="allow",
                                config={"params": dict(run.config), "plan_fingerprint": run.fingerprint},
                                embed=False, auto_log_cpu=False, auto_log_gpu=False)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


TRACKERS: dict[TrackerName, type[WandbTracker] | type[TensorBoardTracker] | type[TrackioTracker]] = {
    "wandb": WandbTracker, "tensorboard": TensorBoardTracker, "trackio": TrackioTracker}


class Trackers:
    """The chosen trackers as one: each metrics record goes to all of them."""

    def __init__(self, names: Sequence[TrackerName], run: TrackedRun) -> None:
        require_trackers(names)
        self.trackers: list[MetricsTracker] = [TRACKERS[name](run) for name in names]

    def log(self, record: RoundStepMetrics) -> None:
        """Log one ``metrics.jsonl`` record at its ``step``."""
        metrics = numeric_metrics(record.to_dict())
        for tracker in self.trackers:
            tracker.log(metrics, record.step)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()
