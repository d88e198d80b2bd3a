"""How far a matrix has come, read without its outcomes: which declared cells and deployment baselines have
finished, from the presence of their records alone, and how long its finished stages ran (their timings).

A pre-registered matrix is not read before it is complete (docs/preregistration.md, "Pilot and stopping rule");
:func:`matrix_progress` is what a page or a command may look at before then, and :meth:`MatrixProgress.require_complete`
is the gate a pre-registered analysis passes first. No record is opened here, so nothing about a result leaks
through it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from intraskill.jsonl import iter_jsonl
from intraskill.layout import CellDir, MatrixDir, seed_id
from intraskill.params import METHOD_ARM, REFERENCE_ARM

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class MatrixProgress:
    """The declared cells (``arms`` × seed indices ``0 … seeds − 1``) and which of them, and of the seeds'
    deployment baselines, have finished."""

    out_dir: Path
    arms: tuple[str, ...]
    seeds: int
    finished: frozenset[tuple[str, int]]
    baselines: frozenset[int]

    @property
    def needs_baselines(self) -> bool:
        """The matrix writes deployment baselines (it has both ``coevolve`` and ``grpo``)."""
        return {METHOD_ARM, REFERENCE_ARM} <= set(self.arms)

    @property
    def missing(self) -> list[str]:
        """The declared parts not finished: ``<arm>/seed-<k>`` cells, then ``baselines/seed-<k>``."""
        cells = [f"{arm}/{seed_id(k)}" for arm in self.arms for k in range(self.seeds)
                 if (arm, k) not in self.finished]
        baselines = [f"baselines/{seed_id(k)}" for k in range(self.seeds)
                     if self.needs_baselines and k not in self.baselines]
        return cells + baselines

    @property
    def complete(self) -> bool:
        return not self.missing

    def seconds_left(self, timeline: MatrixTimeline) -> float | None:
        """The wall time the unfinished cells need at the pace so far (busy wall seconds per finished cell, the
        same parallelism assumed); ``None`` before a cell has finished or a stage been timed."""
        left = len(self.arms) * self.seeds - len(self.finished)
        return timeline.busy_seconds / len(self.finished) * left if self.finished and timeline.busy_seconds else None

    def require_complete(self) -> None:
        """Raise :class:`MatrixIncomplete` naming what is missing, unless every declared part has finished."""
        if not self.complete:
            raise MatrixIncomplete(self)

    def table(self) -> pd.DataFrame:
        """One row per arm: the seeds finished of those declared and which (no outcome)."""
        # deferred: pandas is heavy to import and only the frame needs it
        import pandas as pd

        rows = [{"training_arm": arm, "finished": sum((arm, k) in self.finished for k in range(self.seeds)),
                 "declared": self.seeds,
                 "finished_seeds": ", ".join(str(k) for k in range(self.seeds) if (arm, k) in self.finished)}
                for arm in self.arms]
        if self.needs_baselines:
            rows.append({"training_arm": "baselines", "finished": len(self.baselines & set(range(self.seeds))),
                         "declared": self.seeds,
                         "finished_seeds": ", ".join(str(k) for k in sorted(self.baselines) if k < self.seeds)})
        return pd.DataFrame(rows, columns=["training_arm", "finished", "declared", "finished_seeds"])


class MatrixIncomplete(RuntimeError):
    """A pre-registered matrix asked for before every declared cell has finished."""

    def __init__(self, progress: MatrixProgress) -> None:
        missing = progress.missing
        super().__init__(f"{progress.out_dir}: {len(missing)} declared part(s) not finished ({', '.join(missing[:6])}"
                         f"{', …' if len(missing) > 6 else ''}); the stopping rule reads the matrix only once it is "
                         "complete")
        self.progress = progress


def matrix_progress(out_dir: str | Path, arms: tuple[str, ...] | list[str], seeds: int) -> MatrixProgress:
    """The progress of the matrix in ``out_dir`` against its declared ``arms`` × ``seeds``, from which cell and
    baseline records exist (a missing directory: nothing finished)."""
    matrix = MatrixDir(out_dir)
    finished = frozenset((arm, k) for arm in arms for k in range(seeds)
                         if matrix.cell(f"{arm}/{seed_id(k)}").result.is_file())
    baselines = frozenset(k for k in range(seeds) if matrix.baseline(k).record.is_file())
    return MatrixProgress(Path(out_dir), tuple(arms), seeds, finished, baselines)


@dataclass(frozen=True)
class MatrixTimeline:
    """When a matrix's finished stages ran (each cell's, baseline's and the shared start's ``timings.jsonl``):
    ``stage_seconds`` summed over stages (the work, as if one after another), ``busy_seconds`` the wall time during
    which at least one stage ran (the union of their intervals: session gaps and idle time excluded), ``span_seconds``
    from the first stage's start to the last one's finish. A stage killed midway is in none of them."""

    stages: int
    stage_seconds: float
    busy_seconds: float
    span_seconds: float
    first_start: datetime | None
    last_finish: datetime | None

    def to_dict(self) -> dict[str, object]:
        return {"stages": self.stages, "stage_seconds": self.stage_seconds, "busy_seconds": self.busy_seconds,
                "span_seconds": self.span_seconds,
                "first_start": self.first_start.isoformat() if self.first_start else None,
                "last_finish": self.last_finish.isoformat() if self.last_finish else None}


def matrix_timeline(out_dir: str | Path) -> MatrixTimeline:
    """The timeline of every finished stage recorded under ``out_dir``."""
    matrix = MatrixDir(out_dir)
    folders = [*sorted(matrix.cells.glob(f"*/{seed_id('*')}")), *sorted(matrix.baselines.glob(seed_id("*"))),
               matrix.shared.root]
    intervals = sorted((finish - timedelta(seconds=record["seconds"]), finish)
                       for folder in folders if CellDir(folder).timings.is_file()
                       for record in iter_jsonl(CellDir(folder).timings)
                       for finish in [datetime.fromisoformat(record["finished_at"])])
    busy, reach = 0.0, None
    for start, finish in intervals:
        if reach is None or start >= reach:
            busy += (finish - start).total_seconds()
            reach = finish
        elif finish > reach:
            busy += (finish - reach).total_seconds()
            reach = finish
    first = intervals[0][0] if intervals else None
    last = max((finish for _, finish in intervals), default=None)
    return MatrixTimeline(len(intervals), math.fsum((f - s).total_seconds() for s, f in intervals), busy,
                          (last - first).total_seconds() if first and last else 0.0, first, last)
