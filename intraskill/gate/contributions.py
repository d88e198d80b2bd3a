"""Gate outputs: the pairing contract, ``contributions.json`` and the next (selected) SkillBank.

Reference: docs/method.md §5.3 (pairing contract), §5.4 (estimator), §5.5 (selection and next
bank), §5.6 (``contributions.json``, ``selected_skill.md``); docs/release.md §1.2 (the
``shopsimrl-online-chunk-contributions-v2`` schema of the release files).

The file keeps the release schema and adds per-metric inference the release did not compute:
``standard_errors``, ``conf_int_95`` and ``cov_type`` (HC3, or clustered by task when a task has
several masked rollouts), and ``additivity``: the test of the selected chunks' pairwise interactions on the
primary outcome (:mod:`intraskill.gate.additivity`). Selection still uses the point estimates only.

``bare_baseline.observations_sha256`` is the SHA-256 of the canonical JSON of the completed bare
observations ``[{episode_id, split, task_id, sample_id, reward}]`` sorted by (task_id, sample_id).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.gate.additivity import AdditivityTest, fit_additivity
from intraskill.gate.design import DESIGN_ONLINE, MaskAssignment, MaskJob
from intraskill.gate.ols import ESTIMATOR_NAME, PairedDeltaResult, fit_paired_delta
from intraskill.gate.selection import (
    ACTIVE_SKILL_BUDGET,
    ContributionRecord,
    ContributionStatus,
    SelectionResult,
    select_gate_a,
    select_online,
)
from intraskill.hashing import sha256_json
from intraskill.record import Record
from intraskill.shop.reward import PRIMARY_REWARD, PRIMARY_REWARD_COMPONENT
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.pool import CANDIDATE_VERSION, CandidatePool

if TYPE_CHECKING:
    import pandas as pd

CONTRIBUTIONS_SCHEMA_VERSION = "shopsimrl-online-chunk-contributions-v2"
ESTIMATOR = {
    "name": ESTIMATOR_NAME,
    "formula": "R_i - B_i = C_i^T beta + epsilon_i",
    "fit_intercept": False,
    "baseline": "same_task_bare_validation",
    "primary_outcome": PRIMARY_REWARD,
    "rewrite_rule": "mutually_exclusive_family_argmax_old_on_tie",
    "selection_rule": "rewrite_winners_then_strictly_positive_top_k",
}
REWARD_TOLERANCE = 1e-12
"""Largest allowed ``|reward − r_strict|`` of a completed trace (§5.3)."""
COMPLETED = "completed"


class PairingError(ValueError):
    """The bare and masked runs break the pairing contract; the message names the episode and rule."""


def provenance_signature(provenance: Mapping[str, Any]) -> str:
    """Hash of a trace's model, prompt, environment and runtime provenance (skills and seeds left out).

    Model ``transport`` and runtime ``concurrency`` are excluded, as in the bare-manifest comparison.
    """
    dropped = ("skills", "selected_skills", "seeds", "transport")
    kept = {k: v for k, v in provenance.items() if k not in dropped}
    if isinstance(kept.get("runtime"), Mapping):
        kept["runtime"] = {k: v for k, v in kept["runtime"].items() if k != "concurrency"}
    return sha256_json(kept)


@dataclass(frozen=True)
class GateRecord:
    """One attempt record of the bare or the masked run, reduced to what pairing checks.

    ``reward`` is the trace's reward dict (``reward`` plus every ``r_*``) or ``None`` when unscored;
    ``injected_ids`` are the injected skill IDs in prompt order.
    """

    episode_id: str
    split: str
    task_id: int
    sample_id: int
    status: str
    injected_ids: tuple[str, ...] = ()
    reward: dict[str, float] | None = None
    provenance_signature: str | None = None

    @classmethod
    def from_trace(cls, trace: Any, split: str) -> "GateRecord":
        """From an :class:`~intraskill.agent.traces.EpisodeTrace` or its dict.

        Injected IDs come from ``provenance.selected_skills``.
        """
        data = trace.to_dict() if hasattr(trace, "to_dict") else dict(trace)
        provenance = data.get("provenance") or {}
        injected = tuple(s["skill_id"] for s in provenance.get("selected_skills") or [])
        return cls(episode_id=data["episode_id"], split=split, task_id=int(data["task_id"]),
                   sample_id=int(data["sample_id"]), status=data["status"], injected_ids=injected,
                   reward=data.get("reward"), provenance_signature=provenance_signature(provenance))


@dataclass(frozen=True)
class PairedObservation:
    """One complete pair: the masked and bare reward dicts of the same (task, sample) job."""

    episode_id: str
    split: str
    task_id: int
    sample_id: int
    mask: tuple[int, ...]
    included_chunk_ids: tuple[str, ...]
    reward: dict[str, float]
    bare_reward: dict[str, float]

    @property
    def components(self) -> list[str]:
        """The ``r_*`` keys, sorted."""
        return sorted(k for k in self.reward if k != PRIMARY_REWARD)

    def to_row(self) -> dict[str, Any]:
        """The release ``observations_table`` row (deltas computed here)."""
        detail = {k: self.reward[k] for k in self.components}
        bare_detail = {k: self.bare_reward[k] for k in self.components}
        return {
            "episode_id": self.episode_id,
            "split": self.split,
            "task_id": self.task_id,
            "sample_id": self.sample_id,
            "mask": list(self.mask),
            "included_chunk_ids": list(self.included_chunk_ids),
            "reward": self.reward[PRIMARY_REWARD],
            "bare_reward": self.bare_reward[PRIMARY_REWARD],
            "delta_reward": self.reward[PRIMARY_REWARD] - self.bare_reward[PRIMARY_REWARD],
            "reward_detail": detail,
            "bare_reward_detail": bare_detail,
            "delta_reward_detail": {k: detail[k] - bare_detail[k] for k in self.components},
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "PairedObservation":
        """Parse a release ``observations_table`` row."""
        return cls(episode_id=row["episode_id"], split=row["split"], task_id=int(row["task_id"]),
                   sample_id=int(row["sample_id"]), mask=tuple(int(v) for v in row["mask"]),
                   included_chunk_ids=tuple(row["included_chunk_ids"]),
                   reward={PRIMARY_REWARD: float(row["reward"]), **row["reward_detail"]},
                   bare_reward={PRIMARY_REWARD: float(row["bare_reward"]), **row["bare_reward_detail"]})


@dataclass(frozen=True)
class PairingResult:
    """Complete pairs (sorted by task, sample), dropped episode IDs and the bare run's own outcomes."""

    observations: list[PairedObservation]
    dropped_episode_ids: list[str]
    requested_observations: int
    bare_rewards: dict[str, dict[str, float]] = field(default_factory=dict)
    """Episode ID → reward dict of every completed bare record (pairs or not)."""


def _final_records(records: Sequence[GateRecord], side: str) -> dict[str, GateRecord]:
    """The deciding record per episode: the completed one, else the last attempt."""
    final: dict[str, GateRecord] = {}
    for record in records:
        previous = final.get(record.episode_id)
        if previous is not None and previous.status == COMPLETED:
            raise PairingError(
                f"{side} {record.episode_id}: a record follows a completed record (duplicate completed "
                "records are an error; the gate never takes the latest of several)")
        final[record.episode_id] = record
    return final


def _check_reward(record: GateRecord, side: str) -> None:
    reward = record.reward
    if not isinstance(reward, Mapping) or PRIMARY_REWARD not in reward or PRIMARY_REWARD_COMPONENT not in reward:
        raise PairingError(
            f"{side} {record.episode_id}: completed without a reward dict holding reward and r_strict")
    for key, value in reward.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise PairingError(
                f"{side} {record.episode_id}: reward component {key} is not finite ({value!r})")
    gap = abs(reward[PRIMARY_REWARD] - reward[PRIMARY_REWARD_COMPONENT])
    if gap > REWARD_TOLERANCE:
        raise PairingError(f"{side} {record.episode_id}: reward differs from r_strict by {gap:.3g} (> 1e-12)")


def _check_keys(record: GateRecord, job: MaskJob, side: str) -> None:
    got = (record.split, record.task_id, record.sample_id)
    want = (job.split, job.task_id, job.sample_id)
    if got != want:
        raise PairingError(f"{side} {record.episode_id}: job key (split, task_id, sample_id) {got} != {want}")


def pair_records(
    assignment: MaskAssignment, bare: Sequence[GateRecord], masked: Sequence[GateRecord]
) -> PairingResult:
    """Check the §5.3 pairing contract and pair the bare and masked runs of one gate.

    Raises :class:`PairingError` when the bare job set differs from the assignment's, a masked record
    is not an assignment job, a job key differs, a bare trace carries skills, a masked trace's injected
    IDs differ from ``included_chunk_ids``, a completed reward is non-finite or ``reward ≠ r_strict``
    beyond 1e-12, the two sides have different reward keys, provenance signatures differ across pairs,
    a record follows a completed record of the same episode, or no pair is complete. Pairs with a
    still-incomplete side are dropped into ``dropped_episode_ids``.
    """
    jobs = {job.episode_id: job for job in assignment.jobs}
    bare_final = _final_records(bare, "bare")
    masked_final = _final_records(masked, "masked")
    if set(bare_final) != set(jobs):
        extra, missing = sorted(set(bare_final) - set(jobs)), sorted(set(jobs) - set(bare_final))
        raise PairingError(
            f"bare job set differs from the mask assignment: extra {extra[:5]}, missing {missing[:5]}")
    stray = sorted(set(masked_final) - set(jobs))
    if stray:
        raise PairingError(f"masked records for episodes outside the mask assignment: {stray[:5]}")
    bare_rewards: dict[str, dict[str, float]] = {}
    for record in bare_final.values():
        _check_keys(record, jobs[record.episode_id], "bare")
        if record.status == COMPLETED:
            if record.injected_ids:
                raise PairingError(
                    f"bare {record.episode_id}: the bare trace has skills {list(record.injected_ids)}")
            _check_reward(record, "bare")
            bare_rewards[record.episode_id] = {k: float(v) for k, v in record.reward.items()}
    observations, dropped, signatures = [], [], set()
    for job in sorted(jobs.values(), key=lambda j: (j.task_id, j.sample_id)):
        bare_record, masked_record = bare_final[job.episode_id], masked_final.get(job.episode_id)
        if masked_record is not None:
            _check_keys(masked_record, job, "masked")
        if masked_record is None or masked_record.status != COMPLETED or bare_record.status != COMPLETED:
            dropped.append(job.episode_id)
            continue
        if masked_record.injected_ids != job.included_chunk_ids:
            raise PairingError(f"masked {job.episode_id}: injected ids {list(masked_record.injected_ids)} != "
                               f"included_chunk_ids {list(job.included_chunk_ids)}")
        _check_reward(masked_record, "masked")
        if set(masked_record.reward) != set(bare_record.reward):
            raise PairingError(f"{job.episode_id}: masked and bare reward keys differ")
        signatures |= {r.provenance_signature for r in (bare_record, masked_record) if r.provenance_signature}
        if len(signatures) > 1:
            raise PairingError(
                f"{job.episode_id}: model/prompt/environment/runtime provenance differs across pairs")
        observations.append(PairedObservation(
            job.episode_id, job.split, job.task_id, job.sample_id, job.mask, job.included_chunk_ids,
            {k: float(v) for k, v in masked_record.reward.items()}, bare_rewards[job.episode_id]))
    if not observations:
        raise PairingError("no complete (bare, masked) pair: nothing to fit")
    return PairingResult(observations, dropped, len(jobs), bare_rewards)


class BareBaseline(Record):
    """The ``bare_baseline`` block of ``contributions.json`` and of a selected bank's metadata: the bare run
    (its directory, plan fingerprint and checkpoint), the digest and count of its completed observations, and
    their mean outcome per metric."""

    run_dir: str
    plan_fingerprint: str
    observations_sha256: str
    observations: int
    requested_observations: int
    dropped_observations: int
    checkpoint_id: str
    mean_outcomes: dict[str, float]


def bare_baseline_block(
    pairing: PairingResult,
    assignment: MaskAssignment,
    *,
    run_dir: str,
    plan_fingerprint: str,
    checkpoint_id: str,
) -> BareBaseline:
    """The ``bare_baseline`` block: the bare run's own completed observations and their means.

    The block enters the selected bank, whose SHA-256 enters the next curriculum's ``state_id`` (never its
    draws, :func:`~intraskill.skills.curriculum.draw_key`): pass ``run_dir`` relative to the gate directory
    (the release recorded an absolute path), so that the bank's digest does not depend on where the run lives.
    """
    jobs = {job.episode_id: job for job in assignment.jobs}
    completed = sorted(pairing.bare_rewards, key=lambda e: (jobs[e].task_id, jobs[e].sample_id))
    table = [{"episode_id": e, "split": jobs[e].split, "task_id": jobs[e].task_id,
              "sample_id": jobs[e].sample_id, "reward": pairing.bare_rewards[e]} for e in completed]
    metrics = sorted(pairing.bare_rewards[completed[0]]) if completed else []
    return BareBaseline(
        run_dir=run_dir,
        plan_fingerprint=plan_fingerprint,
        observations_sha256=sha256_json(table),
        observations=len(completed),
        requested_observations=pairing.requested_observations,
        dropped_observations=pairing.requested_observations - len(completed),
        checkpoint_id=checkpoint_id,
        mean_outcomes={m: sum(pairing.bare_rewards[e][m] for e in completed) / len(completed) for m in metrics},
    )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _interval(pair: Sequence[float | None]) -> tuple[float | None, float | None]:
    low, high = pair
    return (None if low is None else float(low), None if high is None else float(high))


@dataclass(frozen=True)
class MetricEstimate:
    """One metric's paired-delta fit, as ``contributions.json`` stores it under ``estimates``.

    ``standard_errors``, ``conf_int_95`` and ``cov_type`` are ``None`` for the release files, which
    computed no inference; non-finite errors are ``None``. ``fit`` is the live
    :class:`~intraskill.gate.ols.PairedDeltaResult` when fitted in this process, ``None`` once loaded.
    """

    coefficients: dict[str, float]
    observations: int
    masked_mean: float
    bare_mean: float
    delta_mean: float
    standard_errors: dict[str, float | None] | None = None
    conf_int_95: dict[str, tuple[float | None, float | None]] | None = None
    cov_type: str | None = None
    fit: PairedDeltaResult | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_fit(cls, fit: PairedDeltaResult, masked: Sequence[float], bare: Sequence[float]) -> "MetricEstimate":
        """The estimate of ``fit`` with the masked and bare outcome means."""
        masked_mean, bare_mean = sum(masked) / len(masked), sum(bare) / len(bare)
        return cls(coefficients={c: fit.params[c] for c in fit.columns}, observations=fit.nobs,
                   masked_mean=masked_mean, bare_mean=bare_mean, delta_mean=masked_mean - bare_mean,
                   standard_errors={c: _finite(fit.bse[c]) for c in fit.columns},
                   conf_int_95={c: (_finite(lo), _finite(hi)) for c, (lo, hi) in fit.conf_int(0.05).items()},
                   cov_type=fit.cov_type, fit=fit)

    @property
    def columns(self) -> list[str]:
        """Intervention ids in design-column order."""
        return list(self.coefficients)

    def to_dict(self) -> dict[str, Any]:
        """The ``estimates.<metric>`` record (release key order, inference keys when present)."""
        record: dict[str, Any] = {
            "intercept": 0.0, "coefficients": dict(self.coefficients), "observations": self.observations,
            "masked_mean": self.masked_mean, "bare_mean": self.bare_mean, "delta_mean": self.delta_mean}
        if self.cov_type is not None:
            record.update(standard_errors=dict(self.standard_errors or {}),
                          conf_int_95={c: list(ci) for c, ci in (self.conf_int_95 or {}).items()},
                          cov_type=self.cov_type)
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MetricEstimate":
        """Parse an ``estimates.<metric>`` record."""
        intervals = data.get("conf_int_95")
        return cls(coefficients={c: float(b) for c, b in data["coefficients"].items()},
                   observations=int(data["observations"]), masked_mean=float(data["masked_mean"]),
                   bare_mean=float(data["bare_mean"]), delta_mean=float(data["delta_mean"]),
                   standard_errors=data.get("standard_errors"),
                   conf_int_95=None if intervals is None else {c: _interval(ci) for c, ci in intervals.items()},
                   cov_type=data.get("cov_type"))


@dataclass(frozen=True)
class GateContributions:
    """The gate's result: a :class:`MetricEstimate` per metric, the selection and the pairs behind them.

    JSON only at the edges: :meth:`to_json` / :meth:`from_json` write and read the release's
    ``contributions.json`` schema (:func:`save_contributions`, :func:`load_contributions`). ``additivity`` is
    ``None`` for the release files (:meth:`additivity_test` computes it from their rows).
    """

    estimates: dict[str, MetricEstimate]
    selection: SelectionResult
    observations_table: tuple[PairedObservation, ...]
    bare_baseline: BareBaseline
    pool_sha256: str
    assignment_sha256: str
    requested_observations: int
    dropped_episode_ids: tuple[str, ...]
    active_skill_budget: int
    created_at: str
    estimator: dict[str, Any] = field(default_factory=lambda: dict(ESTIMATOR))
    schema_version: str = CONTRIBUTIONS_SCHEMA_VERSION
    additivity: AdditivityTest | None = None

    @property
    def primary(self) -> MetricEstimate:
        """The estimate of the primary outcome (``reward``), the one selection uses."""
        return self.estimates[PRIMARY_REWARD]

    @property
    def columns(self) -> list[str]:
        """Intervention ids in design-column order."""
        return self.primary.columns

    @property
    def observations(self) -> int:
        """Complete pairs fitted."""
        return len(self.observations_table)

    @property
    def contributions(self) -> list[ContributionRecord]:
        """One record per design column: β, rank and status (column order)."""
        return self.selection.contributions

    @property
    def selected_intervention_ids(self) -> list[str]:
        """The kept top-K, in column order."""
        return self.selection.selected_intervention_ids

    @property
    def selected_count(self) -> int:
        """Number of kept interventions (≤ ``active_skill_budget``)."""
        return self.selection.selected_count

    @property
    def replacement_winners(self) -> dict[str, str]:
        """Slot id → the version that won its family."""
        return self.selection.replacement_winners

    @property
    def estimator_name(self) -> str:
        """The estimator's name (``paired_delta_ols_main_effects_no_intercept``)."""
        return str(self.estimator["name"])

    @property
    def bare_observations_sha256(self) -> str:
        """Hash of the bare run's completed observations (``bare_baseline.observations_sha256``)."""
        return self.bare_baseline.observations_sha256

    def additivity_test(self, metric: str = PRIMARY_REWARD, chunks: Sequence[str] | None = None) -> AdditivityTest:
        """The additivity test of ``metric`` on the stored rows, over ``chunks`` (default: the selected ones)."""
        return _additivity(self.observations_table, metric, self.columns,
                           self.selected_intervention_ids if chunks is None else chunks)

    def record(self, intervention_id: str) -> ContributionRecord:
        """The contribution record of one design column."""
        for record in self.contributions:
            if record.intervention_id == intervention_id:
                return record
        raise KeyError(f"{intervention_id}: not a design column of this gate")

    def to_frame(self) -> "pd.DataFrame":
        """One row per design column: its record, the primary β's SE and 95 % CI, and every auxiliary β."""
        # deferred: pandas is heavy to import
        import pandas as pd

        primary, auxiliary = self.primary, [m for m in self.estimates if m != PRIMARY_REWARD]
        rows = []
        for record in self.contributions:
            ident = record.intervention_id
            low, high = (primary.conf_int_95 or {}).get(ident, (None, None))
            rows.append({**record.to_dict(), "std_err": (primary.standard_errors or {}).get(ident),
                         "ci_lo": low, "ci_hi": high,
                         **{f"beta_{m}": self.estimates[m].coefficients[ident] for m in auxiliary}})
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """A readable text table: the fit's header, one line per design column, the selection."""
        primary = self.primary
        cov = primary.cov_type or "none stored"
        header = [
            f"Gate contributions ({self.estimator_name})",
            (f"observations: {self.observations} of {self.requested_observations} requested "
             f"({len(self.dropped_episode_ids)} dropped); columns: {len(self.columns)}; covariance: {cov}"),
            (f"{PRIMARY_REWARD}: bare {primary.bare_mean:.4f}, masked {primary.masked_mean:.4f}, "
             f"delta {primary.delta_mean:+.4f}"),
        ]
        width = max([len("intervention")] + [len(c) for c in self.columns])
        table = [(f"{'intervention':<{width}}  {'kind':<9}  {'op':<7}  {'coef':>8}  {'std err':>8}  "
                  f"{'[0.025':>8}  {'0.975]':>8}  {'rank':>4}  status")]
        for record in self.contributions:
            ident = record.intervention_id
            se = (primary.standard_errors or {}).get(ident)
            low, high = (primary.conf_int_95 or {}).get(ident, (None, None))
            cells = [_cell(v) for v in (record.coefficient, se, low, high)]
            rank = "" if record.rank is None else str(record.rank)
            table.append(f"{ident:<{width}}  {record.kind:<9}  {record.operation or '':<7}  "
                         f"{'  '.join(cells)}  {rank:>4}  {record.status.value}")
        rule = "=" * max(len(line) for line in table)
        kept = ", ".join(self.selected_intervention_ids) or "none"
        footer = [f"selected {self.selected_count} (budget K = {self.active_skill_budget}): {kept}"]
        if self.additivity is not None:
            footer += self.additivity.summary_lines()
        return "\n".join([rule, *header, rule.replace("=", "-"), *table, rule, *footer])

    def to_json(self) -> dict[str, Any]:
        """The ``contributions.json`` object (release key order)."""
        auxiliary = [m for m in self.estimates if m != PRIMARY_REWARD]
        records = [{**record.to_dict(), "auxiliary_coefficients": {
            m: self.estimates[m].coefficients[record.intervention_id] for m in auxiliary}}
            for record in self.contributions]
        return {
            "schema_version": self.schema_version,
            "created_at": self.created_at,
            "estimator": dict(self.estimator),
            "pool_sha256": self.pool_sha256,
            "assignment_sha256": self.assignment_sha256,
            "observations": self.observations,
            "requested_observations": self.requested_observations,
            "dropped_episode_ids": list(self.dropped_episode_ids),
            "active_skill_budget": self.active_skill_budget,
            "selected_intervention_ids": list(self.selected_intervention_ids),
            "selected_count": self.selected_count,
            "replacement_winners": dict(self.replacement_winners),
            "estimates": {m: estimate.to_dict() for m, estimate in self.estimates.items()},
            "contributions": records,
            "observations_table": [obs.to_row() for obs in self.observations_table],
            "bare_baseline": self.bare_baseline.to_dict(),
            **({} if self.additivity is None else {"additivity": self.additivity.to_dict()}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "GateContributions":
        """Parse a ``contributions.json`` object (the release files and the ones this gate writes)."""
        try:
            selection = SelectionResult(
                contributions=[ContributionRecord.from_dict(r) for r in data["contributions"]],
                replacement_winners=dict(data["replacement_winners"]),
                selected_intervention_ids=list(data["selected_intervention_ids"]))
            return cls(
                estimates={m: MetricEstimate.from_dict(e) for m, e in data["estimates"].items()},
                selection=selection,
                observations_table=tuple(PairedObservation.from_row(r) for r in data["observations_table"]),
                bare_baseline=BareBaseline.from_dict(data["bare_baseline"], "contributions.json bare_baseline"),
                pool_sha256=data["pool_sha256"],
                assignment_sha256=data["assignment_sha256"],
                requested_observations=int(data["requested_observations"]),
                dropped_episode_ids=tuple(data["dropped_episode_ids"]),
                active_skill_budget=int(data["active_skill_budget"]),
                created_at=data["created_at"],
                estimator=dict(data["estimator"]),
                schema_version=data["schema_version"],
                additivity=AdditivityTest.from_dict(data["additivity"]) if "additivity" in data else None)
        except KeyError as error:
            raise ValueError(f"contributions lacks the field {error}") from error


def _cell(value: float | None) -> str:
    return f"{'—':>8}" if value is None else f"{value:>8.4f}"


def _deltas(observations: Sequence[PairedObservation], metric: str) -> list[float]:
    return [obs.reward[metric] - obs.bare_reward[metric] for obs in observations]


def _estimate(observations: Sequence[PairedObservation], metric: str, columns: list[str]) -> MetricEstimate:
    fit = fit_paired_delta([list(obs.mask) for obs in observations], _deltas(observations, metric), columns,
                           clusters=[obs.task_id for obs in observations])
    return MetricEstimate.from_fit(fit, [obs.reward[metric] for obs in observations],
                                   [obs.bare_reward[metric] for obs in observations])


def _additivity(observations: Sequence[PairedObservation], metric: str, columns: Sequence[str],
                chunks: Sequence[str]) -> AdditivityTest:
    return fit_additivity([list(obs.mask) for obs in observations], _deltas(observations, metric), columns, chunks,
                          clusters=[obs.task_id for obs in observations], metric=metric)


def _check_observations(assignment: MaskAssignment, observations: Sequence[PairedObservation]) -> list[str]:
    if not observations:
        raise PairingError("observations: empty")
    metrics = sorted(observations[0].reward)
    for obs in observations:
        job = assignment.job(obs.episode_id)
        if obs.mask != job.mask or obs.included_chunk_ids != job.included_chunk_ids:
            raise PairingError(
                f"{obs.episode_id}: mask or included_chunk_ids differ from the mask assignment")
        if sorted(obs.reward) != metrics or sorted(obs.bare_reward) != metrics:
            raise PairingError(f"{obs.episode_id}: reward keys differ from {metrics}")
    if PRIMARY_REWARD not in metrics:
        raise PairingError(f"observations: reward dicts lack {PRIMARY_REWARD!r}")
    return metrics


def _select(assignment: MaskAssignment, coefficients: Mapping[str, float], budget: int) -> SelectionResult:
    if assignment.design == DESIGN_ONLINE:
        return select_online(assignment.interventions(), coefficients, budget=budget)
    return select_gate_a(assignment.columns, coefficients, budget=budget)


def build_contributions(
    assignment: MaskAssignment,
    observations: Sequence[PairedObservation],
    *,
    bare_baseline: BareBaseline,
    dropped_episode_ids: Sequence[str] = (),
    requested_observations: int | None = None,
    active_skill_budget: int = ACTIVE_SKILL_BUDGET,
    created_at: str | None = None,
) -> GateContributions:
    """Fit every metric and select: the gate's :class:`GateContributions`.

    Parameters
    ----------
    assignment : MaskAssignment
        The design; every observation's mask must equal its job's.
    observations : sequence of PairedObservation
        Complete pairs (from :func:`pair_records`, or release rows via :meth:`PairedObservation.from_row`).
    bare_baseline : BareBaseline
        The ``bare_baseline`` block (:func:`bare_baseline_block`).
    requested_observations : int, optional
        Defaults to the number of assignment jobs.
    """
    metrics = _check_observations(assignment, observations)
    estimates = {metric: _estimate(observations, metric, assignment.columns) for metric in metrics}
    selection = _select(assignment, estimates[PRIMARY_REWARD].coefficients, active_skill_budget)
    return GateContributions(
        estimates=estimates,
        selection=selection,
        additivity=_additivity(observations, PRIMARY_REWARD, assignment.columns,
                               selection.selected_intervention_ids),
        observations_table=tuple(observations),
        bare_baseline=bare_baseline,
        pool_sha256=assignment.pool_sha256,
        assignment_sha256=assignment.assignment_sha256,
        requested_observations=(
            len(assignment.jobs) if requested_observations is None else requested_observations),
        dropped_episode_ids=tuple(dropped_episode_ids),
        active_skill_budget=active_skill_budget,
        created_at=created_at or datetime.now(timezone.utc).isoformat(),
    )


def save_contributions(contributions: GateContributions, path: str | Path) -> Path:
    """Write ``contributions.json`` as the release does (``indent=2``, ASCII, no trailing newline)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(contributions.to_json(), indent=2), encoding="utf-8")
    return path


def load_contributions(path: str | Path) -> GateContributions:
    """Read a ``contributions.json`` (a release file or one :func:`save_contributions` wrote)."""
    return GateContributions.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def _winner_skill(slot: str, record: ContributionRecord, pool: CandidatePool) -> Skill:
    gate_fields = {"validation_result": record.status.value, "estimated_effect": record.coefficient,
                   "contribution_rank": record.rank, "selected_intervention_id": record.intervention_id}
    if record.kind == "current":
        skill = pool.current_skill(record.intervention_id)
        return Skill(skill_id=slot, content=skill.content, version=skill.version,
                     metadata={**skill.metadata, **gate_fields})
    candidate = pool.candidate(record.intervention_id)
    origin = {"operation": candidate.operation}
    if candidate.operation == "REWRITE":
        origin["target_chunk_id"] = candidate.target_chunk_id
    return Skill(skill_id=slot, content=candidate.content, version=CANDIDATE_VERSION,
                 metadata={**candidate.metadata, **origin, **gate_fields})


def selection_metadata(contributions: GateContributions) -> dict[str, Any]:
    """The gate fields a selected bank records in its metadata."""
    return {
        "assignment_sha256": contributions.assignment_sha256,
        "active_skill_budget": contributions.active_skill_budget,
        "selected_count": contributions.selected_count,
        "selected_intervention_ids": list(contributions.selected_intervention_ids),
        "estimator": dict(contributions.estimator),
        "bare_baseline": contributions.bare_baseline.to_dict(),
    }


def selected_skillbank(contributions: GateContributions, pool: CandidatePool, *, round_id: str) -> SkillBank:
    """The next bank (``online-<round>-selected-v1``): selected winners in slot order, under logical IDs.

    A winning rewrite's content enters under the target's ``skill_id``; chunk metadata gains
    ``validation_result``, ``estimated_effect`` (β), ``contribution_rank`` and ``selected_intervention_id``.
    """
    if contributions.pool_sha256 != pool.pool_sha256:
        raise ValueError(
            f"pool_sha256: contributions were fitted on pool {contributions.pool_sha256!r}, "
            f"not on {pool.pool_sha256!r}")
    skills = []
    for slot in dict.fromkeys(r.logical_chunk_id for r in contributions.contributions):
        winner = contributions.record(contributions.replacement_winners[slot])
        if winner.status is ContributionStatus.SELECTED:
            skills.append(_winner_skill(slot, winner, pool))
    metadata = {"round_id": round_id, "proposal_checkpoint": pool.proposal_checkpoint,
                "pool_sha256": pool.pool_sha256, **selection_metadata(contributions)}
    return SkillBank(bank_version=f"online-{round_id}-selected-v1", skills=tuple(skills), metadata=metadata)


def selected_skill_markdown(bank: SkillBank) -> str:
    """``selected_skill.md``: a heading, a note, then the chunk contents joined by blank lines."""
    budget = bank.metadata.get("active_skill_budget", ACTIVE_SKILL_BUDGET)
    note = (f"> {len(bank.skills)} chunk(s) selected by the paired validation gate "
            f"(strictly positive top-{budget}, slot order).")
    body = "\n\n".join(skill.content.strip() for skill in bank.skills)
    return f"# Selected skill: {bank.bank_version}\n\n{note}\n\n{body}\n"
