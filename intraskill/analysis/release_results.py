"""Typed results of the release re-analysis (:mod:`intraskill.analysis.release`).

:class:`ReleaseReanalysis` holds every recomputed number; ``summary()`` is the text
``intraskill release reanalyse`` prints, ``to_frame(part)`` one table per part (:data:`FRAMES`) and
``to_dict()`` the ``--json`` record. :class:`ArmComparison` is one paired comparison of two test arms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from intraskill.analysis.records import plain

if TYPE_CHECKING:
    import pandas as pd

COMPARISON_HEADER = (
    f"{'comparison (b - a)':<28} {'success pp [95% CI]':<26} {'reward [95% CI]':<30} 0->1/1->0/1->1/0->0"
)
ROUND_HEADER = (
    f"{'round':>5} {'step':>4} {'in':>3} {'out':>3} {'cand':>4} {'bare succ':>9} {'masked':>7}"
    "  gate delta [95% CI]"
)
FRAME_METRICS = (("success", "r_success"), ("reward", "reward"))
"""(column prefix in the comparisons table, metric of :attr:`ArmComparison.metrics`)."""


@dataclass(frozen=True)
class ConditionRow:
    """One arm of the four-condition test table: task means next to its published ``summary.json``."""

    arm: str
    n: int
    reward_mean: float
    success_rate: float
    steps_mean: float
    summary_reward_mean: float
    summary_success_rate: float
    max_abs_error: float


@dataclass(frozen=True)
class MetricComparison:
    """Arm means and the paired difference ``b − a`` of one metric, with its 95 % bootstrap CI."""

    a_mean: float
    b_mean: float
    mean_difference: float
    ci95: tuple[float, float]


@dataclass(frozen=True)
class ArmComparison:
    """Paired comparison ``b − a`` of two test arms: ``reward`` and ``r_success`` and the success
    transitions (``0->1``, ``1->0``, ``1->1``, ``0->0``) over ``pairs`` tasks."""

    a: str
    b: str
    pairs: int
    metrics: Mapping[str, MetricComparison]
    transitions: Mapping[str, int]

    def line(self, name: str) -> str:
        """One row under :data:`COMPARISON_HEADER`."""
        success, reward = self.metrics["r_success"], self.metrics["reward"]
        (lo, hi), (rlo, rhi) = success.ci95, reward.ci95
        moves = self.transitions
        return (
            f"{name:<28} {_pct(success.mean_difference):>7} [{_pct(lo)}, {_pct(hi)}]  "
            f"{reward.mean_difference:+.5f} [{rlo:+.5f}, {rhi:+.5f}]  "
            f"{moves['0->1']}/{moves['1->0']}/{moves['1->1']}/{moves['0->0']}"
        )

    def summary(self) -> str:
        """The comparison as ``intraskill release compare`` prints it."""
        return f"{COMPARISON_HEADER}\n{self.line(f'{self.b} - {self.a}')}"

    def to_dict(self, *, arms: bool = True) -> dict[str, Any]:
        """JSON-ready record; ``arms=False`` leaves out ``a`` and ``b`` (the ``release compare --json``
        record, whose arms are the command's own options)."""
        record = plain(self)
        return record if arms else {key: value for key, value in record.items() if key not in ("a", "b")}


@dataclass(frozen=True)
class GateDelta:
    """Paired gate delta (masked − bare strict reward) with its 95 % bootstrap CI."""

    mean_difference: float
    ci95: tuple[float, float]


@dataclass(frozen=True)
class GateRound:
    """One gate round: chunks in / out, candidates, bare and masked validation, the gate delta and the
    matching ``analysis/rounds.csv`` row (``published``, empty when there is none)."""

    round: int
    step: int | None
    input_chunks: int
    selected_chunks: int
    candidates: int
    columns: int
    observations: int
    bare_strict: float
    bare_success: float
    masked_strict: float
    masked_success: float
    summary_masked_strict: float
    summary_masked_success: float
    gate_delta: GateDelta
    published: Mapping[str, str]


@dataclass(frozen=True)
class WandbReconciliation:
    """``training_steps.csv`` against the W&B rollout export: values compared and the largest error."""

    compared_numeric_values: int
    max_abs_error: float


@dataclass(frozen=True)
class Stats:
    """Count, mean, median, min and max of one metric."""

    n: int
    mean: float
    median: float
    min: float
    max: float


@dataclass(frozen=True)
class OptimizerRound:
    """Per-round statistics of the optimizer updates and the updates with a zero gradient norm."""

    round: int
    updates: int
    metrics: Mapping[str, Stats]
    zero_grad_updates: tuple[int, ...]


@dataclass(frozen=True)
class RolloutRound:
    """Per-round means of the W&B rollout metrics over ``steps`` rollout steps."""

    round: int
    steps: int
    means: Mapping[str, float]


@dataclass(frozen=True)
class GateRefit:
    """OLS refit of one gate's stored coefficients: design size, rank and the largest ``|Δβ|``."""

    round: str
    columns: int
    observations: int
    rank: int
    max_abs_diff: float


@dataclass(frozen=True)
class BootstrapSettings:
    """How the test and gate-delta CIs were computed."""

    method: str
    samples: int
    seed: int


@dataclass(frozen=True)
class ReleaseReanalysis:
    """Every headline number of the release, recomputed (build with
    :func:`~intraskill.analysis.release.reanalyse_release`).

    ``to_frame(part)`` gives one DataFrame per part of :data:`FRAMES`: ``conditions`` (one row per arm),
    ``comparisons`` (``name, a, b, success_diff/_lo/_hi, reward_diff/_lo/_hi`` and the transitions, the
    input of :func:`intraskill.plots.four_condition_results`), ``rounds`` (gate delta as
    ``gate_delta/_lo/_hi``), ``reconciliation``, ``refits``, ``optimizer`` (per-metric means) and
    ``rollout``.
    """

    artifacts_dir: str
    bootstrap: BootstrapSettings
    conditions: tuple[ConditionRow, ...]
    comparisons: Mapping[str, ArmComparison]
    rounds: tuple[GateRound, ...]
    wandb_reconciliation: WandbReconciliation
    optimizer_rounds: tuple[OptimizerRound, ...]
    rollout_rounds: tuple[RolloutRound, ...]
    gate_refits: tuple[GateRefit, ...]

    FRAMES = ("conditions", "comparisons", "rounds", "reconciliation", "refits", "optimizer", "rollout")

    @property
    def chunk_sequence(self) -> list[int]:
        """Bank sizes S₀, S₁, …: the first gate's input chunks, then each selected count."""
        if not self.rounds:
            return []
        return [self.rounds[0].input_chunks, *(r.selected_chunks for r in self.rounds)]

    def to_dict(self) -> dict[str, Any]:
        """The ``intraskill release reanalyse --json`` record (``test`` keyed by arm, ``comparisons``
        by name, rollout means inline)."""
        return {
            "artifacts_dir": self.artifacts_dir,
            "bootstrap": plain(self.bootstrap),
            "test": {row.arm: {k: v for k, v in plain(row).items() if k != "arm"} for row in self.conditions},
            "comparisons": {name: record.to_dict() for name, record in self.comparisons.items()},
            "rounds": plain(self.rounds),
            "chunk_sequence": self.chunk_sequence,
            "wandb_reconciliation": plain(self.wandb_reconciliation),
            "optimizer_rounds": plain(self.optimizer_rounds),
            "rollout_rounds": [{"round": r.round, "steps": r.steps, **r.means} for r in self.rollout_rounds],
            "gate_refits": plain(self.gate_refits),
        }

    def summary(self) -> str:
        """Readable text: test table, comparisons, gate rounds, bank sizes, reconciliation, refits."""
        lines = [f"Release: {self.artifacts_dir}\n",
                 f"{'arm':<12} {'reward':>9} {'success':>8} {'n':>4} {'|err| vs summary':>17}"]
        lines += [
            f"{row.arm:<12} {row.reward_mean:>9.6f} {100 * row.success_rate:>7.2f}% {row.n:>4} "
            f"{row.max_abs_error:>17.1e}"
            for row in self.conditions
        ]
        lines += ["", COMPARISON_HEADER, *(record.line(name) for name, record in self.comparisons.items())]
        lines += ["", ROUND_HEADER]
        for row in self.rounds:
            delta = row.gate_delta
            lines.append(
                f"{row.round:>5} {row.step:>4} {row.input_chunks:>3} {row.selected_chunks:>3} "
                f"{row.candidates:>4} {100 * row.bare_success:>8.2f}% {100 * row.masked_success:>6.2f}%  "
                f"{delta.mean_difference:+.4f} [{delta.ci95[0]:+.4f}, {delta.ci95[1]:+.4f}]"
            )
        recon = self.wandb_reconciliation
        lines += [
            f"\nchunks per bank: {' -> '.join(str(c) for c in self.chunk_sequence)}",
            f"W&B reconciliation: {recon.compared_numeric_values} values, max |error| {recon.max_abs_error}",
        ]
        lines += [
            f"refit {refit.round}: k={refit.columns} n={refit.observations} "
            f"max |dbeta|={refit.max_abs_diff:.2e}"
            for refit in self.gate_refits
        ]
        return "\n".join(lines)

    def to_frame(self, part: str = "conditions") -> "pd.DataFrame":
        """One part of the re-analysis as a DataFrame (``part``: one of :data:`FRAMES`)."""
        # deferred: pandas is heavy to import
        import pandas as pd

        if part not in self.FRAMES:
            raise KeyError(f"part: expected one of {self.FRAMES}, got {part!r}")
        return pd.DataFrame(getattr(self, f"_{part}_rows")())

    def _conditions_rows(self) -> list[dict[str, Any]]:
        return plain(self.conditions)

    def _comparisons_rows(self) -> list[dict[str, Any]]:
        rows = []
        for name, record in self.comparisons.items():
            row: dict[str, Any] = {"name": name, "a": record.a, "b": record.b}
            for prefix, metric in FRAME_METRICS:
                stats = record.metrics[metric]
                row[f"{prefix}_diff"] = stats.mean_difference
                row[f"{prefix}_lo"], row[f"{prefix}_hi"] = stats.ci95
            rows.append({**row, **record.transitions})
        return rows

    def _rounds_rows(self) -> list[dict[str, Any]]:
        rows = []
        for record in self.rounds:
            row = {k: v for k, v in plain(record).items() if k not in ("gate_delta", "published")}
            delta = record.gate_delta
            rows.append({**row, "gate_delta": delta.mean_difference, "gate_delta_lo": delta.ci95[0],
                         "gate_delta_hi": delta.ci95[1]})
        return rows

    def _reconciliation_rows(self) -> list[dict[str, Any]]:
        return [plain(self.wandb_reconciliation)]

    def _refits_rows(self) -> list[dict[str, Any]]:
        return plain(self.gate_refits)

    def _optimizer_rows(self) -> list[dict[str, Any]]:
        return [
            {"round": row.round, "updates": row.updates,
             **{f"{name} mean": stats.mean for name, stats in row.metrics.items()},
             "zero_grad_updates": list(row.zero_grad_updates)}
            for row in self.optimizer_rounds
        ]

    def _rollout_rows(self) -> list[dict[str, Any]]:
        return [{"round": row.round, "steps": row.steps, **row.means} for row in self.rollout_rounds]


def _pct(value: float) -> str:
    return f"{100 * value:+.2f}"
