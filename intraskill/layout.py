"""Where a run's files live: every file name of every run directory, written once.

Each directory a stage writes is a small frozen path object (:class:`EvalDir`, :class:`RoundDir`,
:class:`GateDir`, :class:`RunDir`, :class:`MatrixDir`, …) whose properties name its files and sub-directories.
The names are those of the shipped records (``data/results/``, the public release excerpt), so old run
directories keep loading. A leaf: it imports nothing of the package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PLAN, TRACES, METRICS = "plan.json", "traces.jsonl", "metrics.jsonl"
"""A stage's fingerprinted plan, an append-only episode log, a round's per-step metrics."""
RETRIES, TRIAGE, QUEUE = "retries.jsonl", "triage.jsonl", "analysis_queue.jsonl"
"""A round's full-skill retries, their triage and the analyst's queue."""
SKILL1_EPISODES = "skill1_episodes.jsonl"
"""A Skill1 step's rollout records (in place of ``traces.jsonl``)."""
STEPS = "steps"
"""A round's folder of rollout steps."""
COEVOLVE_SUMMARY = "co_evolve_summary.json"
"""A co-evolution run's summary: one record per finished round."""
LEDGER, CURRICULUM, SELECTED_BANK = "proposal_ledger.jsonl", "curriculum.json", "selected_skillbank.json"
EVIDENCE_CARDS, ANALYSIS_SUMMARY = "evidence_cards.jsonl", "analysis_summary.json"
ROUND_PREFIX = "round-"
STEP_PREFIX = "step-"
SEED_PREFIX = "seed-"
ONLINE, GATE_A = "online", "gate_a"
"""The gate designs (:mod:`intraskill.pipeline.gate_run`): a round's online gate, the cold start's gate A."""
MANIFEST_NAMES = {ONLINE: "online_gate_manifest.json", GATE_A: "gate_a_manifest.json"}
"""The gate manifest's file name per design."""


def round_id(index: int) -> str:
    """``round-NNN``: a round's directory name."""
    return f"{ROUND_PREFIX}{index:03d}"


def step_id(step: int) -> str:
    """``step-NNNN``: a rollout step's directory name."""
    return f"{STEP_PREFIX}{step:04d}"


def seed_id(seed: int | str) -> str:
    """``seed-<seed>``: the directory of one seed (a matrix cell's, a validation arm's)."""
    return f"{SEED_PREFIX}{seed}"


@dataclass(frozen=True)
class Folder:
    """A directory; ``root`` is coerced to a :class:`~pathlib.Path`."""

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    def relative(self, path: Path) -> str:
        """``path`` relative to this directory, in POSIX form (how manifests name their outputs)."""
        return path.relative_to(self.root).as_posix()


class ModelDir(Folder):
    """A saved model (``save_pretrained``): weights with ``config.json``, or a LoRA adapter."""

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def adapter_config(self) -> Path:
        return self.root / "adapter_config.json"

    @property
    def tokenizer(self) -> Path:
        return self.root / "tokenizer.json"

    def is_saved(self) -> bool:
        """A full model is saved here (its ``config.json`` exists)."""
        return self.config.is_file()


class CheckpointDir(Folder):
    """A training checkpoint: ``state.json`` last (its presence marks a complete one), the optimizer, the RNG
    states, the LoRA adapter and the full model under ``model/``."""

    STATE = "state.json"

    @property
    def state(self) -> Path:
        return self.root / self.STATE

    @property
    def adapter(self) -> Path:
        return self.root / "adapter.pt"

    @property
    def optimizer(self) -> Path:
        return self.root / "optimizer.pt"

    @property
    def rng(self) -> Path:
        return self.root / "rng.pt"

    @property
    def model(self) -> ModelDir:
        return ModelDir(self.root / "model")


class EvalDir(Folder):
    """An evaluation run: its plan, its append-only traces, the summary and the per-task records."""

    OUTPUTS = (TRACES, "summary.json")
    """What a run writes under its plan (a directory holding either without ``plan.json`` is refused)."""

    @property
    def plan(self) -> Path:
        return self.root / PLAN

    @property
    def traces(self) -> Path:
        return self.root / TRACES

    @property
    def summary(self) -> Path:
        return self.root / self.OUTPUTS[1]

    @property
    def tasks(self) -> Path:
        return self.root / "tasks.jsonl"


class CompareDir(Folder):
    """A paired comparison of two evaluation runs: the record, its Markdown table and, where the comparison
    ran them itself (Gate B), the runs."""

    def run(self, name: str) -> EvalDir:
        return EvalDir(self.root / name)

    @property
    def comparison(self) -> Path:
        return self.root / "comparison.json"

    @property
    def markdown(self) -> Path:
        return self.root / "comparison.md"


class GateDir(EvalDir):
    """A gate: the masked evaluation run (plan, traces, summary) plus the mask assignments, the contributions,
    the selected bank, the updated ledger, the next curriculum and the manifest of its design."""

    @property
    def mask_assignments(self) -> Path:
        return self.root / "mask_assignments.json"

    @property
    def contributions(self) -> Path:
        return self.root / "contributions.json"

    @property
    def contributions_csv(self) -> Path:
        return self.root / "contributions.csv"

    @property
    def selected_skillbank(self) -> Path:
        return self.root / SELECTED_BANK

    @property
    def selected_skill(self) -> Path:
        return self.root / "selected_skill.md"

    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

    @property
    def curriculum(self) -> Path:
        return self.root / CURRICULUM

    @property
    def ranking_check(self) -> Path:
        return self.root / "ranking_check.json"

    @property
    def bare_val(self) -> EvalDir:
        """The bare run the gate pairs with when it is given none."""
        return EvalDir(self.root / "bare-val")

    def ranking(self, arm: str) -> EvalDir:
        """The ranking check's run of one arm."""
        return EvalDir(self.root / "ranking" / arm)

    def manifest(self, design: str) -> Path:
        """The manifest of a gate ``design`` (``online`` or ``gate_a``)."""
        return self.root / MANIFEST_NAMES[design]

    def manifests(self) -> list[Path]:
        """The manifests present, in :data:`MANIFEST_NAMES` order."""
        return [path for path in map(self.manifest, MANIFEST_NAMES) if path.is_file()]


class AnalysisDir(Folder):
    """A round's analyst output: evidence cards, the candidate pool, the proposal ledger and the summary."""

    @property
    def cards(self) -> Path:
        return self.root / EVIDENCE_CARDS

    @property
    def pool(self) -> Path:
        return self.root / "candidate_pool.json"

    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

    @property
    def summary(self) -> Path:
        return self.root / ANALYSIS_SUMMARY


class StepDir(Folder):
    """One rollout step: its episode traces (a Skill1 round's episodes), their token records, the step's rollout
    record and the marker of a finished step."""

    DONE = "step-done"

    @property
    def index(self) -> int:
        """The step number its name carries."""
        return int(self.root.name.removeprefix(STEP_PREFIX))

    @property
    def done(self) -> Path:
        return self.root / self.DONE

    @property
    def traces(self) -> Path:
        return self.root / TRACES

    @property
    def tokens(self) -> Path:
        return self.root / "tokens.jsonl"

    @property
    def rollout(self) -> Path:
        return self.root / "rollout.json"

    @property
    def skill1_episodes(self) -> Path:
        return self.root / SKILL1_EPISODES


class LibraryDir(Folder):
    """A skill library: its append-only history and the committed snapshot."""

    @property
    def history(self) -> Path:
        return self.root / "history.jsonl"

    @property
    def snapshot(self) -> Path:
        return self.root / "snapshot.json"


class RoundDir(Folder):
    """One training round (``round-NNN``): inputs (``skillbank.json``, ``curriculum.json``, ``val-before``), the
    per-step directories, the round-level logs, the checkpoint, validation, analysis and gate."""

    OUTPUTS = (STEPS, "checkpoint", "checkpoint.*", METRICS, RETRIES, TRIAGE, QUEUE, "library", "val-after",
               "val-compare", "analysis", "gate")
    """What a round writes under its plan (its inputs ``skillbank.json``, ``curriculum.json`` and a carried
    ``val-before`` may precede it): a round directory holding any of these refuses to run without ``plan.json``."""

    @property
    def plan(self) -> Path:
        return self.root / PLAN

    @property
    def skillbank(self) -> Path:
        return self.root / "skillbank.json"

    @property
    def curriculum(self) -> Path:
        return self.root / CURRICULUM

    @property
    def next_curriculum(self) -> Path:
        """The next round's curriculum when the run does not evolve (the starting bank again)."""
        return self.root / "next_curriculum.json"

    @property
    def metrics(self) -> Path:
        return self.root / METRICS

    @property
    def retries(self) -> Path:
        return self.root / RETRIES

    @property
    def triage(self) -> Path:
        return self.root / TRIAGE

    @property
    def analysis_queue(self) -> Path:
        return self.root / QUEUE

    @property
    def steps(self) -> Path:
        return self.root / STEPS

    def step(self, step: int) -> StepDir:
        return StepDir(self.steps / step_id(step))

    def step_dirs(self) -> list[StepDir]:
        """The step directories present, in step order."""
        return [StepDir(path) for path in sorted(self.steps.glob(f"{STEP_PREFIX}*"))]

    def finished_steps(self) -> list[int]:
        """The steps whose ``step-done`` marker exists, in order."""
        return [step.index for step in self.step_dirs() if step.done.exists()]

    @property
    def checkpoint(self) -> CheckpointDir:
        return CheckpointDir(self.root / "checkpoint")

    @property
    def library(self) -> LibraryDir:
        return LibraryDir(self.root / "library")

    @property
    def val_before(self) -> EvalDir:
        return EvalDir(self.root / "val-before")

    @property
    def val_after(self) -> EvalDir:
        return EvalDir(self.root / "val-after")

    @property
    def val_compare(self) -> CompareDir:
        return CompareDir(self.root / "val-compare")

    @property
    def analysis(self) -> AnalysisDir:
        return AnalysisDir(self.root / "analysis")

    @property
    def gate(self) -> GateDir:
        return GateDir(self.root / "gate")


class RunDir(Folder):
    """A co-evolution run: its plan, its summary and one :class:`RoundDir` per round."""

    OUTPUTS = (COEVOLVE_SUMMARY, f"{ROUND_PREFIX}*/{PLAN}")
    """What a run writes under its plan (a directory holding either without ``plan.json`` is refused)."""

    @property
    def plan(self) -> Path:
        return self.root / PLAN

    @property
    def summary(self) -> Path:
        return self.root / COEVOLVE_SUMMARY

    def round(self, index: int) -> RoundDir:
        return RoundDir(self.root / round_id(index))

    def round_dirs(self) -> list[RoundDir]:
        """The round directories present, in round order."""
        return [RoundDir(path) for path in sorted(self.root.glob(f"{ROUND_PREFIX}*")) if path.is_dir()]


class ColdStartDir(Folder):
    """A cold start: rollouts, cards, the compiled draft, gate A, the selected S₀, gate B, the stage records."""

    @property
    def plan(self) -> Path:
        return self.root / PLAN

    @property
    def rollouts(self) -> EvalDir:
        return EvalDir(self.root / "rollouts")

    @property
    def success_cards(self) -> Path:
        return self.root / "success_cards.jsonl"

    @property
    def failure_cards(self) -> Path:
        return self.root / "failure_cards.jsonl"

    @property
    def evidence_cards(self) -> Path:
        return self.root / EVIDENCE_CARDS

    @property
    def cluster_batches(self) -> Path:
        return self.root / "cluster_batches.jsonl"

    @property
    def draft(self) -> Path:
        return self.root / "initial_skill_draft.json"

    @property
    def draft_bank(self) -> Path:
        return self.root / "initial_skillbank.json"

    @property
    def draft_markdown(self) -> Path:
        return self.root / "initial_skill_draft.md"

    @property
    def ledger(self) -> Path:
        return self.root / LEDGER

    @property
    def invalid_attempts(self) -> Path:
        return self.root / "compiler_invalid_attempts.jsonl"

    @property
    def gate(self) -> GateDir:
        return GateDir(self.root / "gate-a")

    @property
    def s0(self) -> Path:
        return self.root / SELECTED_BANK

    @property
    def gate_b(self) -> CompareDir:
        return CompareDir(self.root / "gate-b")

    @property
    def stages(self) -> Path:
        return self.root / "stages"

    @property
    def summary(self) -> Path:
        return self.root / ANALYSIS_SUMMARY

    @property
    def manifest(self) -> Path:
        return self.root / "cold_start_manifest.json"


class WarmstartDir(Folder):
    """A warm start (the organism's or Skill1's): demonstrations, the behaviour-cloning record and state, the
    cloned checkpoint, the ground truth and the manifest."""

    MANIFEST, GROUND_TRUTH = "manifest.json", "ground_truth.json"
    SHIPPED = (MANIFEST, GROUND_TRUTH)
    """The records shipped with a warm start's checkpoint (and copied beside a gate validation's records)."""

    @property
    def manifest(self) -> Path:
        return self.root / self.MANIFEST

    @property
    def ground_truth(self) -> Path:
        return self.root / self.GROUND_TRUTH

    @property
    def evaluation(self) -> Path:
        return self.root / "evaluation.jsonl"

    @property
    def demos(self) -> Path:
        return self.root / "demos.jsonl"

    @property
    def plan_demos(self) -> Path:
        return self.root / "plan_demos.jsonl"

    @property
    def skill1_demos(self) -> Path:
        return self.root / "skill1_demos.jsonl"

    @property
    def bc(self) -> Path:
        return self.root / "bc.json"

    @property
    def bc_state(self) -> Path:
        return self.root / "bc_state.pt"

    @property
    def checkpoint(self) -> ModelDir:
        return ModelDir(self.root / "checkpoint")


class ValidationDir(Folder):
    """A gate validation (a live run or its shipped records): per m the bare val run (``m<m>/bare-val``) and one
    gate A per mask seed (``m<m>/seed-<seed>``), and the warm start's records (``warmstart/``)."""

    def samples(self, samples_per_task: int) -> Path:
        return self.root / f"m{samples_per_task}"

    def bare_val(self, samples_per_task: int) -> EvalDir:
        return EvalDir(self.samples(samples_per_task) / "bare-val")

    def gate(self, samples_per_task: int, seed: int) -> GateDir:
        return GateDir(self.samples(samples_per_task) / seed_id(seed))

    @property
    def warmstart(self) -> WarmstartDir:
        return WarmstartDir(self.root / "warmstart")


class CellDir(Folder):
    """One control-matrix cell (``cells/<arm>/seed-<k>``), or the matrix's shared start (``shared/``): its test runs
    and stage timings, and for a cell its result, final bank and final library."""

    RESULT = "cell.json"

    def test(self, condition: str) -> EvalDir:
        """The test run of one deployment condition (``test-<condition>``)."""
        return EvalDir(self.root / f"test-{condition}")

    @property
    def result(self) -> Path:
        return self.root / self.RESULT

    @property
    def final_skillbank(self) -> Path:
        return self.root / "final_skillbank.json"

    @property
    def final_library(self) -> Path:
        return self.root / "final_library.json"

    @property
    def timings(self) -> Path:
        return self.root / "timings.jsonl"


class BaselineDir(Folder):
    """The deployment baselines of one seed index (``baselines/seed-<k>``) and their record."""

    RECORD = "baseline.json"

    @property
    def record(self) -> Path:
        return self.root / self.RECORD


class MatrixDir(Folder):
    """A control matrix: its plan and summary, the shared warm start's tests and bare val checks, one
    :class:`CellDir` per cell and one :class:`BaselineDir` per seed index."""

    RECORDS = ("matrix.json", "shared/warmstart.json", f"cells/*/{SEED_PREFIX}*/{CellDir.RESULT}",
               f"baselines/{SEED_PREFIX}*/{BaselineDir.RECORD}")
    """The headline records, as paths or globs relative to the matrix directory."""

    @property
    def plan(self) -> Path:
        return self.root / self.RECORDS[0]

    @property
    def summary(self) -> Path:
        return self.root / "matrix_summary.json"

    @property
    def shared(self) -> CellDir:
        return CellDir(self.root / "shared")

    @property
    def warmstart(self) -> Path:
        return self.root / self.RECORDS[1]

    @property
    def cells(self) -> Path:
        return self.root / "cells"

    @property
    def baselines(self) -> Path:
        return self.root / "baselines"

    def cell(self, name: str) -> CellDir:
        """The cell named ``<arm>/seed-<k>``."""
        return CellDir(self.cells / name)

    def val_before(self, seed_index: int) -> EvalDir:
        return EvalDir(self.shared / f"val-before-{seed_id(seed_index)}")

    def baseline(self, seed_index: int) -> BaselineDir:
        return BaselineDir(self.baselines / seed_id(seed_index))

    def cell_results(self) -> list[Path]:
        return sorted(self.root.glob(self.RECORDS[2]))

    def baseline_records(self) -> list[Path]:
        return sorted(self.root.glob(self.RECORDS[3]))
