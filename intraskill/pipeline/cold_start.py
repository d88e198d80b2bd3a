"""The cold start: S₀ induced from the base policy's train traces (``intraskill cold-start``).

Reference: docs/method.md §4.4 (traces → analysis → consolidation → compile → Gate A), §4.1 (the roles)
and docs/release.md §1.2 (``cold-start/analysis_summary.json``: input {failure, success, total},
``unique_analyzed``, ``evidence_cards``, ``missing``, ``error_count``). Stages, each recorded in
``stages/<stage>.json`` with the fingerprint of its inputs, its counts, its cost (episodes, tokens, wall time)
and the SHA-256 of its outputs; a stage whose record matches its inputs and whose outputs still hash as recorded
is skipped, and a killed stage resumes where it stopped:

1. ``rollouts`` — ``cold_start.trajectories`` train tasks, one bare rollout each, by the base policy
   (``rollouts/``, the evaluator's resumable run);
2. ``analysis`` — the last completed record of each episode: successes to the Success Analyst
   (``success_cards.jsonl``, one record per trajectory), failures to the gold-aware Failure Analyst in a live
   session, no current skill, so ADD only (``failure_cards.jsonl``); appended with fsync, analyzed ones skipped;
3. ``firewall`` — every card with its channel and eligibility (``evidence_cards.jsonl``): failure cards carry
   the analyst's firewall findings and downgrades, success cards the firewall over their lesson fields;
4. ``consolidation`` — per channel, eligible cards in batches, each batch's clusters (``cluster_batches.jsonl``,
   one record per batch, every card once);
5. ``compile`` — all clusters → the draft (``initial_skill_draft.json``, ``initial_skillbank.json``,
   ``initial_skill_draft.md``, the pre-validation ADD ledger ``proposal_ledger.jsonl``, and
   ``compiler_invalid_attempts.jsonl`` for an LLM compiler);
6. ``gate_a`` — Gate A on val (``gate-a/``, :func:`~intraskill.pipeline.gate_run.run_gate_a`); its selected bank
   is the active S₀, copied to ``selected_skillbank.json`` (usable as ``round.skillbank``);
7. ``gate_b`` — Gate B (§4.4 step 6): the base policy on test, bare (``gate-b/bare``) and with the active S₀
   (``gate-b/s0``), compared task by task (``gate-b/comparison.json`` and ``.md``, S₀ − bare); it only reports.

The directory's ``plan.json`` (the parameters, the cold-start section, the analyst and the base checkpoint)
refuses a different plan. ``analysis_summary.json`` and ``cold_start_manifest.json`` (status, counts and cost per
stage and in total, output hashes) are written at the end. A stage's wall time adds the calls an exception or
an interrupt ended (``stages/<stage>.interrupted.json``) to the one that finished it; a process killed outright
loses its part.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from intraskill.agent.traces import EpisodeTrace, read_traces
from intraskill.evaluate.records import EvalSummary
from intraskill.evaluate.runner import run_eval
from intraskill.evaluate.summary import final_records
from intraskill.hashing import sha256_file, sha256_json
from intraskill.jsonl import JsonlWriter, iter_jsonl, write_json
from intraskill.layout import ColdStartDir, EvalDir, round_id
from intraskill.params import ExperimentParams, Params, plan_dump, section_plan
from intraskill.paths import runs_root
from intraskill.pipeline.gate_b import RUNS as GATE_B_RUNS
from intraskill.pipeline.gate_b import GateBResult, read_gate_b, run_gate_b
from intraskill.pipeline.gate_run import GateConfig, run_gate_a
from intraskill.pipeline.round import open_train_store
from intraskill.policy.factory import weights_digest
from intraskill.policy.warmstarts import resolve_checkpoint
from intraskill.provenance import write_plan
from intraskill.record import Record
from intraskill.shop.engine import ShopEngine
from intraskill.skills.bank import SkillBank, load_skillbank, save_skillbank
from intraskill.trace2skill.analysts import AnalystSettings, ColdStartRoles, RoleCost, open_cold_start_roles
from intraskill.trace2skill.cards import STAGE_COLD_START, FailureCard
from intraskill.trace2skill.compact import gold_lookup, replay_trace
from intraskill.trace2skill.consolidation import Cluster, ClusterBatch, batch_ids, cluster_batch, in_batches
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.initial_skill import InitialSkill, compiler_input
from intraskill.trace2skill.ledger import LedgerEntry, write_ledger
from intraskill.trace2skill.llm_analyst import EvidenceCard
from intraskill.trace2skill.queue import AnalysisItem
from intraskill.trace2skill.roles import RoleFailure
from intraskill.trace2skill.success import (
    CHANNEL_FAILURE,
    CHANNEL_SUCCESS,
    CHANNELS,
    SuccessAnalysis,
)

LOGGER = logging.getLogger(__name__)

PIPELINE_VERSION = "intraskill-cold-start-v1"
PLAN_SCHEMA_VERSION = "intraskill-cold-start-plan-v1"
SUMMARY_SCHEMA_VERSION = "shopsimrl-trace2skill-cold-start-v3"
MANIFEST_SCHEMA_VERSION = "intraskill-cold-start-manifest-v1"
STAGES = ("rollouts", "analysis", "firewall", "consolidation", "compile", "gate_a", "gate_b")
TRAIN_SPLIT = "train"


class ColdStartPlanMismatchError(RuntimeError):
    """The cold-start directory already holds a different plan."""


class ColdStartError(RuntimeError):
    """A stage cannot produce its output (e.g. the LLM compiler never submitted a valid draft)."""


class StageRecord(Record):
    """One finished stage: its input fingerprint, counts, cost and output hashes (``stages/<name>.json``)."""

    name: str
    fingerprint: str
    counts: dict[str, Any]
    cost: dict[str, Any]
    outputs: dict[str, str]


class ColdStartCost(Record):
    episodes: int
    tokens: int
    wall_s: float


class ColdStartManifest(Record):
    """``cold_start_manifest.json``: the plan fingerprint, analyst, checkpoint, every stage's record, the total cost
    and the digests of the draft bank, S₀ and the analysis summary."""

    schema_version: Literal[MANIFEST_SCHEMA_VERSION] = MANIFEST_SCHEMA_VERSION
    status: Literal["complete"] = "complete"
    plan_fingerprint: str
    analyst: str
    checkpoint_sha256: str | None
    stages: dict[str, StageRecord]
    cost: ColdStartCost
    outputs: dict[str, str]


@dataclass(frozen=True)
class ColdStartResult:
    """A finished cold start: its directory, the draft, the active S₀ and every stage's record."""

    root: Path
    draft: SkillBank
    s0: SkillBank
    stages: dict[str, StageRecord]
    manifest: ColdStartManifest

    @property
    def s0_path(self) -> Path:
        return ColdStartDir(self.root).s0

    @property
    def gate_b(self) -> GateBResult | None:
        """Gate B's report (the active S₀ against bare on test), ``None`` when Gate A selected nothing."""
        directory = ColdStartDir(self.root).gate_b
        return read_gate_b(directory.root) if directory.comparison.is_file() else None

    def stage_rows(self) -> list[dict[str, Any]]:
        """One row per stage: its counts in words (one level of nesting flattened, ``success cards 3``; lists left
        out) and each of its costs (``episodes``, ``tokens``, ``wall_s``, …) as a column, for a table."""
        rows = []
        for name, stage in self.stages.items():
            counts = []
            for key, value in stage.counts.items():
                if isinstance(value, dict):
                    counts += [f"{key} {k} {v}" for k, v in value.items() if not isinstance(v, (dict, list))]
                elif not isinstance(value, list):
                    counts.append(f"{key} {value}")
            rows.append({"stage": name, "counts": ", ".join(counts), **stage.cost})
        return rows

    def chunk_rows(self) -> list[dict[str, Any]]:
        """One row per draft chunk: order, title, workflow stage, clusters, and Gate A's β, rank and status."""
        contributions = _read_json(ColdStartDir(self.root).gate.contributions)["contributions"]
        gate = {c["intervention_id"]: c for c in contributions}
        return [{"chunk_id": s.skill_id, "order": s.metadata["draft_order"], "title": s.metadata["title"],
                 "workflow_stage": s.metadata["workflow_stage"], "clusters": len(s.metadata["evidence_cluster_ids"]),
                 "beta": gate[s.skill_id]["coefficient"], "rank": gate[s.skill_id]["rank"],
                 "status": gate[s.skill_id]["status"]} for s in self.draft.skills]

    def summary(self) -> str:
        """One line per stage: its counts and cost."""
        lines = [f"S0: {len(self.s0.skills)} of {len(self.draft.skills)} draft chunks selected -> {self.s0_path}"]
        for row, stage in zip(self.stage_rows(), self.stages.values()):
            lines.append(f"{row['stage']}: {row['counts']}; {stage.cost.get('episodes', 0)} episodes, "
                         f"{stage.cost.get('tokens', 0)} tokens, {stage.cost.get('wall_s', 0.0):.1f} s")
        total = self.manifest.cost
        lines.append(f"total: {total.episodes} episodes, {total.tokens} tokens, {total.wall_s:.1f} s")
        return "\n".join(lines)


def default_cold_start_dir(experiment: ExperimentParams) -> Path:
    """``<run_root>/<experiment.name>/cold-start``."""
    return runs_root(experiment.run_root) / experiment.name / "cold-start"


def cold_start_plan(params: Params, settings: AnalystSettings, checkpoint: str | None) -> dict[str, Any]:
    """The fingerprinted plan: parameters (with the cold-start section), the analyst and the base checkpoint's
    weights (their digest, not the path, so a clone elsewhere resumes the same plan)."""
    return {"pipeline_version": PIPELINE_VERSION, "params": plan_dump(params),
            "cold_start": section_plan(params.cold_start), "analyst": asdict(settings),
            "checkpoint_sha256": weights_digest(Path(checkpoint)) if checkpoint is not None else None}


def _outputs(root: Path, names: Sequence[str]) -> dict[str, str]:
    return {name: sha256_file(root / name) for name in names}


def _stage(paths: ColdStartDir, name: str, inputs: Mapping[str, Any],
           work: Callable[[], tuple[dict[str, Any], dict[str, Any], list[str]]]) -> StageRecord:
    """Run ``work`` unless ``stages/<name>.json`` records the same inputs and its outputs still hash as recorded.

    ``work`` returns (counts, cost without wall time, output names relative to the root).
    """
    fingerprint = sha256_json({"stage": name, **inputs})
    record_path = paths.stages / f"{name}.json"
    if record_path.is_file():
        stored = StageRecord.read(record_path)
        if stored.fingerprint == fingerprint and all(
                (paths.root / n).is_file() and sha256_file(paths.root / n) == h for n, h in stored.outputs.items()):
            LOGGER.info("cold start: %s done, skipped", name)
            return stored
    partial = paths.stages / f"{name}.interrupted.json"
    earlier = _read_json(partial) if partial.is_file() else {}
    spent = float(earlier.get("wall_s", 0.0)) if earlier.get("fingerprint") == fingerprint else 0.0
    started = time.monotonic()
    try:
        counts, cost, names = work()
    except BaseException:
        paths.stages.mkdir(parents=True, exist_ok=True)
        write_json(partial, {"fingerprint": fingerprint, "wall_s": spent + time.monotonic() - started})
        raise
    record = StageRecord(name=name, fingerprint=fingerprint, counts=counts,
                         cost={**cost, "wall_s": round(spent + time.monotonic() - started, 3)},
                         outputs=_outputs(paths.root, names))
    record.write(record_path, indent=1)
    partial.unlink(missing_ok=True)
    return record


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _rollouts(params: Params, paths: ColdStartDir, checkpoint: str | None,
              store_root: str | Path | None, progress: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    evaluation = params.evaluation.model_copy(update={"repeats": 1})
    run = run_eval(params.model_copy(update={"evaluation": evaluation}), TRAIN_SPLIT, checkpoint, None,
                   paths.rollouts.root, limit=params.cold_start.trajectories, store_root=store_root, progress=progress)
    counts = run.summary.counts
    return ({"requested": counts.requested, "completed": counts.completed, "failed": counts.failed,
             "success_rate": run.summary.primary.success_rate},
            {"episodes": counts.trace_files, "tokens": run.summary.cost.tokens.total_tokens},
            [paths.relative(paths.rollouts.plan), paths.relative(paths.rollouts.traces)])


def usable_traces(path: Path) -> tuple[list[EpisodeTrace], list[EpisodeTrace], list[str]]:
    """(successes, failures, missing): the completed record of each episode with a binary ``r_success``, and the
    episodes without one (method §4.4 step 1)."""
    completed, failed = final_records(read_traces(path))
    successes, failures, missing = [], [], sorted(failed)
    for episode, trace in completed.items():
        if trace.reward is None or trace.reward.r_success not in (0, 1):
            missing.append(episode)
        else:
            (successes if trace.reward.r_success == 1 else failures).append(trace)
    return successes, failures, sorted(missing)


def _llm_cost(before: RoleCost, after: RoleCost, episodes: int = 0) -> dict[str, Any]:
    """A stage's cost: the episodes it played and the LLM roles' tokens and calls between ``before`` and ``after``."""
    return {"episodes": episodes, "tokens": after.total_tokens - before.total_tokens,
            "llm_calls": after.calls - before.calls}


def _analysis(paths: ColdStartDir, roles: ColdStartRoles, max_cards: int) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    successes, failures, missing = usable_traces(paths.rollouts.traces)
    before = roles.cost()
    done = {r["episode_id"] for r in iter_jsonl(paths.success_cards)}
    with JsonlWriter(paths.success_cards) as writer:
        for trace in successes:
            if trace.episode_id not in done:
                writer.append(roles.success.analyze(trace, max_cards).to_dict())
    done = {r["card_id"] for r in iter_jsonl(paths.failure_cards)}
    with JsonlWriter(paths.failure_cards) as writer:
        for trace in failures:
            item = AnalysisItem(trace.episode_id, 0, trace.task_id, TRAIN_SPLIT, False, trace)
            if item.card_id not in done:
                writer.append(roles.failure.analyze(item, SkillBank("cold-start-empty", ())).to_dict())
    success_records, failure_cards = _cards(paths)
    after = roles.cost()
    trials = sum(len(c.terminal_trials) for c in failure_cards)
    return ({"input": {"success": len(successes), "failure": len(failures), "total": len(successes) + len(failures)},
             "missing": missing, "success_cards": sum(len(r.cards) for r in success_records),
             "failure_cards": len(failure_cards),
             "success_rejections": dict(Counter(x for r in success_records for x in r.rejections))},
            _llm_cost(before, after, episodes=trials),
            [paths.success_cards.name, paths.failure_cards.name])


def _cards(paths: ColdStartDir) -> tuple[list[SuccessAnalysis], list[FailureCard]]:
    """The analysis stage's records: one per success trace, one card per failure (last record wins)."""
    successes = {r["episode_id"]: SuccessAnalysis.from_dict(r) for r in iter_jsonl(paths.success_cards)}
    failures = {r["card_id"]: FailureCard.from_dict(r) for r in iter_jsonl(paths.failure_cards)}
    return list(successes.values()), list(failures.values())


def _evidence(paths: ColdStartDir) -> dict[str, list[EvidenceCard]]:
    """Every card by channel, in analysis order."""
    successes, failures = _cards(paths)
    return {CHANNEL_SUCCESS: [c for r in successes for c in r.cards], CHANNEL_FAILURE: list(failures)}


def _firewall(paths: ColdStartDir) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    cards = _evidence(paths)
    staging = paths.evidence_cards.with_name(paths.evidence_cards.name + ".tmp")
    staging.unlink(missing_ok=True)
    counts: dict[str, Any] = {}
    with JsonlWriter(staging) as writer:
        for channel in CHANNELS:
            for card in cards[channel]:
                writer.append({"channel": channel, "card_id": card.card_id,
                               "eligible_for_consolidation": card.eligible_for_consolidation, "card": card.to_dict()})
            counts[channel] = {"cards": len(cards[channel]),
                               "eligible": sum(c.eligible_for_consolidation for c in cards[channel]),
                               "firewall_flagged": sum(bool(c.firewall_findings) for c in cards[channel])}
    staging.replace(paths.evidence_cards)
    failures = [c for c in cards[CHANNEL_FAILURE] if isinstance(c, FailureCard)]
    counts["failure_downgrades"] = dict(sorted(Counter(c.downgrade_reason for c in failures
                                                       if c.downgrade_reason).items()))
    counts["evidence_cards"] = sum(len(v) for v in cards.values())
    return counts, {"episodes": 0, "tokens": 0}, [paths.evidence_cards.name]


def _eligible(paths: ColdStartDir) -> dict[str, list[EvidenceCard]]:
    return {channel: [c for c in cards if c.eligible_for_consolidation] for channel, cards in _evidence(paths).items()}


def _episode_of(card_id: str) -> str:
    """The episode of a card ID (``success-<episode>-NN`` / ``failure-<episode>-01``)."""
    return card_id.split("-", 1)[1].rsplit("-", 1)[0]


class _Lookups:
    """Gold-firewall lookups of the rollout traces (replayed once each, on demand)."""

    def __init__(self, paths: ColdStartDir, engine: ShopEngine) -> None:
        completed, _ = final_records(read_traces(paths.rollouts.traces))
        self.traces, self.engine, self.cache = completed, engine, {}

    def of(self, card_ids: Sequence[str]) -> GoldLookup:
        """The union of the lookups of the cards' trajectories."""
        parts = []
        for episode in dict.fromkeys(_episode_of(c) for c in card_ids):
            if episode not in self.cache:
                self.cache[episode] = gold_lookup(replay_trace(self.engine, self.traces[episode]))
            parts.append(self.cache[episode])
        return GoldLookup(tuple(t for p in parts for t in p.titles), tuple(b for p in parts for b in p.brands),
                          tuple(o for p in parts for o in p.gold_options))


def _planned_batches(params: Params, paths: ColdStartDir) -> list[tuple[str, str, list[EvidenceCard]]]:
    """(channel, batch ID, cards) of every consolidation batch: each channel's eligible cards in order, cut into
    batches of ``cold_start.consolidation_batch``."""
    planned = []
    for channel, cards in _eligible(paths).items():
        batches = in_batches(cards, params.cold_start.consolidation_batch)
        planned += [(channel, ident, batch) for ident, batch in zip(batch_ids(channel, len(batches)), batches)]
    return planned


def _key(channel: str, batch_id: str, card_ids: Sequence[str]) -> tuple[str, str, tuple[str, ...]]:
    return channel, batch_id, tuple(card_ids)


def _stored_batches(paths: ColdStartDir) -> dict[tuple[str, str, tuple[str, ...]], ClusterBatch]:
    """Stored batches by (channel, batch ID, card IDs); the last record of a key wins."""
    batches = (ClusterBatch.from_dict(r) for r in iter_jsonl(paths.cluster_batches))
    return {_key(b.channel, b.batch_id, b.card_ids): b for b in batches}


def _consolidation(params: Params, paths: ColdStartDir, roles: ColdStartRoles,
                   lookups: _Lookups) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    before = roles.cost()
    planned = _planned_batches(params, paths)
    done = _stored_batches(paths)
    with JsonlWriter(paths.cluster_batches) as writer:
        for channel, batch_id, batch in planned:
            ids = [c.card_id for c in batch]
            if _key(channel, batch_id, ids) in done:
                continue
            submission = roles.consolidator(batch, channel=channel, batch_id=batch_id,
                                            max_clusters=params.cold_start.max_clusters, lookup=lookups.of(ids))
            writer.append(cluster_batch(channel, batch_id, batch, submission).to_dict())
    batches = _batches(params, paths)
    counts = {channel: {"batches": sum(b.channel == channel for b in batches),
                        "clusters": sum(len(b.clusters) for b in batches if b.channel == channel),
                        "evidence_only_cards": sum(len(b.evidence_only_card_ids) for b in batches
                                                   if b.channel == channel)} for channel in CHANNELS}
    return counts, _llm_cost(before, roles.cost()), [paths.cluster_batches.name]


def _batches(params: Params, paths: ColdStartDir) -> list[ClusterBatch]:
    """The consolidated batches of the current eligible cards, in channel then batch order."""
    stored = _stored_batches(paths)
    return [stored[_key(channel, ident, [c.card_id for c in batch])]
            for channel, ident, batch in _planned_batches(params, paths)]


def _ledger(skill: InitialSkill, clusters: Sequence[Cluster], checkpoint_id: str) -> list[LedgerEntry]:
    """The pre-validation ADD ledger: one entry per draft chunk."""
    by_id = {c.cluster_id: c for c in clusters}
    entries = []
    for chunk in skill.chunks:
        members = [by_id[i] for i in chunk.evidence_cluster_ids]
        entries.append(LedgerEntry(
            candidate_id=chunk.chunk_id, operation="ADD", target_chunk_id=None,
            source_card_ids=tuple(card for c in members for card in c.evidence_card_ids),
            failure_mechanism="+".join(dict.fromkeys(c.mechanism for c in members)),
            proposal_checkpoint=checkpoint_id, stage=STAGE_COLD_START,
            consolidation_cluster_id=",".join(chunk.evidence_cluster_ids), replacement_family_id=None,
            content=chunk.content, notes=f"draft order {chunk.order}"))
    return entries


def _compile(params: Params, paths: ColdStartDir, roles: ColdStartRoles,
             lookups: _Lookups) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    settings, before = params.cold_start, roles.cost()
    clusters = [c for b in _batches(params, paths) for c in b.clusters]
    if not clusters:
        raise ColdStartError("compile: no cluster to compile (no eligible card); the cold start cannot draft S0 "
                             f"from {paths.evidence_cards}")
    cap = settings.validation_dimension_cap
    lookup = lookups.of([card for c in clusters for card in c.evidence_card_ids])
    paths.invalid_attempts.unlink(missing_ok=True)
    try:
        compiled = roles.compiler(clusters, cap, lookup)
    except RoleFailure as failure:
        _write_attempts(paths.invalid_attempts, failure.attempts)
        raise ColdStartError(f"compile: {failure}; invalid attempts in {paths.invalid_attempts}") from None
    _write_attempts(paths.invalid_attempts, compiled.invalid_attempts)
    skill = compiled.skill
    write_json(paths.draft, skill.to_dict(params.gate.active_skill_budget, cap,
                                         sha256_json(compiler_input(clusters, cap))), indent=1)
    save_skillbank(skill.bank(), paths.draft_bank)
    paths.draft_markdown.write_text(skill.markdown(), encoding="utf-8")
    write_ledger(paths.ledger, _ledger(skill, clusters, settings.checkpoint_id))
    cost = _llm_cost(before, roles.cost())
    counts = {"clusters": len(clusters), "chunks": len(skill.chunks),
              "evidence_only_clusters": len(skill.evidence_only_cluster_ids),
              "invalid_attempts": len(compiled.invalid_attempts)}
    names = [paths.draft.name, paths.draft_bank.name, paths.draft_markdown.name, paths.ledger.name,
             paths.invalid_attempts.name]
    return counts, cost, names


def _write_attempts(path: Path, attempts: Sequence[Mapping[str, Any]]) -> None:
    with JsonlWriter(path) as writer:
        for attempt in attempts:
            writer.append(dict(attempt))


def _gate_a(params: Params, paths: ColdStartDir, checkpoint: str | None, store_root: str | Path | None,
            progress: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    settings = params.cold_start
    config = GateConfig.from_params(params, settings.checkpoint_id, task_limit=settings.gate_tasks,
                                    next_round_id=round_id(0))
    result = run_gate_a(params, load_skillbank(paths.draft_bank), paths.gate.root, config, checkpoint=checkpoint,
                        ledger=paths.ledger, store_root=store_root, progress=progress)
    save_skillbank(result.selected_bank, paths.s0)
    bare = EvalSummary.read(EvalDir(result.manifest.inputs.bare_run_dir).summary)
    masked = EvalSummary.read(paths.gate.summary)
    outcomes = result.manifest.outcomes
    counts = {"draft_chunks": outcomes.columns, "selected": outcomes.selected_count,
              "selected_ids": list(result.contributions.selected_intervention_ids),
              "observations": result.contributions.observations,
              "bare_success": outcomes.r_success.bare_mean if outcomes.r_success else None,
              "masked_success": outcomes.r_success.masked_mean if outcomes.r_success else None,
              "additivity_rejected": outcomes.additivity.rejected if outcomes.additivity else None}
    cost = {"episodes": bare.counts.trace_files + masked.counts.trace_files,
            "tokens": bare.cost.tokens.total_tokens + masked.cost.tokens.total_tokens}
    names = [paths.relative(paths.gate.contributions), paths.relative(paths.gate.selected_skillbank), paths.s0.name]
    return counts, cost, names


def _gate_b(params: Params, paths: ColdStartDir, checkpoint: str | None, store_root: str | Path | None,
            progress: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    s0 = load_skillbank(paths.s0)
    if not s0.enabled_skills():
        LOGGER.warning("cold start: Gate A selected no chunk; Gate B has no S₀ to report on")
        return {"selected": 0}, {"episodes": 0, "tokens": 0}, []
    result = run_gate_b(params, s0, paths.gate_b.root, checkpoint=checkpoint, task_limit=params.cold_start.gate_b_tasks,
                        store_root=store_root, progress=progress)
    LOGGER.info("cold start: %s", result.statement())
    counts: dict[str, Any] = {"selected": len(s0.enabled_skills()), "tasks": result.tasks}
    for label, metric in (("success", result.success), ("reward", result.reward)):
        counts.update({f"bare_{label}": metric.bare, f"s0_{label}": metric.s0, f"{label}_difference": metric.difference,
                       f"{label}_ci": list(metric.ci)})
    counts["transitions"] = result.transitions
    return counts, {"episodes": result.episodes, "tokens": result.tokens}, [
        *(paths.relative(paths.gate_b.run(name).traces) for name in GATE_B_RUNS),
        paths.relative(paths.gate_b.comparison)]


def write_cold_start_plan(root: Path, plan: Mapping[str, Any]) -> str:
    """Write ``plan.json`` or check the stored one (a missing one beside any other entry is refused); returns the
    fingerprint."""
    return write_plan(ColdStartDir(root).plan, plan, what="cold-start", error=ColdStartPlanMismatchError,
                      schema=PLAN_SCHEMA_VERSION, hint="Use another --out directory to run a different plan.")


def run_cold_start(
    params: Params,
    out_dir: str | Path,
    *,
    analyst: AnalystSettings = AnalystSettings(),
    checkpoint: str | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
) -> ColdStartResult:
    """Run (or resume, or skip when finished) the cold start into ``out_dir``; see the module docstring.

    Parameters
    ----------
    params : the parameter set (``cold_start`` and the store, model, sampling, evaluation and round sections).
    out_dir : the cold-start directory.
    analyst : the roles (:class:`~intraskill.trace2skill.analysts.AnalystSettings`: rule by default, or an LLM).
    checkpoint : the base policy (default ``model.checkpoint`` resolved: for the organism its warm start).
    store_root : the store directory (default the cached store of ``params.store``).
    """
    if checkpoint is None:
        checkpoint = resolve_checkpoint(params)[0]
    paths = ColdStartDir(out_dir)
    paths.root.mkdir(parents=True, exist_ok=True)
    plan = cold_start_plan(params, analyst, checkpoint)
    fingerprint = write_cold_start_plan(paths.root, plan)
    stages: dict[str, StageRecord] = {}

    def inputs(previous: str | None) -> dict[str, Any]:
        return {"plan": fingerprint, "previous": stages[previous].outputs if previous else None}

    stages["rollouts"] = _stage(paths, "rollouts", inputs(None),
                                lambda: _rollouts(params, paths, checkpoint, store_root, progress))
    store = open_train_store(params, store_root)
    try:
        with open_cold_start_roles(analyst, store.engine) as roles:
            lookups = _Lookups(paths, store.engine)
            stages["analysis"] = _stage(paths, "analysis", inputs("rollouts"), lambda: _analysis(
                paths, roles, params.cold_start.max_cards_per_success))
            stages["firewall"] = _stage(paths, "firewall", inputs("analysis"), lambda: _firewall(paths))
            stages["consolidation"] = _stage(paths, "consolidation", inputs("firewall"),
                                             lambda: _consolidation(params, paths, roles, lookups))
            stages["compile"] = _stage(paths, "compile", inputs("consolidation"),
                                       lambda: _compile(params, paths, roles, lookups))
    finally:
        store.close()
    stages["gate_a"] = _stage(paths, "gate_a", inputs("compile"),
                              lambda: _gate_a(params, paths, checkpoint, store_root, progress))
    stages["gate_b"] = _stage(paths, "gate_b", inputs("gate_a"),
                              lambda: _gate_b(params, paths, checkpoint, store_root, progress))
    analysis = stages["analysis"].counts
    write_json(paths.summary, {
        "schema_version": SUMMARY_SCHEMA_VERSION, "input": analysis["input"],
        "unique_analyzed": analysis["input"]["total"], "evidence_cards": stages["firewall"].counts["evidence_cards"],
        "missing": analysis["missing"], "error_count": len(analysis["missing"]),
        "cards_path": paths.evidence_cards.name}, indent=1)
    total = {key: sum(s.cost.get(key, 0) for s in stages.values()) for key in ("episodes", "tokens", "wall_s")}
    manifest = ColdStartManifest(
        plan_fingerprint=fingerprint, analyst=analyst.kind, checkpoint_sha256=plan["checkpoint_sha256"],
        stages=stages, cost=ColdStartCost(**{**total, "wall_s": round(total["wall_s"], 3)}),
        outputs=_outputs(paths.root, [paths.draft_bank.name, paths.s0.name, paths.summary.name]))
    manifest.write(paths.manifest, indent=1)
    return ColdStartResult(paths.root, load_skillbank(paths.draft_bank), load_skillbank(paths.s0), stages, manifest)
