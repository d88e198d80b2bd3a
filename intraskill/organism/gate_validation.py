"""Validation of the gate on the organism: Gate A's β against the warm start's ground-truth effects.

The release never ran its planned check of the contribution ranking (docs/method.md §9 item 3)
and computed no standard errors (§5.4). The organism has known per-chunk effects: the warm start
measures each S₀ chunk's effect on ``r_success`` as "chunk alone vs bare", paired by task and
episode seed, with a task-level paired bootstrap CI (``ground_truth.json``). Here Gate A runs on the
same checkpoint with Bernoulli(0.5) masks over S₀'s chunks on val, for several mask seeds and m
masked rollouts per task, and its ``r_success`` coefficients are compared with the ground truth:

- **Spearman correlation** of β and the true effects across chunks (rank agreement);
- **CI coverage**: the fraction of chunks whose true effect lies inside the gate's 95 % CI (HC3, or
  clustered by task when m > 1);
- **attainable Spearman**: the mean ρ that an *unbiased* gate with these standard errors would reach
  against a truth re-measured with its own standard errors, the measured effects taken as the true
  ones (:func:`attainable_spearman`). Where the true effects are tied within their noise, no gate can
  rank them, and this reference says so: a ρ short of the target but near its attainable value is the
  testbed's limit, not the gate's. It is a reference, not a bound (HC3 errors are conservative, and
  one mask seed's ρ varies widely).

β is an additive main effect averaged over the other chunks' Bernoulli(0.5) masks, while the ground
truth is each chunk alone; where chunks interact the two estimands differ (§9 item 4), which the
coverage figure exposes rather than hides. The target of the project: Spearman ≥ 0.8 and ≥ 90 %
coverage.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import RuntimeConfig
from intraskill.chat.base import Policy
from intraskill.evaluate.task_records import run_task_records, write_task_records
from intraskill.gate.contributions import MetricEstimate, load_contributions
from intraskill.gate.manifest import GateManifest
from intraskill.layout import GATE_A, GateDir, ValidationDir, WarmstartDir
from intraskill.organism.demos import teacher_law
from intraskill.organism.truth import ground_truth, run_arm
from intraskill.params import RELEASE_SEED, SAMPLES_PER_TASK, Params
from intraskill.paths import resolve_project_path
from intraskill.pipeline.gate_run import GateConfig, as_draft, run_gate_a
from intraskill.pipeline.round import open_train_store
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.policy.reader_expert import ReaderExpertPolicy
from intraskill.policy.warmstarts import GroundTruth, read_ground_truth
from intraskill.skills.bank import Skill, SkillBank, load_skillbank

if TYPE_CHECKING:
    import pandas as pd

METRIC = "r_success"
TARGET = {"spearman": 0.8, "coverage": 0.9}
ATTAINABLE_DRAWS = 4000
ATTAINABLE_SEED = RELEASE_SEED
"""Draws and seed of :func:`attainable_spearman` (recorded in every comparison)."""
Z95 = 1.959963984540054


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation (ties averaged); NaN when either side is constant or n < 2.

    >>> spearman([0.1, 0.3, 0.2], [1, 3, 2])
    1.0
    """
    # deferred: scipy is heavy to import
    from scipy.stats import spearmanr

    if len(a) != len(b):
        raise ValueError(f"spearman: lengths differ ({len(a)} vs {len(b)})")
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    return float(spearmanr(a, b).statistic)


def attainable_spearman(effects: Sequence[float], truth_se: Sequence[float], gate_se: Sequence[float], *,
                        draws: int = ATTAINABLE_DRAWS, seed: int = ATTAINABLE_SEED) -> float:
    """Mean Spearman ρ between an unbiased estimate and a re-measured truth, by parametric simulation.

    Each draw adds independent normal noise to ``effects`` twice — with the gate's standard errors
    ``gate_se`` (the estimate) and with the truth's ``truth_se`` (the measurement) — and ranks both;
    draws where either side is constant are skipped. It is the rank agreement the validation can be
    expected to show at this precision (the measured effects stand in for the true ones, so it is
    slightly optimistic where they are tied within their noise).

    >>> attainable_spearman([0.3, 0.2, 0.1, 0.0], [0.0] * 4, [0.001] * 4)
    1.0
    """
    # deferred: numpy is heavy to import
    import numpy as np

    # deferred: scipy is heavy to import
    from scipy.stats import rankdata

    if not len(effects) == len(truth_se) == len(gate_se):
        raise ValueError("attainable_spearman: effects, truth_se and gate_se differ in length")
    if draws < 1:
        raise ValueError(f"draws: must be >= 1, got {draws}")
    rng = np.random.default_rng(seed)
    center = np.asarray(effects, dtype=float)
    estimate = center + rng.normal(size=(draws, center.size)) * np.asarray(gate_se, dtype=float)
    measured = center + rng.normal(size=(draws, center.size)) * np.asarray(truth_se, dtype=float)
    a, b = rankdata(estimate, axis=1), rankdata(measured, axis=1)
    a, b = a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True)
    norm = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    valid = norm > 0
    if not valid.any():
        return math.nan
    return float(((a * b).sum(axis=1)[valid] / norm[valid]).mean())


def _half_width_se(ci: Sequence[float | None] | None) -> float:
    """A standard error from a 95 % interval (its half-width over z₀.₉₇₅); 0 without an interval."""
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return 0.0
    return (float(ci[1]) - float(ci[0])) / (2 * Z95)


@dataclass(frozen=True)
class ChunkComparison:
    """One chunk: the gate's β and 95 % CI against its true effect and the truth's CI."""

    beta: float
    ci95: tuple[float | None, float | None]
    truth: float
    truth_ci95: tuple[float, ...]
    covered: bool

    def to_dict(self) -> dict[str, Any]:
        """``{beta, ci95, truth, truth_ci95, covered}`` with lists for the intervals."""
        return {"beta": self.beta, "ci95": list(self.ci95), "truth": self.truth,
                "truth_ci95": list(self.truth_ci95), "covered": self.covered}


@dataclass(frozen=True)
class TruthComparison:
    """One gate fit against the ground truth: rank agreement, CI coverage and the attainable ρ."""

    per_chunk: dict[str, ChunkComparison]
    spearman: float
    coverage: float
    attainable_spearman: float
    draws: int = ATTAINABLE_DRAWS
    seed: int = ATTAINABLE_SEED

    @property
    def chunks(self) -> int:
        """Chunks compared."""
        return len(self.per_chunk)

    def to_dict(self) -> dict[str, Any]:
        """``{chunks, spearman, coverage, attainable_spearman, simulation, per_chunk}``."""
        return {"chunks": self.chunks, "spearman": self.spearman, "coverage": self.coverage,
                "attainable_spearman": self.attainable_spearman,
                "simulation": {"draws": self.draws, "seed": self.seed},
                "per_chunk": {c: p.to_dict() for c, p in self.per_chunk.items()}}


def compare_to_truth(estimate: MetricEstimate, truth: GroundTruth) -> TruthComparison:
    """A gate metric's coefficients against ground-truth effects, chunk by chunk.

    Parameters
    ----------
    estimate : one metric's :class:`~intraskill.gate.contributions.MetricEstimate` (with its 95 % CIs).
    truth : the ground truth (each chunk's effect and 95 % CI).

    The coverage counts chunks whose true effect lies inside the gate's 95 % CI; the attainable ρ is
    :func:`attainable_spearman` with the gate's and the truth's standard errors, taken from their 95 %
    intervals.
    """
    ids = [c for c in estimate.coefficients if c in truth.chunks]
    if not ids:
        raise ValueError("truth: no chunk of the gate has a ground-truth effect")
    if estimate.conf_int_95 is None:
        raise ValueError("estimate: no 95 % intervals to compare (a release fit without inference)")
    per_chunk = {}
    for chunk in ids:
        low, high = estimate.conf_int_95[chunk]
        effect = truth.chunks[chunk].effect
        per_chunk[chunk] = ChunkComparison(
            beta=estimate.coefficients[chunk], ci95=(low, high), truth=effect, truth_ci95=truth.chunks[chunk].ci95,
            covered=low is not None and high is not None and low <= effect <= high)
    effects = [per_chunk[c].truth for c in ids]
    return TruthComparison(
        per_chunk=per_chunk,
        spearman=spearman([per_chunk[c].beta for c in ids], effects),
        coverage=sum(p.covered for p in per_chunk.values()) / len(ids),
        attainable_spearman=attainable_spearman(
            effects, [_half_width_se(per_chunk[c].truth_ci95) for c in ids],
            [_half_width_se(per_chunk[c].ci95) for c in ids]))


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


@dataclass(frozen=True)
class SeedValidation:
    """One mask seed's gate: its size, the bare success and its comparison with the truth."""

    mask_seed: int
    observations: int
    bare_success: float
    comparison: TruthComparison

    def to_dict(self) -> dict[str, Any]:
        """``{mask_seed, observations, bare_success, **comparison}``."""
        return {"mask_seed": self.mask_seed, "observations": self.observations,
                "bare_success": self.bare_success, **self.comparison.to_dict()}


@dataclass(frozen=True)
class GateValidationReport:
    """Gate A against the ground truth over several mask seeds (:func:`validate_gate`).

    ``policy``, ``warmstart_dir`` and ``truth_episodes_per_arm`` are set by :func:`validate_on_warmstart`
    and :func:`validate_on_teacher`.
    """

    metric: str
    samples_per_task: int
    task_limit: int | None
    per_seed: tuple[SeedValidation, ...]
    policy: str | None = None
    warmstart_dir: str | None = None
    truth_episodes_per_arm: int | None = None

    @property
    def seeds(self) -> list[int]:
        """The mask seeds, in run order."""
        return [s.mask_seed for s in self.per_seed]

    @property
    def spearman_mean(self) -> float:
        """Mean Spearman ρ over the seeds (NaN seeds left out)."""
        return _mean([s.comparison.spearman for s in self.per_seed])

    @property
    def coverage_mean(self) -> float:
        """Mean CI coverage over the seeds."""
        return _mean([s.comparison.coverage for s in self.per_seed])

    @property
    def attainable_spearman_mean(self) -> float:
        """Mean attainable ρ over the seeds."""
        return _mean([s.comparison.attainable_spearman for s in self.per_seed])

    @property
    def meets_target(self) -> bool:
        """Whether the mean ρ and the mean coverage reach :data:`TARGET`."""
        return self.spearman_mean >= TARGET["spearman"] and self.coverage_mean >= TARGET["coverage"]

    def to_frame(self) -> "pd.DataFrame":
        """One row per (mask seed, chunk): ``mask_seed, chunk, truth, beta, ci_lo, ci_hi, covered``."""
        # deferred: pandas is heavy to import
        import pandas as pd

        return pd.DataFrame([{"mask_seed": s.mask_seed, "chunk": chunk, "truth": row.truth, "beta": row.beta,
                              "ci_lo": row.ci95[0], "ci_hi": row.ci95[1], "covered": row.covered}
                             for s in self.per_seed for chunk, row in s.comparison.per_chunk.items()])

    def seeds_frame(self) -> pd.DataFrame:
        """One row per mask seed: ``m, mask_seed, observations, bare_success, spearman, coverage,
        attainable_spearman``."""
        # deferred: pandas is heavy to import
        import pandas as pd

        return pd.DataFrame([{"m": self.samples_per_task, "mask_seed": s.mask_seed, "observations": s.observations,
                              "bare_success": s.bare_success, "spearman": s.comparison.spearman,
                              "coverage": s.comparison.coverage,
                              "attainable_spearman": s.comparison.attainable_spearman} for s in self.per_seed])

    def summary(self) -> str:
        """A readable text table: one line per mask seed, then the means against the target."""
        title = (f"Gate validation on {self.metric} (policy {self.policy or 'given'}, "
                 f"m = {self.samples_per_task}, task limit {self.task_limit or 'none'})")
        head = (f"{'mask seed':>10}  {'obs':>5}  {'bare':>6}  {'chunks':>6}  {'Spearman':>8}  "
                f"{'coverage':>8}  {'attainable':>10}")
        rows = [f"{s.mask_seed:>10}  {s.observations:>5}  {s.bare_success:>6.3f}  {s.comparison.chunks:>6}  "
                f"{s.comparison.spearman:>8.3f}  {s.comparison.coverage:>8.3f}  "
                f"{s.comparison.attainable_spearman:>10.3f}" for s in self.per_seed]
        mean = (f"{'mean':>10}  {'':>5}  {'':>6}  {'':>6}  {self.spearman_mean:>8.3f}  "
                f"{self.coverage_mean:>8.3f}  {self.attainable_spearman_mean:>10.3f}")
        verdict = (f"target: Spearman >= {TARGET['spearman']}, coverage >= {TARGET['coverage']}: "
                   f"{'met' if self.meets_target else 'not met'}")
        rule = "=" * len(head)
        return "\n".join([rule, title, rule, head, rule.replace("=", "-"), *rows, mean, rule, verdict])

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (the provenance keys first when set)."""
        provenance: dict[str, Any] = {} if self.policy is None else {"policy": self.policy}
        if self.warmstart_dir is not None:
            provenance["warmstart_dir"] = self.warmstart_dir
        if self.policy is not None:
            provenance["truth_episodes_per_arm"] = self.truth_episodes_per_arm
        return {**provenance, "metric": self.metric, "samples_per_task": self.samples_per_task,
                "task_limit": self.task_limit, "seeds": self.seeds, "spearman_mean": self.spearman_mean,
                "coverage_mean": self.coverage_mean, "attainable_spearman_mean": self.attainable_spearman_mean,
                "target": dict(TARGET), "meets_target": self.meets_target,
                "per_seed": [s.to_dict() for s in self.per_seed]}


def validate_gate(
    params: Params,
    draft: SkillBank,
    truth: GroundTruth,
    out_dir: str | Path,
    *,
    seeds: Sequence[int],
    samples_per_task: int = SAMPLES_PER_TASK,
    task_limit: int | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_id: str = "warmstart",
    policy: Policy | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
) -> GateValidationReport:
    """Gate A over ``draft`` (marked draft-only here) for each mask seed; compare each fit with ``truth``.

    Every seed's gate shares one bare val run (``<out_dir>/m<m>/bare-val``); gates go to
    ``<out_dir>/m<m>/seed-<seed>`` and resume or skip like any gate. The report is
    :func:`load_validation` of the finished gates.
    """
    _run_gates(params, draft, out_dir, seeds=seeds, samples_per_task=samples_per_task, task_limit=task_limit,
               checkpoint=checkpoint, checkpoint_id=checkpoint_id, policy=policy, store_root=store_root,
               progress=progress)
    return load_validation(out_dir, truth, seeds=seeds, samples_per_task=samples_per_task)


def _run_gates(params: Params, draft: SkillBank, out_dir: str | Path, *, seeds: Sequence[int],
               samples_per_task: int, task_limit: int | None, checkpoint: str | Path | None, checkpoint_id: str,
               policy: Policy | None, store_root: str | Path | None, progress: bool) -> None:
    """Run (or resume, or skip) every mask seed's Gate A of :func:`validate_gate`."""
    if not seeds:
        raise ValueError("seeds: give at least one mask seed")
    for seed in seeds:
        config = GateConfig.from_params(params, checkpoint_id, mask_seed=seed,
                                        samples_per_task=samples_per_task, task_limit=task_limit)
        run_gate_a(params, as_draft(draft), ValidationDir(out_dir).gate(samples_per_task, seed).root, config,
                   checkpoint=checkpoint, bare_run_dir=ValidationDir(out_dir).bare_val(samples_per_task).root,
                   policy=policy, store_root=store_root, progress=progress)


def validation_finished(out_dir: str | Path, *, seeds: Sequence[int], samples: Sequence[int]) -> bool:
    """Whether ``out_dir`` (a live validation or shipped records) holds every (m, seed)'s finished gate."""
    return all(_finished(ValidationDir(out_dir).gate(m, seed)) for m in samples for seed in seeds)


def _finished(gate: GateDir) -> bool:
    return gate.contributions.is_file() and gate.manifest(GATE_A).is_file()


def load_validation(out_dir: str | Path, truth: GroundTruth, *, seeds: Sequence[int],
                    samples_per_task: int) -> GateValidationReport:
    """The validation of the finished gates under ``out_dir`` against ``truth``: a live run's directory or
    its shipped records (:func:`ship_validation`) alike, from each gate's ``contributions.json`` (the task
    limit from its manifest)."""
    if not seeds:
        raise ValueError("seeds: give at least one mask seed")
    per_seed, limits = [], set()
    for seed in seeds:
        gate = ValidationDir(out_dir).gate(samples_per_task, seed)
        if not _finished(gate):
            raise FileNotFoundError(f"{gate.root}: no finished gate (run the gate validation, or ship its records)")
        limits.add(GateManifest.read(gate.manifest(GATE_A)).config["task_limit"])
        contributions = load_contributions(gate.contributions)
        estimate = contributions.estimates[METRIC]
        per_seed.append(SeedValidation(mask_seed=seed, observations=contributions.observations,
                                       bare_success=estimate.bare_mean,
                                       comparison=compare_to_truth(estimate, truth)))
    if len(limits) > 1:
        raise ValueError(f"{out_dir}: the gates of m = {samples_per_task} ran with different task limits {limits}")
    return GateValidationReport(metric=METRIC, samples_per_task=samples_per_task, task_limit=limits.pop(),
                                per_seed=tuple(per_seed))


def validate_on_warmstart(params: Params, warmstart_dir: str | Path, out_dir: str | Path, *,
                          seeds: Sequence[int], samples_per_task: int = SAMPLES_PER_TASK, task_limit: int | None = None,
                          store_root: str | Path | None = None, progress: bool = True) -> GateValidationReport:
    """:func:`validate_gate` on the organism's warm start: its checkpoint, S₀ (``warmstart.skills``) and
    its ``ground_truth.json``; the report is :func:`load_warmstart_validation` of the finished gates."""
    read_ground_truth(warmstart_dir)  # before any rollout
    draft = load_skillbank(resolve_project_path(params.warmstart.skills))
    _run_gates(params, draft, out_dir, seeds=seeds, samples_per_task=samples_per_task, task_limit=task_limit,
               checkpoint=WarmstartDir(warmstart_dir).checkpoint.root, checkpoint_id="warmstart", policy=None,
               store_root=store_root, progress=progress)
    return load_warmstart_validation(out_dir, warmstart_dir, seeds=seeds, samples_per_task=samples_per_task)


def load_warmstart_validation(out_dir: str | Path, warmstart_dir: str | Path, *, seeds: Sequence[int],
                              samples_per_task: int) -> GateValidationReport:
    """:func:`load_validation` against a warm start's ``ground_truth.json`` (``warmstart_dir``: the warm start,
    or the ``warmstart/`` copy of shipped records); the report also records the ground truth's own size."""
    truth = read_ground_truth(warmstart_dir)
    report = load_validation(out_dir, truth, seeds=seeds, samples_per_task=samples_per_task)
    return replace(report, policy="organism", warmstart_dir=str(warmstart_dir),
                   truth_episodes_per_arm=truth.episodes_per_arm)


def ship_validation(out_dir: str | Path, warmstart_dir: str | Path, target: str | Path, *, seeds: Sequence[int],
                    samples: Sequence[int]) -> dict[int, GateValidationReport]:
    """Write a finished warm-start validation's records into ``target`` (replacing the records there) and
    return each m's report loaded back from them.

    Per (m, seed) the gate's manifest, ``contributions.json`` (the fit and its paired rows, masks included) and
    its masked run's per-task records; per m the bare run's per-task records (``tasks.jsonl``,
    :mod:`intraskill.evaluate.task_records`: no episode text); the warm start's ``ground_truth.json`` and
    (where it has one) ``manifest.json`` under ``target/warmstart``.
    """
    source, out = Path(out_dir), Path(target)
    if out.resolve() == source.resolve():
        raise ValueError(f"ship: target {out} is the validation directory itself")
    if not validation_finished(source, seeds=seeds, samples=samples):
        raise FileNotFoundError(f"{source}: the gates of seeds {list(seeds)} and m {list(samples)} are not all "
                                "finished; run the gate validation first")
    shipped, live = ValidationDir(out), ValidationDir(source)
    for m in samples:
        shutil.rmtree(shipped.samples(m), ignore_errors=True)
        runs = [(live.bare_val(m), shipped.bare_val(m))] + [(live.gate(m, s), shipped.gate(m, s)) for s in seeds]
        for run, copy in runs:
            copy.root.mkdir(parents=True)
            if isinstance(run, GateDir):
                for path in (run.manifest(GATE_A), run.contributions):
                    shutil.copyfile(path, copy / path.name)
            write_task_records(run_task_records(run.root), copy.root)
    read_ground_truth(warmstart_dir)
    shipped.warmstart.root.mkdir(parents=True, exist_ok=True)
    for name in WarmstartDir.SHIPPED:
        if (Path(warmstart_dir) / name).is_file():
            shutil.copyfile(Path(warmstart_dir) / name, shipped.warmstart / name)
    return {m: load_warmstart_validation(out, shipped.warmstart.root, seeds=seeds, samples_per_task=m)
            for m in samples}


def teacher_policy(params: Params, draft: SkillBank) -> Policy:
    """The organism's teacher: the scripted expert behind S₀'s gate, on the law ``warmstart`` names
    (:func:`~intraskill.organism.demos.teacher_law`); for ``law: reader`` the house-code reader."""
    ws = params.warmstart
    if ws.law == "reader":
        return ReaderExpertPolicy(seed=ws.seed, language=params.store.language,
                                  max_actions=params.store.max_actions, explore=ws.explore, note=ws.note)
    return ExpertPolicy(seed=ws.seed, law=teacher_law(draft, ws),
                        language=params.store.language, max_actions=params.store.max_actions, plan=ws.plan)


def teacher_truth(params: Params, draft: SkillBank, *, tasks: int | None,
                  store_root: str | Path | None = None, batch_size: int = 64) -> GroundTruth:
    """Ground truth of the teacher, measured as the warm start measures the organism's: each chunk alone
    vs bare on the first ``tasks`` val tasks (sample 0, episode seeds from ``warmstart.seed``)."""
    store = open_train_store(params, store_root, split="val")
    try:
        task_ids = list(store.task_ids[:tasks] if tasks is not None else store.task_ids)
        factory = lambda: InProcessEnvironment(store.engine)  # noqa: E731
        config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
        seed = params.warmstart.seed
        def arm(skills: tuple[Skill, ...]) -> list[Any]:
            return run_arm(teacher_policy(params, draft), factory, task_ids, skills, seed, config, batch_size)

        bare = arm(())
        alone = {s.skill_id: arm((s,)) for s in draft.enabled_skills()}
    finally:
        store.close()
    return ground_truth(draft, bare, alone, samples=params.evaluation.bootstrap_samples,
                        seed_base=params.evaluation.bootstrap_seed, catalog_sha256=store.catalog.sha256, seed=seed,
                        checkpoint_sha256=None)


def validate_on_teacher(params: Params, out_dir: str | Path, *, seeds: Sequence[int],
                        samples_per_task: int = SAMPLES_PER_TASK, task_limit: int | None = None,
                        truth_tasks: int | None = None, truth: GroundTruth | None = None,
                        store_root: str | Path | None = None, progress: bool = True) -> GateValidationReport:
    """:func:`validate_gate` on the organism's teacher (fast, no checkpoint needed): S₀ with the gated
    expert as the policy and :func:`teacher_truth` as the ground truth (pass ``truth`` to reuse one
    measured earlier; ``truth_tasks`` is then ignored)."""
    draft = load_skillbank(resolve_project_path(params.warmstart.skills))
    if truth is None:
        truth = teacher_truth(params, draft, tasks=truth_tasks, store_root=store_root)
    report = validate_gate(params, draft, truth, out_dir, seeds=seeds,
                           samples_per_task=samples_per_task, task_limit=task_limit,
                           checkpoint_id="s0-teacher", policy=teacher_policy(params, draft),
                           store_root=store_root, progress=progress)
    return replace(report, policy="teacher", truth_episodes_per_arm=truth.episodes_per_arm)
