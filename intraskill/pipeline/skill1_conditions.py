"""A Skill1 round's four deployed conditions: its start and trained checkpoints, each bare and deployed with the
round's final library (query → retrieval → rank → act, the library frozen; :mod:`intraskill.evaluate.skill1_deploy`).

The four runs share one plan's jobs and episode seed, so they pair by task and episode; they live under the
round directory's ``deployed/<condition>/`` and resume like every evaluation run. :meth:`Skill1Conditions.paired`
gives the paired effects of training (bare and with the library) and of the library (on each checkpoint), as the
release's four-condition table does for a skill bank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from intraskill.evaluate.compare import compare_runs, comparison_record, write_comparison
from intraskill.evaluate.runner import EvalRun, run_eval
from intraskill.evaluate.skill1_deploy import LibraryDeployment
from intraskill.evaluate.summary import condition_record
from intraskill.layout import RoundDir
from intraskill.params import Params

DEPLOYED_DIR = "deployed"
CONDITIONS: tuple[str, ...] = ("start-bare", "start-library", "trained-bare", "trained-library")
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("start-bare", "trained-bare", "cross-checkpoint"),
    ("start-library", "trained-library", "cross-checkpoint"),
    ("start-bare", "start-library", "same-checkpoint"),
    ("trained-bare", "trained-library", "same-checkpoint"),
)
"""The paired comparisons ``(a, b, kind)``: training's effect bare and deployed, the library's on each checkpoint."""


@dataclass(frozen=True)
class Skill1Conditions:
    """The four evaluation runs of one Skill1 round, by condition."""

    runs: Mapping[str, EvalRun]

    def table(self) -> pd.DataFrame:
        """One row per condition (:func:`~intraskill.evaluate.summary.condition_record`; ``arm`` = the condition)."""
        return pd.DataFrame([condition_record(name, run.summary) for name, run in self.runs.items()])

    def paired(self, samples: int, seed: int) -> pd.DataFrame:
        """The :data:`PAIRS` compared task by task (``b − a``, paired bootstrap), one
        :func:`~intraskill.evaluate.compare.comparison_record` each; every comparison is also written into its
        ``b`` run's directory."""
        records = []
        for a, b, kind in PAIRS:
            comparison = compare_runs(self.runs[a].run_dir, self.runs[b].run_dir, kind=kind, samples=samples,
                                      seed=seed)
            write_comparison(comparison, self.runs[b].run_dir / f"vs-{a}")
            records.append(comparison_record(comparison, a, b))
        return pd.DataFrame(records)


def run_skill1_conditions(params: Params, round_dir: str | Path, start_checkpoint: str | None, *, split: str = "val",
                          limit: int | None = None, progress: bool = True,
                          store_root: str | Path | None = None) -> Skill1Conditions:
    """Run (or resume) the four conditions of the Skill1 round in ``round_dir`` on ``split``'s first ``limit``
    tasks: ``start_checkpoint`` (the round's start) and the round's trained checkpoint, each bare and with the
    round's committed library (``library/snapshot.json``) under ``params.skill1``'s retrieval and reply budgets."""
    root = Path(round_dir)
    snapshot = RoundDir(root).library.snapshot
    trained = RoundDir(root).checkpoint.model
    for path, what in ((snapshot, "the round's committed library"), (trained.config, "its trained model")):
        if not path.is_file():
            raise FileNotFoundError(f"{root}: {what} is missing ({path}); finish the round first")
    deployment = LibraryDeployment.from_snapshot(snapshot, params.skill1)
    checkpoints = {"start": start_checkpoint, "trained": str(trained.root)}
    runs = {}
    for condition in CONDITIONS:
        model, context = condition.split("-")
        runs[condition] = run_eval(params, split, checkpoints[model], None, root / DEPLOYED_DIR / condition,
                                   progress=progress, limit=limit, store_root=store_root,
                                   library=deployment if context == "library" else None)
    return Skill1Conditions(runs)
