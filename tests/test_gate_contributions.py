"""contributions.json: release reproduction, schema, pairing contract, planted effects, next bank, refit."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.gate.contributions import (
    BareBaseline,
    GateContributions,
    GateRecord,
    PairedObservation,
    PairingError,
    bare_baseline_block,
    build_contributions,
    load_contributions,
    pair_records,
    save_contributions,
    selected_skill_markdown,
    selected_skillbank,
)
from intraskill.gate.design import MaskAssignment, assign_online_masks, slots_from_interventions
from intraskill.gate.selection import Intervention
from intraskill.hashing import unit_draw
from intraskill.paths import release_data_dir
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.pool import Candidate, CandidatePool, build_candidate_pool, online_candidate_id
from intraskill.skills.render import Chunk, render_chunk

RELEASE = release_data_dir()


def release_gate(round_index: int) -> dict:
    return json.loads((RELEASE / f"round-{round_index:03d}" / "gate" / "contributions.json").read_text())


def baseline_of(pairing, assignment: MaskAssignment) -> BareBaseline:
    """The bare baseline block of ``pairing`` (a bare run at ``runs/bare``)."""
    return bare_baseline_block(pairing, assignment, run_dir="runs/bare", plan_fingerprint="f" * 64,
                               checkpoint_id="round-000-checkpoint")


def rebuild_release(gate: dict) -> tuple[MaskAssignment, GateContributions]:
    slots = slots_from_interventions([Intervention.from_dict(r) for r in gate["contributions"]])
    assignment = assign_online_masks(slots, [row["task_id"] for row in gate["observations_table"]],
                                     pool_sha256=gate["pool_sha256"])
    observations = [PairedObservation.from_row(row) for row in gate["observations_table"]]
    built = build_contributions(assignment, observations, bare_baseline=BareBaseline(**gate["bare_baseline"]),
                                created_at=gate["created_at"])
    return assignment, built


@pytest.mark.parametrize("round_index", [0, 1, 2, 3])
def test_release_estimates_statuses_and_ranks_are_reproduced(round_index: int) -> None:
    gate = release_gate(round_index)
    _, built = rebuild_release(gate)
    for metric, stored in gate["estimates"].items():
        mine = built.estimates[metric]
        assert mine.columns == list(stored["coefficients"])
        for column, beta in stored["coefficients"].items():
            assert mine.coefficients[column] == pytest.approx(beta, abs=1e-9)
        for key in ("masked_mean", "bare_mean", "delta_mean"):
            assert getattr(mine, key) == pytest.approx(stored[key], abs=1e-9)
        assert mine.observations == stored["observations"] == 400
        assert mine.fit is not None and mine.fit.nobs == 400
    assert [(c.intervention_id, c.status, c.rank) for c in built.contributions] == [
        (c["intervention_id"], c["status"], c["rank"]) for c in gate["contributions"]]
    assert built.selected_intervention_ids == gate["selected_intervention_ids"]
    assert built.replacement_winners == gate["replacement_winners"]
    assert [obs.to_row() for obs in built.observations_table] == gate["observations_table"]


def test_output_matches_the_release_schema_plus_inference() -> None:
    gate = release_gate(0)
    _, result = rebuild_release(gate)
    built = result.to_json()
    assert list(built) == list(gate) + ["additivity"]
    assert built["additivity"]["chunks"] == gate["selected_intervention_ids"]
    assert built["estimator"] == gate["estimator"]
    for metric in gate["estimates"]:
        extra = ["standard_errors", "conf_int_95", "cov_type"]
        assert list(built["estimates"][metric]) == list(gate["estimates"][metric]) + extra
        assert built["estimates"][metric]["cov_type"] == "HC3"
        for column, (low, high) in built["estimates"][metric]["conf_int_95"].items():
            beta = built["estimates"][metric]["coefficients"][column]
            assert low < beta < high and built["estimates"][metric]["standard_errors"][column] > 0
    assert [list(c) for c in built["contributions"]] == [list(c) for c in gate["contributions"]]
    assert list(built["contributions"][0]["auxiliary_coefficients"]) == list(
        gate["contributions"][0]["auxiliary_coefficients"])
    assert all(list(row) == list(gate["observations_table"][0]) for row in built["observations_table"])
    assert list(built["bare_baseline"]) == list(gate["bare_baseline"])


@pytest.mark.parametrize("round_index", [0, 3])
def test_release_files_load_and_save_byte_for_byte(round_index: int, tmp_path: Path) -> None:
    path = RELEASE / f"round-{round_index:03d}" / "gate" / "contributions.json"
    loaded = load_contributions(path)
    assert loaded.primary.cov_type is None and loaded.primary.fit is None
    assert loaded.selected_intervention_ids == json.loads(path.read_text())["selected_intervention_ids"]
    assert save_contributions(loaded, tmp_path / "contributions.json").read_text() == path.read_text()


def test_a_built_gate_survives_save_and_load(tmp_path: Path) -> None:
    _, built = rebuild_release(release_gate(2))
    loaded = load_contributions(save_contributions(built, tmp_path / "contributions.json"))
    assert loaded == built and loaded.to_json() == built.to_json()
    assert loaded.primary.cov_type == "HC3" and loaded.primary.fit is None
    assert loaded.primary.conf_int_95 == built.primary.conf_int_95
    frame = loaded.to_frame()
    assert list(frame["intervention_id"]) == loaded.columns
    assert list(frame["status"]) == [r.status.value for r in built.contributions]
    assert frame["ci_lo"].lt(frame["coefficient"]).all() and "beta_r_success" in frame.columns
    text = loaded.summary()
    assert "covariance: HC3" in text and f"selected {built.selected_count} (budget K = 10)" in text
    assert all(column in text for column in loaded.columns)


def test_refit_cli_refits_a_file_the_builder_wrote(tmp_path: Path) -> None:
    _, built = rebuild_release(release_gate(1))
    path = save_contributions(built, tmp_path / "contributions.json")
    result = CliRunner().invoke(app, ["gate", "refit", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["columns"] == 13 and report["observations"] == 400
    assert report["max_abs_diff"] < 1e-12


# --- synthetic gate: planted effects through the whole chain -------------------------------------

def chunk(title: str) -> str:
    return render_chunk(Chunk(title, "always", (f"do {title}",), "ok", "skipping"))


def make_candidate(operation: str, target: str | None, title: str) -> Candidate:
    content = chunk(title)
    ident = online_candidate_id(operation, target, content)
    return Candidate(ident, operation, target, content,
                     {"title": title, "failure_mechanism": f"missed {title}", "evidence_card_ids": ["card-1"],
                      "consolidation_cluster_id": "cluster-" + ident[7:],
                      "proposal_checkpoint": "ckpt-round-000"})


@pytest.fixture(scope="module")
def pool() -> CandidatePool:
    bank = SkillBank("b1", (Skill("chunk-b", chunk("b"), version="active-1",
                                  metadata={"workflow_stage": "search"}),
                            Skill("chunk-a", chunk("a"), version="active-1"),
                            Skill("chunk-c", chunk("c"), version="active-1")))
    candidates = [make_candidate("REWRITE", "chunk-a", "a v2"), make_candidate("REWRITE", "chunk-a", "a v3"),
                  make_candidate("ADD", None, "new one"), make_candidate("ADD", None, "new two")]
    return build_candidate_pool(bank, candidates, round_id="round-000", proposal_checkpoint="ckpt-round-000",
                                created_at="2026-01-01T00:00:00+00:00")


@pytest.fixture(scope="module")
def planted(pool: CandidatePool) -> dict[str, float]:
    rewrites = sorted(c.candidate_id for c in pool.candidates if c.operation == "REWRITE")
    adds = sorted(c.candidate_id for c in pool.candidates if c.operation == "ADD")
    return {"chunk-b": 0.05, "chunk-a": -0.02, rewrites[0]: 0.01, rewrites[1]: 0.06, "chunk-c": -0.03,
            adds[0]: 0.04, adds[1]: -0.01}


def reward(value: float) -> dict[str, float]:
    return {"reward": value, "r_strict": value, "r_success": float(value > 0.5), "r_type": 1.0}


def runs(assignment: MaskAssignment, beta: dict[str, float]) -> tuple[list[GateRecord], list[GateRecord]]:
    bare, masked = [], []
    for job in assignment.jobs:
        base = round(unit_draw(f"bare:{job.task_id}"), 6)
        effect = sum(beta[c] for c, bit in zip(assignment.columns, job.mask) if bit)
        bare.append(GateRecord(job.episode_id, "val", job.task_id, job.sample_id, "completed", (),
                               reward(base)))
        masked.append(GateRecord(job.episode_id, "val", job.task_id, job.sample_id, "completed",
                                 job.included_chunk_ids, reward(base + effect)))
    return bare, masked


@pytest.fixture(scope="module")
def assignment(pool: CandidatePool) -> MaskAssignment:
    return assign_online_masks(pool, range(1, 121))


def test_planted_effects_select_the_rewrite_under_the_old_slot(pool, planted, assignment) -> None:
    bare, masked = runs(assignment, planted)
    pairing = pair_records(assignment, bare, masked)
    assert len(pairing.observations) == 120 and pairing.dropped_episode_ids == []
    baseline = baseline_of(pairing, assignment)
    assert baseline.observations == 120 and baseline.dropped_observations == 0
    built = build_contributions(assignment, pairing.observations, bare_baseline=baseline)
    for column, beta in planted.items():
        assert built.primary.coefficients[column] == pytest.approx(beta, abs=1e-9)
    assert built.estimates["r_type"].coefficients == {c: 0.0 for c in assignment.columns}
    assert built.primary.bare_mean == pytest.approx(baseline.mean_outcomes["reward"])
    winner = next(c for c in planted if planted[c] == 0.06)
    add_winner = next(c for c in planted if planted[c] == 0.04)
    assert built.replacement_winners["chunk-a"] == winner
    statuses = {c.intervention_id: (c.status, c.rank) for c in built.contributions}
    assert statuses[winner] == ("selected", 1) and statuses["chunk-b"] == ("selected", 2)
    assert statuses[add_winner] == ("selected", 3)
    assert statuses["chunk-a"] == ("rewrite_loser", None) and statuses["chunk-c"][0] == "retired"

    bank = selected_skillbank(built, pool, round_id="round-000")
    assert bank.bank_version == "online-round-000-selected-v1"
    assert [s.skill_id for s in bank.skills] == ["chunk-b", "chunk-a", add_winner]
    rewritten = bank.get("chunk-a")
    assert rewritten.content == pool.candidate(winner).content and rewritten.version == "candidate"
    assert rewritten.metadata["selected_intervention_id"] == winner
    assert rewritten.metadata["operation"] == "REWRITE" and rewritten.metadata["target_chunk_id"] == "chunk-a"
    assert rewritten.metadata["estimated_effect"] == pytest.approx(0.06)
    kept = bank.get("chunk-b")
    assert kept.version == "active-1" and kept.metadata["workflow_stage"] == "search"
    assert kept.metadata["contribution_rank"] == 2 and kept.metadata["validation_result"] == "selected"
    assert "target_chunk_id" not in bank.get(add_winner).metadata
    assert bank.metadata["pool_sha256"] == pool.pool_sha256
    assert bank.metadata["assignment_sha256"] == assignment.assignment_sha256
    assert bank.metadata["bare_baseline"] == baseline.to_dict() and bank.metadata["active_skill_budget"] == 10
    markdown = selected_skill_markdown(bank)
    assert markdown.startswith("# Selected skill: online-round-000-selected-v1")
    assert markdown.index("### b") < markdown.index(rewritten.content) < markdown.index(
        pool.candidate(add_winner).content)
    with pytest.raises(ValueError, match="pool_sha256"):
        selected_skillbank(replace(built, pool_sha256="0" * 64), pool, round_id="round-000")


def test_several_samples_per_task_cluster_the_errors(pool, planted) -> None:
    assignment = assign_online_masks(pool, range(1, 61), samples_per_task=2)
    bare, masked = runs(assignment, planted)
    noisy = [replace(m, reward=reward(m.reward["reward"] + 0.01 * (unit_draw(m.episode_id) - 0.5)))
             for m in masked]
    pairing = pair_records(assignment, bare, noisy)
    built = build_contributions(assignment, pairing.observations, bare_baseline=baseline_of(pairing, assignment))
    assert built.primary.cov_type == "cluster"
    assert all(se > 0 for se in built.primary.standard_errors.values())


def test_pairing_drops_incomplete_pairs_and_accepts_retries(assignment, planted) -> None:
    bare, masked = runs(assignment, planted)
    first, second, third, fourth = (job.episode_id for job in assignment.jobs[:4])
    retried = [replace(masked[0], status="failed", reward=None), masked[0]]  # failed, then completed
    last_failed = [replace(masked[2], status="failed", reward=None)]  # never completed
    masked_side = retried + last_failed + masked[3:]  # job 1 has no masked record at all
    bare_side = mutate(bare, 3, status="failed", reward=None)
    pairing = pair_records(assignment, bare_side, masked_side)
    assert first in {o.episode_id for o in pairing.observations}
    assert pairing.dropped_episode_ids == [second, third, fourth]
    assert len(pairing.observations) == 117 and pairing.requested_observations == 120
    assert fourth not in pairing.bare_rewards


def mutate(records: list[GateRecord], index: int, **changes) -> list[GateRecord]:
    return [replace(r, **changes) if i == index else r for i, r in enumerate(records)]


def test_pairing_contract_violations_raise_precisely(assignment, planted) -> None:
    bare, masked = runs(assignment, planted)
    job = assignment.jobs[5]
    cases = [
        (bare[1:], masked, "bare job set differs"),
        (bare + [GateRecord("task-009999__sample-000", "val", 9999, 0, "completed", (), reward(0.5))], masked,
         "bare job set differs"),
        (bare, masked + [GateRecord("task-009999__sample-000", "val", 9999, 0, "completed", (), reward(0.5))],
         "outside the mask assignment"),
        (mutate(bare, 5, injected_ids=("chunk-b",)), masked, "bare trace has skills"),
        (bare, mutate(masked, 5, injected_ids=tuple(reversed(job.included_chunk_ids)) + ("x",)),
         "included_chunk_ids"),
        (bare, mutate(masked, 5, reward={**masked[5].reward, "r_strict": masked[5].reward["reward"] + 1e-9}),
         "differs from r_strict"),
        (mutate(bare, 5, reward={**bare[5].reward, "r_type": math.nan}), masked, "r_type is not finite"),
        (bare, mutate(masked, 5, reward={**masked[5].reward, "r_extra": 0.0}), "reward keys differ"),
        (bare, mutate(masked, 5, task_id=job.task_id + 1000), "job key"),
        (bare, masked + [masked[5]], "follows a completed record"),
        (bare + [replace(bare[5], status="failed", reward=None)], masked, "follows a completed record"),
        (bare, [replace(m, provenance_signature="a" if i else "b") for i, m in enumerate(masked)],
         "provenance differs"),
        (bare, [], "no complete"),
    ]
    for bare_side, masked_side, message in cases:
        with pytest.raises(PairingError, match=message):
            pair_records(assignment, bare_side, masked_side)
    tiny = mutate(masked, 5, reward={**masked[5].reward, "r_strict": masked[5].reward["reward"] + 1e-13})
    assert len(pair_records(assignment, bare, tiny).observations) == 120


def test_gate_record_from_trace_dict() -> None:
    trace = {"episode_id": "task-000007__sample-000", "task_id": 7, "sample_id": 0, "status": "completed",
             "reward": reward(1.0),
             "provenance": {"model_id": "m", "selected_skills": [{"skill_id": "chunk-b"}, {"skill_id": "x"}],
                            "seeds": {"episode_seed": 1}, "runtime": {"max_turns": 30, "concurrency": 8}}}
    record = GateRecord.from_trace(trace, "val")
    assert record.injected_ids == ("chunk-b", "x") and record.split == "val"
    other = {**trace, "provenance": {**trace["provenance"], "selected_skills": [],
                                     "seeds": {"episode_seed": 2},
                                     "runtime": {"max_turns": 30, "concurrency": 32}}}
    assert GateRecord.from_trace(other, "val").provenance_signature == record.provenance_signature
    changed = {**trace, "provenance": {**trace["provenance"], "model_id": "other"}}
    assert GateRecord.from_trace(changed, "val").provenance_signature != record.provenance_signature


def test_observations_must_match_the_assignment(assignment, planted) -> None:
    bare, masked = runs(assignment, planted)
    pairing = pair_records(assignment, bare, masked)
    observations = pairing.observations
    flipped = replace(observations[0], mask=tuple(1 - b for b in observations[0].mask))
    with pytest.raises(PairingError, match="differ from the mask assignment"):
        build_contributions(assignment, [flipped, *observations[1:]], bare_baseline=baseline_of(pairing, assignment))
