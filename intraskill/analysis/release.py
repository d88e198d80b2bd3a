"""Re-analysis of the public IntraSkill release (docs/release.md §3).

Every number here is recomputed from the release files under an ``artifacts`` folder laid out like
``data/intraskill-release`` (``analysis/``, ``eval/``, ``round-00X/``):

* the four-condition test table (§3.1), checked against each arm's ``summary.json``;
* paired bootstrap CIs and success transitions for all six arm pairs (§3.2);
* per-gate rounds: chunks in/out, candidates, bare and masked validation, gate-delta CI (§3.3, §3.4);
* the 3,118-value W&B reconciliation and per-round optimizer / rollout means (§3.7);
* the gate OLS refits (§3.3).
"""

from __future__ import annotations

import csv
import json
import os
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from intraskill.analysis.release_results import (
    ArmComparison,
    BootstrapSettings,
    ConditionRow,
    GateDelta,
    GateRefit,
    GateRound,
    MetricComparison,
    OptimizerRound,
    ReleaseReanalysis,
    RolloutRound,
    Stats,
    WandbReconciliation,
)
from intraskill.evaluate.bootstrap import TEST_SEED_BASE, paired_bootstrap_ci, success_transitions
from intraskill.evaluate.records import EvalSummary
from intraskill.gate.ols import refit_contributions
from intraskill.layout import EvalDir, RoundDir, RunDir
from intraskill.paths import release_data_dir

RELEASE_DIR_ENV = "INTRASKILL_RELEASE_DIR"
ARMS = ("base_free", "base_s0", "iter80_free", "iter80_st")
"""The four test arms of ``analysis/test_task_outcomes.json``."""
WANDB_ROLLOUTS = Path("wandb") / "rollout_steps.csv"
"""The W&B export of the rollout steps, under the release's ``analysis/``."""
EVAL_RUNS = {arm: f"qwen35-4b-test-{arm.replace('_', '-')}" for arm in ARMS}
"""Arm → ``eval/<run>/summary.json`` folder."""
COMPARISONS: tuple[tuple[str, str, str], ...] = (
    ("training_free", "base_free", "iter80_free"),
    ("initial_skill", "base_free", "base_s0"),
    ("final_skill", "iter80_free", "iter80_st"),
    ("final_pair_vs_base", "base_free", "iter80_st"),
    ("training_vs_initial_skill", "base_s0", "iter80_free"),
    ("final_pair_vs_initial_pair", "base_s0", "iter80_st"),
)
"""(name, a, b) for all six unordered arm pairs; differences are ``b − a`` (later checkpoint / with skills
minus earlier / without). The first four names are those of the release's ``analysis.json``."""
METRICS = (("reward", "reward"), ("r_success", "success"))
"""(bootstrap metric name / seed key, field in ``test_task_outcomes.json``)."""
OPTIMIZER_METRICS = (
    "train/entropy_loss",
    "train/pg_clipfrac",
    "train/grad_norm",
    "train/loss",
    "train/pg_loss",
    "train/ppo_kl",
    "train/train_rollout_logprob_abs_diff",
    "train/lr-pg_0",
    "train/global_batch_size",
)
ROLLOUT_METRICS = (
    "rollout/response_len/mean",
    "rollout/truncated_ratio",
    "perf/actor_train_tok_per_s",
    "perf/rollout_time",
)


def locate_release_dir(explicit: str | Path | None = None) -> Path:
    """Resolve the release artifacts folder.

    Order: ``explicit`` if given and non-empty; ``$INTRASKILL_RELEASE_DIR``; the excerpt the project
    ships (``data/intraskill-release``, see :func:`intraskill.paths.release_data_dir`).
    """
    if explicit:
        candidate = Path(explicit)
    elif os.environ.get(RELEASE_DIR_ENV):
        candidate = Path(os.environ[RELEASE_DIR_ENV])
    else:
        candidate = release_data_dir()
    if not (candidate / "analysis").is_dir():
        raise FileNotFoundError(
            f"release artifacts not found at {candidate} (expected an analysis/ folder); pass --artifacts "
            f"or set {RELEASE_DIR_ENV}"
        )
    return candidate


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def load_test_outcomes(artifacts_dir: str | Path) -> list[dict[str, Any]]:
    """``analysis/test_task_outcomes.json``, validated: unique task ids and every arm present."""
    rows = _read_json(Path(artifacts_dir) / "analysis" / "test_task_outcomes.json")
    task_ids = [row["task_id"] for row in rows]
    if len(set(task_ids)) != len(task_ids):
        raise ValueError("test_task_outcomes.json: task_id values are not unique")
    for row in rows:
        missing = [arm for arm in ARMS if arm not in row]
        if missing:
            raise ValueError(f"test_task_outcomes.json: task {row['task_id']} lacks arms {missing}")
    return rows


def _arm_values(rows: Sequence[Mapping[str, Any]], arm: str, field: str) -> list[float]:
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    return [float(row[arm][field]) for row in rows]


def four_condition_table(artifacts_dir: str | Path) -> tuple[ConditionRow, ...]:
    """Four-condition table: per arm the task means and the published ``summary.json`` values."""
    root = Path(artifacts_dir)
    rows = load_test_outcomes(root)
    table = []
    for arm in ARMS:
        summary = EvalSummary.read(EvalDir(root / "eval" / EVAL_RUNS[arm]).summary)
        reward = _mean(_arm_values(rows, arm, "reward"))
        success = _mean(_arm_values(rows, arm, "success"))
        published_reward = summary.primary.reward_mean
        published_success = summary.primary.success_rate
        table.append(ConditionRow(
            arm=arm,
            n=len(rows),
            reward_mean=reward,
            success_rate=success,
            steps_mean=summary.behavior.steps_mean,
            summary_reward_mean=published_reward,
            summary_success_rate=published_success,
            max_abs_error=max(abs(reward - published_reward), abs(success - published_success)),
        ))
    return tuple(table)


def _compare_rows(rows: Sequence[Mapping[str, Any]], a: str, b: str, samples: int) -> ArmComparison:
    metrics = {}
    for metric, field in METRICS:
        result = paired_bootstrap_ci(
            _arm_values(rows, a, field),
            _arm_values(rows, b, field),
            metric,
            samples=samples,
            seed_base=TEST_SEED_BASE,
        )
        metrics[metric] = MetricComparison(result.a_mean, result.b_mean, result.mean_difference, result.ci95)
    transitions = success_transitions(
        [int(v) for v in _arm_values(rows, a, "success")], [int(v) for v in _arm_values(rows, b, "success")]
    )
    return ArmComparison(a, b, len(rows), metrics, transitions)


def release_compare(artifacts_dir: str | Path, a: str, b: str, *, samples: int = 10_000) -> ArmComparison:
    """Paired comparison ``b − a`` of two test arms: ``reward`` and ``r_success`` (arm means,
    difference, CI) and the success transitions ``0->1``, ``1->0``, ``1->1``, ``0->0``."""
    return _compare_rows(load_test_outcomes(artifacts_dir), a, b, samples)


def comparisons(artifacts_dir: str | Path, *, samples: int = 10_000) -> dict[str, ArmComparison]:
    """All six arm pairs of :data:`COMPARISONS`, by name."""
    rows = load_test_outcomes(artifacts_dir)
    return {name: _compare_rows(rows, a, b, samples) for name, a, b in COMPARISONS}


def round_dirs(artifacts_dir: str | Path) -> list[Path]:
    """The ``round-*`` folders that hold a ``gate/contributions.json``, sorted by name."""
    return [round_dir.root for round_dir in RunDir(artifacts_dir).round_dirs() if round_dir.gate.contributions.is_file()]


def _round_row(folder: Path, published: Mapping[str, str], samples: int) -> GateRound:
    gate = _read_json(RoundDir(folder).gate.contributions)
    summary = EvalSummary.read(RoundDir(folder).gate.summary)
    records = gate["contributions"]
    table = gate["observations_table"]
    delta = paired_bootstrap_ci(
        [r["bare_reward"] for r in table], [r["reward"] for r in table], "reward", samples=samples
    )
    bare = gate["bare_baseline"]["mean_outcomes"]
    return GateRound(
        round=int(folder.name.rsplit("-", 1)[-1]),
        step=int(published["step"]) if published else None,
        input_chunks=sum(1 for r in records if r["kind"] == "current"),
        selected_chunks=gate["selected_count"],
        candidates=sum(1 for r in records if r["kind"] == "candidate"),
        columns=len(records),
        observations=gate["observations"],
        bare_strict=bare["reward"],
        bare_success=bare["r_success"],
        masked_strict=gate["estimates"]["reward"]["masked_mean"],
        masked_success=gate["estimates"]["r_success"]["masked_mean"],
        summary_masked_strict=summary.primary.reward_mean,
        summary_masked_success=summary.primary.success_rate,
        gate_delta=GateDelta(delta.mean_difference, delta.ci95),
        published=dict(published),
    )


def rounds(artifacts_dir: str | Path, *, samples: int = 10_000) -> tuple[GateRound, ...]:
    """Per-gate round table from the gate files, with the matching ``analysis/rounds.csv`` row."""
    root = Path(artifacts_dir)
    published = {f"round-{int(r['round']):03d}": r for r in _read_csv(root / "analysis" / "rounds.csv")}
    return tuple(_round_row(folder, published.get(folder.name, {}), samples) for folder in round_dirs(root))


def wandb_reconciliation(artifacts_dir: str | Path) -> WandbReconciliation:
    """Check ``training_steps.csv`` against ``wandb/rollout_steps.csv`` on every overlapping value (§3.7).

    For every W&B step and every ``rollout/*`` key that is non-empty in ``training_steps.csv`` and
    non-blank in the W&B row, ``|local − wandb|`` is counted; the release reports 3,118 values, max 0.0.
    """
    root = Path(artifacts_dir) / "analysis"
    local = {row["step"]: row for row in _read_csv(root / "training_steps.csv")}
    compared, worst = 0, 0.0
    for wandb_row in _read_csv(root / WANDB_ROLLOUTS):
        step = wandb_row["step"]
        if step not in local:
            raise ValueError(f"rollout_steps.csv step {step} is missing from training_steps.csv")
        for key, value in local[step].items():
            if not key.startswith("rollout/") or value == "" or wandb_row.get(key, "") == "":
                continue
            compared += 1
            worst = max(worst, abs(float(value) - float(wandb_row[key])))
    return WandbReconciliation(compared, worst)


def _describe(values: Sequence[float]) -> Stats:
    return Stats(len(values), _mean(values), statistics.median(values), min(values), max(values))


def _per_round(rows: Iterable[Mapping[str, str]], keys: Sequence[str]) -> dict[int, dict[str, list[float]]]:
    grouped: dict[int, dict[str, list[float]]] = {}
    for row in rows:
        bucket = grouped.setdefault(int(row["round"]), {key: [] for key in keys})
        for key in keys:
            if row.get(key, "") != "":
                bucket[key].append(float(row[key]))
    return grouped


def optimizer_rounds(artifacts_dir: str | Path) -> tuple[OptimizerRound, ...]:
    """Per-round statistics of ``wandb/optimizer_updates.csv`` and the zero-gradient updates (§3.7)."""
    rows = _read_csv(Path(artifacts_dir) / "analysis" / "wandb" / "optimizer_updates.csv")
    grouped = _per_round(rows, OPTIMIZER_METRICS)
    return tuple(
        OptimizerRound(
            round=round_id,
            updates=sum(1 for r in rows if int(r["round"]) == round_id),
            metrics={key: _describe(values) for key, values in series.items() if values},
            zero_grad_updates=tuple(
                int(r["update"])
                for r in rows
                if int(r["round"]) == round_id and float(r["train/grad_norm"]) == 0.0
            ),
        )
        for round_id, series in sorted(grouped.items())
    )


def rollout_rounds(artifacts_dir: str | Path) -> tuple[RolloutRound, ...]:
    """Per-round means of response length, truncation, actor throughput and rollout time (§3.7)."""
    rows = _read_csv(Path(artifacts_dir) / "analysis" / WANDB_ROLLOUTS)
    grouped = _per_round(rows, ROLLOUT_METRICS)
    return tuple(
        RolloutRound(round_id, len(series[ROLLOUT_METRICS[0]]),
                     {key: _mean(values) for key, values in series.items()})
        for round_id, series in sorted(grouped.items())
    )


def gate_refits(artifacts_dir: str | Path) -> tuple[GateRefit, ...]:
    """OLS refit of every gate's stored coefficients (all 8 metrics): columns, observations, max |Δβ|."""
    refits = []
    for folder in round_dirs(artifacts_dir):
        report = refit_contributions(_read_json(RoundDir(folder).gate.contributions))
        refits.append(GateRefit(folder.name, len(report.columns), report.observations, report.rank,
                                report.max_abs_diff))
    return tuple(refits)


def reanalyse_release(artifacts_dir: str | Path, *, samples: int = 10_000) -> ReleaseReanalysis:
    """Recompute every headline number of the release from its files.

    Parameters
    ----------
    artifacts_dir : str or Path
        Folder laid out like the release ``artifacts/`` tree (see :func:`locate_release_dir`).
    samples : int
        Bootstrap resamples for the test and gate-delta CIs (10,000 reproduces the published CIs).

    Returns
    -------
    ReleaseReanalysis
        With ``summary()`` (text), ``to_frame(part)`` (tables) and ``to_dict()`` (the ``--json`` record).
    """
    root = Path(artifacts_dir)
    return ReleaseReanalysis(
        artifacts_dir=str(root),
        bootstrap=BootstrapSettings("task_level_paired_percentile", samples, TEST_SEED_BASE),
        conditions=four_condition_table(root),
        comparisons=comparisons(root, samples=samples),
        rounds=rounds(root, samples=samples),
        wandb_reconciliation=wandb_reconciliation(root),
        optimizer_rounds=optimizer_rounds(root),
        rollout_rounds=rollout_rounds(root),
        gate_refits=gate_refits(root),
    )
