"""Skill–model co-evolution: train round → Trace2Skill analysis → online gate → next curriculum.

Reference: docs/method.md §0 (the loop) and §6.4 (chaining rounds: each round starts from the
previous round's checkpoint; after training, the analysis compiles candidates — falling back to a
pool of the current skills only — and the gate runs on the frozen checkpoint; the gate's selected
bank defines the next curriculum with q 0.20, ρ 0.20–0.90).

A co-evolution run directory (``<run_root>/<experiment>/co-evolve`` by default) holds ``plan.json``
(parameters, co-evolution settings and the starting point, fingerprinted; a directory refuses a
different plan; the run's :mod:`~intraskill.provenance` beside the fingerprint), one ``round-<NNN>/`` per round (the round directory of
:func:`~intraskill.pipeline.round.run_round`, with ``analysis/`` and ``gate/`` inside) and
``co_evolve_summary.json`` (one record per finished round). Every stage is resumable and skipped
when its outputs are complete, so re-running with more rounds extends the run. Without evolution the same
loop chains the rounds of a method with its own library (``round.method: skill1``): round r's library starts from
round r − 1's committed snapshot (:meth:`~intraskill.pipeline.methods.TrainingMethod.library`; the control
experiment's ``skill1`` arm).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from intraskill.evaluate.records import PairedComparison
from intraskill.gate.design import DEFAULT_MASK_SEED
from intraskill.gate.manifest import GateManifest, GateOutcomes
from intraskill.layout import ONLINE, EvalDir, GateDir, RoundDir, RunDir, round_id
from intraskill.params import MAX_CANDIDATES, SAMPLES_PER_TASK, ExperimentParams, Params, plan_dump
from intraskill.paths import runs_root
from intraskill.phases import phase
from intraskill.pipeline.gate_run import GateConfig, run_online_gate
from intraskill.pipeline.methods import training_method
from intraskill.pipeline.prepare import RoundInputs, prepare_round
from intraskill.pipeline.round import open_train_store, round_curriculum, run_round
from intraskill.provenance import write_plan
from intraskill.record import Record
from intraskill.shop.house_codes import HouseCodes
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.curriculum import CurriculumState, load_curriculum, save_curriculum
from intraskill.skills.pool import load_pool
from intraskill.trace2skill.analysis import AnalysisConfig, AnalysisSummary, run_analysis
from intraskill.trace2skill.analysts import AnalystSettings, open_analyst
from intraskill.trace2skill.ledger import read_ledger
from intraskill.trace2skill.submission import check_max_candidates

LOGGER = logging.getLogger(__name__)

PLAN_SCHEMA_VERSION = "intraskill-co-evolve-plan-v1"
PIPELINE_VERSION = "intraskill-co-evolve-v1"
GATE_SKIPPED = "skipped_empty_pool"
NOT_EVOLVING = "not_evolving"


class CoEvolvePlanMismatchError(RuntimeError):
    """The co-evolution directory already holds a different plan."""


@dataclass(frozen=True)
class CoEvolveConfig:
    """Settings of the analysis and gate stages (the training stage reads ``params``).

    What it adds to the ``gate`` and ``coevolve`` sections (:meth:`from_params` reads m, the mask seed and the
    candidate cap from them): the settings a run chooses outside the parameter file (``evolve`` for the control
    arms, the analyst and its server, the gate's task limit), recorded in the run's fingerprinted plan.

    Parameters
    ----------
    samples_per_task : m masked gate rollouts per val task (1 in the release).
    mask_seed : seed of the gate's mask draws (``RELEASE_SEED``).
    gate_task_limit : val tasks of the gate; ``None`` = ``round.val_tasks`` (the round's bare
        ``val-after`` run is then reused as the gate's bare run), or ``evaluation.task_limit`` when
        ``round.val_tasks`` is 0.
    max_candidates : ADD/REWRITE candidates per round (6).
    evolve : run the analysis and the gate after each round (the method). ``False`` chains plain rounds:
        every round trains with the starting bank's curriculum, redrawn per round (the control arms), or
        with ``round.method: skill1`` Skill1 rounds, each starting from the previous round's committed
        library (U, n and provenance kept).
    analyst : the failure analyst (:class:`~intraskill.trace2skill.analysts.AnalystSettings`; the rule
        analyst by default, left out of the plan then, so plans written before the choice existed keep
        their fingerprint).
    """

    samples_per_task: int = SAMPLES_PER_TASK
    mask_seed: int = DEFAULT_MASK_SEED
    gate_task_limit: int | None = None
    max_candidates: int = MAX_CANDIDATES
    evolve: bool = True
    analyst: AnalystSettings = AnalystSettings()

    def __post_init__(self) -> None:
        if self.samples_per_task < 1:
            raise ValueError(f"samples_per_task: must be >= 1, got {self.samples_per_task}")
        if self.gate_task_limit is not None and self.gate_task_limit < 1:
            raise ValueError(f"gate_task_limit: must be >= 1 or None, got {self.gate_task_limit}")
        check_max_candidates(self.max_candidates)

    @classmethod
    def from_params(cls, params: Params, **settings: Any) -> CoEvolveConfig:
        """m and the mask seed from ``params.gate``, the candidate cap from ``params.coevolve``; ``settings``
        override or add the rest."""
        fields = {"samples_per_task": params.gate.samples_per_task, "mask_seed": params.gate.mask_seed,
                  "max_candidates": params.coevolve.max_candidates, **settings}
        return cls(**fields)


@dataclass(frozen=True)
class CoEvolveRound:
    """One finished round: its directory, trained checkpoint, pool, gate outcome and next curriculum."""

    round_index: int
    root: Path
    checkpoint: Path
    pool_path: Path
    gate_status: str
    curriculum_path: Path | None

    @property
    def gate_dir(self) -> Path:
        return RoundDir(self.root).gate.root

    def curriculum(self) -> CurriculumState | None:
        """The next round's curriculum (``None``: the gate selected nothing or did not run)."""
        return load_curriculum(self.curriculum_path) if self.curriculum_path is not None else None

    def summary(self) -> RoundSummary:
        """The round's record in ``co_evolve_summary.json``: its paths and gate status, its val check before →
        after (when it ran one) and its gate's outcomes (when the gate ran)."""
        files = RoundDir(self.root)
        comparison = files.val_compare.comparison
        success = PairedComparison.read(comparison).metric("r_success") if comparison.is_file() else None
        manifest = files.gate.manifest(ONLINE)
        outcomes = GateManifest.read(manifest).outcomes if manifest.is_file() else None
        return RoundSummary(
            round_index=self.round_index, root=str(self.root), checkpoint=str(self.checkpoint),
            pool_path=str(self.pool_path), gate_status=self.gate_status,
            curriculum_path=str(self.curriculum_path) if self.curriculum_path is not None else None,
            gate_dir=str(self.gate_dir),
            val_success=ValSuccess(before=success.a_mean, after=success.b_mean) if success is not None else None,
            gate_outcomes=outcomes if self.gate_status != GATE_SKIPPED else None)


class ValSuccess(Record):
    before: float
    after: float


class RoundSummary(Record):
    """One finished round in ``co_evolve_summary.json`` (:meth:`CoEvolveRound.summary`)."""

    omit_when_none: ClassVar[frozenset[str]] = frozenset({"val_success", "gate_outcomes"})

    round_index: int
    root: str
    checkpoint: str
    pool_path: str
    gate_status: str
    curriculum_path: str | None
    gate_dir: str
    val_success: ValSuccess | None = None
    gate_outcomes: GateOutcomes | None = None


class CoEvolveSummary(Record):
    """``co_evolve_summary.json``: the run's plan fingerprint and one record per finished round."""

    fingerprint: str
    rounds: list[RoundSummary]


@dataclass(frozen=True)
class CoEvolveResult:
    """A co-evolution run: its directory, plan fingerprint and finished rounds."""

    run_dir: Path
    fingerprint: str
    rounds: list[CoEvolveRound]


def default_run_dir(experiment: ExperimentParams) -> Path:
    """``<run_root>/<experiment.name>/co-evolve``."""
    return runs_root(experiment.run_root) / experiment.name / "co-evolve"


def curriculum_bank(curriculum: CurriculumState | None, round_name: str) -> SkillBank:
    """The bank a round trained with: its curriculum's chunks (id, version, content) in order; empty
    without a curriculum. The analysis checks each retry's injected skills against it."""
    chunks = curriculum.chunks if curriculum is not None else ()
    skills = tuple(Skill(c.skill_id, c.content, c.version, metadata=dict(c.metadata)) for c in chunks)
    return SkillBank(f"{round_name}-curriculum", skills)


def write_coevolve_plan(run_dir: Path, plan: dict[str, Any]) -> str:
    """Write ``plan.json`` (provenance beside the fingerprint) or check the stored plan; a missing plan beside a
    started round or the summary is refused."""
    return write_plan(RunDir(run_dir).plan, plan, what="co-evolution", error=CoEvolvePlanMismatchError,
                      outputs=RunDir.OUTPUTS,
                      schema=PLAN_SCHEMA_VERSION, hint="Use another --out directory to run a different plan.")


def _trained(root: Path, params: Params) -> bool:
    """Every rollout step committed and, when the round checks val, its comparison written."""
    files = RoundDir(root)
    steps = all(files.step(s).done.exists() for s in range(1, params.round.rollout_steps + 1))
    val = params.round.val_tasks == 0 or files.val_compare.comparison.is_file()
    return steps and val and files.checkpoint.model.is_saved()


def _analysed(root: Path, bank: SkillBank) -> bool:
    analysis = RoundDir(root).analysis
    summary = analysis.summary
    if not summary.is_file() or not analysis.pool.is_file():
        return False
    return AnalysisSummary.read(summary).current_skillbank_sha256 == bank.sha256


def coevolve_plan(params: Params, config: CoEvolveConfig, start: RoundInputs) -> dict[str, Any]:
    """The fingerprinted plan of a run; its settings name the analyst only when it is not the rule default."""
    settings = asdict(config)
    if config.analyst == AnalystSettings():
        del settings["analyst"]
    return {"pipeline_version": PIPELINE_VERSION, "params": plan_dump(params), "config": settings,
            "start": {"checkpoint": start.checkpoint,
                      "curriculum_state_id": start.curriculum.state_id if start.curriculum else None}}


def _analyse(params: Params, root: Path, index: int, bank: SkillBank, history_path: Path | None,
             config: CoEvolveConfig, store_root: str | Path | None) -> None:
    name = round_id(index)
    history = read_ledger(history_path) if history_path is not None else []
    store = open_train_store(params, store_root)
    try:
        codes = None if params.model.house_codes is None else HouseCodes(params.model.house_codes)
        with open_analyst(config.analyst, store.engine, codes) as (analyst, compiler):
            run_analysis(root, store.engine, bank, analyst,
                         AnalysisConfig(name, f"{params.experiment.name}-{name}", config.max_candidates), history,
                         compiler=compiler)
    finally:
        store.close()


def _gate_limit(params: Params, config: CoEvolveConfig) -> tuple[int | None, bool]:
    """The gate's task limit and whether the round's ``val-after`` run is its bare run."""
    val_tasks = params.round.val_tasks
    if config.gate_task_limit is not None:
        limit = config.gate_task_limit
    else:
        limit = val_tasks if val_tasks != 0 else None
    reuse = (val_tasks != 0 and config.samples_per_task == params.evaluation.repeats
             and (limit if limit is not None else params.evaluation.task_limit)
             == (val_tasks if val_tasks is not None else params.evaluation.task_limit))
    return limit, reuse


def _gate(params: Params, root: Path, index: int, config: CoEvolveConfig, store_root: str | Path | None,
          progress: bool) -> tuple[str, Path | None]:
    files = RoundDir(root)
    pool = load_pool(files.analysis.pool)
    if not pool.current_skills and not pool.candidates:
        LOGGER.info("%s: empty candidate pool; the gate does not run and the next round has no skills", root)
        return GATE_SKIPPED, None
    limit, reuse = _gate_limit(params, config)
    gate_config = GateConfig.from_params(params, f"{round_id(index)}-checkpoint",
                                         mask_seed=config.mask_seed, samples_per_task=config.samples_per_task,
                                         task_limit=limit, next_round_id=round_id(index + 1))
    result = run_online_gate(params, pool, files.gate.root, gate_config,
                             checkpoint=files.checkpoint.model.root,
                             bare_run_dir=files.val_after.root if reuse else None,
                             ledger=files.analysis.ledger, store_root=store_root,
                             progress=progress)
    return result.manifest.status, GateDir(result.gate_dir).curriculum if result.curriculum else None


def _ledger_after(previous: CoEvolveRound | None) -> Path | None:
    """The cumulative ledger a round's analysis starts from: the previous gate's (or analysis') ledger."""
    if previous is None:
        return None
    files = RoundDir(previous.root)
    return files.gate.ledger if files.gate.ledger.is_file() else files.analysis.ledger


def co_evolve(
    params: Params,
    rounds: int,
    *,
    start: RoundInputs | None = None,
    config: CoEvolveConfig = CoEvolveConfig(),
    out_dir: str | Path | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
    val_before: Path | None = None,
) -> CoEvolveResult:
    """Run (or resume, or extend) ``rounds`` co-evolution rounds.

    Parameters
    ----------
    params : the parameter set (``round`` and ``grpo`` for training; store, model, sampling,
        evaluation for the evaluator).
    rounds : number of rounds (≥ 1); round r starts from round r − 1's checkpoint and gate curriculum.
    start : round 0's starting checkpoint and curriculum (default
        :func:`~intraskill.pipeline.prepare.prepare_round`: the organism's warm start and S₀ with its
        ground-truth α).
    config : analysis and gate settings (:class:`CoEvolveConfig`).
    out_dir : the run directory (default :func:`default_run_dir`).
    store_root : the store directory (default the cached store of ``params.store``).
    val_before : a finished bare val run of the starting checkpoint under these parameters (the control matrix's,
        shared by the arms of a seed), copied as round 0's ``val-before`` instead of running it again.
    """
    if rounds < 1:
        raise ValueError(f"rounds: must be >= 1, got {rounds}")
    method = training_method(params)
    if config.evolve and not method.uses_curriculum:
        raise ValueError(f"round.method: co-evolution trains with the curriculum (intraskill), got {method.name!r}; "
                         "chain its rounds without evolution (evolve: False) or run one with `intraskill round`")
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(params.experiment)
    if start is None:
        start = prepare_round(params, 0, run_dir / round_id(0))
    fingerprint = write_coevolve_plan(run_dir, coevolve_plan(params, config, start))
    train_params = params.model_copy(update={"round": params.round.model_copy(update={"skillbank": None})})
    finished: list[CoEvolveRound] = []
    checkpoint, curriculum = start.checkpoint, start.curriculum
    for index in range(rounds):
        root = run_dir / round_id(index)
        if not _trained(root, params):
            last = RoundDir(finished[-1].root) if finished else None
            source = last.val_after.root if last is not None else val_before
            if source is not None:
                _carry_val(source, RoundDir(root).val_before.root)
            library = method.library(finished[-1].root) if finished else None
            run_round(train_params, index, curriculum=curriculum, initial_checkpoint=checkpoint, out_dir=root,
                      store_root=store_root, progress=progress, library_start=library)
        if config.evolve:
            bank = curriculum_bank(curriculum, round_id(index))
            if not _analysed(root, bank):
                history = _ledger_after(finished[-1] if finished else None)
                with phase("analysis"):
                    _analyse(params, root, index, bank, history, config, store_root)
            with phase("gate"):
                status, curriculum_path = _gate(params, root, index, config, store_root, progress)
        else:
            status, curriculum_path = NOT_EVOLVING, _same_bank_next(params, root, index, start)
        done = CoEvolveRound(index, root, RoundDir(root).checkpoint.model.root, RoundDir(root).analysis.pool, status,
                             curriculum_path)
        finished.append(done)
        _write_summary(run_dir, fingerprint, finished)
        checkpoint, curriculum = str(done.checkpoint), done.curriculum()
    return CoEvolveResult(run_dir, fingerprint, finished)


def _carry_val(source: Path, target: Path) -> None:
    """Round r's bare val check before training is round r − 1's after it (the same checkpoint, seed and val
    tasks), so its records are copied: the round's evaluation then checks the plan and finds every episode
    done."""
    if target.exists() or not EvalDir(source).summary.is_file():
        return
    staging = target.with_name(target.name + ".copying")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    staging.replace(target)


def _same_bank_next(params: Params, root: Path, index: int, start: RoundInputs) -> Path | None:
    """Without evolution the next round trains with the starting bank again: its curriculum for round
    ``index + 1`` (``None`` when the run has no skills), written beside the round."""
    if start.skillbank is None or start.curriculum is None:
        return None
    curriculum = round_curriculum(params.round, index + 1, start.skillbank, recorded_path=start.skillbank.name)
    return save_curriculum(curriculum, RoundDir(root).next_curriculum)


def _write_summary(run_dir: Path, fingerprint: str, finished: Sequence[CoEvolveRound]) -> None:
    CoEvolveSummary(fingerprint=fingerprint, rounds=[r.summary() for r in finished]).write(RunDir(run_dir).summary,
                                                                                          indent=1)
