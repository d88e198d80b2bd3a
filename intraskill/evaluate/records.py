"""The evaluation records that cross stages and files, typed: a run's summary (``summary.json``,
``shopsimrl-eval-summary-v2``) and the paired comparison of two runs (``comparison.json``,
``shopsimrl-paired-run-comparison-v1``).

Each is a :class:`~intraskill.record.Record`; the JSON keeps the shape the release's files have, so the shipped
records and old run directories load as their types.
"""

from __future__ import annotations

from typing import Any, Literal

from intraskill.record import Record

SUMMARY_SCHEMA_VERSION = "shopsimrl-eval-summary-v2"
COMPARISON_SCHEMA_VERSION = "shopsimrl-paired-run-comparison-v1"
Kind = Literal["same-checkpoint", "cross-checkpoint"]


class SummaryCounts(Record):
    """Episodes asked for and recorded; ``coverage = scored / requested``."""

    requested: int
    trace_files: int
    completed: int
    failed: int
    scored: int
    coverage: float


class SummaryPrimary(Record):
    """Mean strict reward, its standard error (``None`` under two episodes) and the success rate."""

    reward_mean: float | None
    reward_sem: float | None
    success_rate: float | None


class SummaryBehavior(Record):
    """Model turns, protocol errors and policy failures (per turn), invalid actions (per action), terminations."""

    steps_mean: float | None
    model_steps: int
    protocol_errors: int
    protocol_error_rate: float | None
    policy_failures: int
    policy_failure_rate: float | None
    invalid_action_rate: float | None
    invalid_actions: int
    total_actions: int
    termination_reasons: dict[str, int]


class TokenCounts(Record):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int


class SummaryCost(Record):
    duration_ms_mean: float | None
    tokens: TokenCounts


class EvalSummary(Record):
    """A run's ``summary.json`` (:func:`~intraskill.evaluate.summary.summarize`)."""

    schema_version: Literal[SUMMARY_SCHEMA_VERSION] = SUMMARY_SCHEMA_VERSION
    created_at: str
    counts: SummaryCounts
    primary: SummaryPrimary
    reward_components: dict[str, float | None]
    behavior: SummaryBehavior
    cost: SummaryCost
    errors: dict[str, int]


class PairedMetric(Record):
    """One metric of a paired comparison: the two means, ``b − a`` and its bootstrap interval over tasks."""

    a_mean: float
    b_mean: float
    mean_difference: float
    confidence_interval: tuple[float, float]
    pairs: int


class BootstrapSettings(Record):
    method: Literal["task_level_paired_percentile"] = "task_level_paired_percentile"
    samples: int
    seed: int
    confidence_level: float


class PairedBlock(Record):
    """The task-paired part of a comparison: per metric :class:`PairedMetric`, and the success transitions
    (``"0->1"``: tasks fixed, ``"1->0"``: broken, …)."""

    pairs: int
    difference_direction: Literal["b_minus_a"] = "b_minus_a"
    metric_aggregation: Literal["mean_of_task_level_values"] = "mean_of_task_level_values"
    bootstrap: BootstrapSettings
    metrics: dict[str, PairedMetric]
    success_transitions: dict[str, int]

    def metric(self, name: str) -> PairedMetric:
        """The paired result of one metric (``KeyError`` naming the metrics there are)."""
        if name not in self.metrics:
            raise KeyError(f"comparison: no metric {name!r} (has {sorted(self.metrics)})")
        return self.metrics[name]


class RunPair(Record):
    a: str
    b: str


class PlanAlignment(Record):
    status: Literal["matched"] = "matched"
    kind: Kind
    checked_fields: list[str]
    a_plan_fingerprint: str
    b_plan_fingerprint: str


class TraceAlignment(Record):
    """The trace block (:func:`~intraskill.evaluate.compare.check_traces`): the pairs, the provenance fields
    checked, and per run (``a``, ``b``) its skill IDs, the episodes without a skill (only for a run whose episodes
    select their own skills, which then lists every skill selected) and each checked field's distinct values."""

    omit_when_none = frozenset({"a_bare_episodes", "b_bare_episodes"})

    status: Literal["matched"] = "matched"
    pairs: int
    checked_fields: list[str]
    a_skill_ids: list[str]
    a_bare_episodes: int | None = None
    a: dict[str, list[Any]]
    b_skill_ids: list[str]
    b_bare_episodes: int | None = None
    b: dict[str, list[Any]]


class Alignment(Record):
    """The plan block and the trace block."""

    plan: PlanAlignment
    traces: TraceAlignment


class PairedComparison(Record):
    """Two runs aligned and compared task by task (``b − a``, :func:`~intraskill.evaluate.compare.compare_runs`)."""

    schema_version: Literal[COMPARISON_SCHEMA_VERSION] = COMPARISON_SCHEMA_VERSION
    created_at: str
    kind: Kind
    runs: RunPair
    alignment: Alignment
    absolute: dict[Literal["a", "b"], EvalSummary]
    paired: PairedBlock

    def metric(self, name: str) -> PairedMetric:
        """The paired result of one metric (:meth:`PairedBlock.metric`)."""
        return self.paired.metric(name)
