"""The gate as a run: planted-effect recovery, rank check before rollouts, resume, skip, artifacts.

The policy is the scripted expert behind a :class:`SkillConditionedLaw`: chunk ``persona`` switches
the persona competence (used with probability 0.9 with the chunk, 0.2 without); every other version
(``neutral``, the REWRITE of ``persona`` under its own ID, the ADD) has no effect. One effective chunk
keeps the planted estimand unambiguous: the expert's competences interact (without the persona no
purchase succeeds, so the budget check only matters with it), and with interactions the main-effect β
depends on the mask design. The true effects are measured independently by paired "chunk alone vs
bare" evaluations of the same tasks and episode seeds.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from policy_doubles import KilledAfter

from intraskill.agent.traces import read_traces
from intraskill.chat.base import ChatRequest, Generation
from intraskill.evaluate.runner import run_eval
from intraskill.gate.contributions import PairingError
from intraskill.gate.design import assign_online_masks, load_mask_assignment
from intraskill.gate.manifest import GateManifest
from intraskill.gate.ols import RankDeficientDesignError
from intraskill.params import Params, params_from_dict
from intraskill.pipeline.gate_b import run_gate_b
from intraskill.pipeline.gate_run import (
    GateConfig,
    GateInputError,
    as_draft,
    check_bare_plan,
    gate_task_ids,
    run_gate_a,
    run_online_gate,
    run_ranking_check,
)
from intraskill.pipeline.rollout import group_index
from intraskill.policy.expert_policy import ExpertPolicy, SkillConditionedLaw
from intraskill.policy.warmstarts import GroundTruth
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.curriculum import CurriculumState, assign_group, treatment_draw
from intraskill.skills.pool import Candidate, build_candidate_pool, online_candidate_id
from intraskill.trace2skill.ledger import add_proposals, read_ledger

PERSONA = Skill("persona", "### Read the profile\n- Search with the profile brand.", version="s0-1")
BUDGET = Skill("budget", "### Check the budget\n- Compare the price with the budget.", version="s0-1")
NEUTRAL = Skill("neutral", "### Be polite\n- Write short messages.", version="s0-1")
REWRITE_TEXT = "### Read the profile (rewritten)\n- Search with every profile preference."
ADD_TEXT = "### Scroll\n- Look at the next page when nothing fits."


def make_params(tmp_path: Path) -> Params:
    return params_from_dict({
        "experiment": {"name": "gate-test", "seed": 7, "run_root": str(tmp_path / "runs")},
        "store": {"scale": "small", "seed": 11},
        "model": {"spec": "expert", "device": "cpu"},
        "sampling": {"temperature": 1.0, "max_tokens_per_turn": 48, "max_turns": 30},
        "evaluation": {"repeats": 1, "task_limit": None, "bootstrap_samples": 1000},
    })


def planted_policy() -> ExpertPolicy:
    law = SkillConditionedLaw(skill_for={"read_persona": "persona"}, p_with={"read_persona": 0.9},
                              p_without={"read_persona": 0.2})
    return ExpertPolicy(seed=7, law=law)


def planted_pool():
    bank = SkillBank("planted-1", (PERSONA, NEUTRAL))
    rewrite = Candidate(online_candidate_id("REWRITE", "persona", REWRITE_TEXT), "REWRITE", "persona", REWRITE_TEXT,
                        {"title": "profile rewrite", "proposal_checkpoint": "round-000-checkpoint"})
    add = Candidate(online_candidate_id("ADD", None, ADD_TEXT), "ADD", None, ADD_TEXT,
                    {"title": "scroll", "proposal_checkpoint": "round-000-checkpoint"})
    return build_candidate_pool(bank, (rewrite, add), round_id="round-000", proposal_checkpoint="round-000-checkpoint")


def alone_effects(params: Params, skills: list[Skill], root: Path, store: Path, samples: int) -> dict[str, float]:
    """Paired (same tasks and episode seeds) mean reward of each chunk alone minus bare."""
    repeated = params.model_copy(update={"evaluation": params.evaluation.model_copy(update={"repeats": samples})})
    bare = run_eval(repeated, "val", None, None, root / "truth-bare", policy=planted_policy(), progress=False,
                    store_root=store).summary.primary.reward_mean
    return {s.skill_id: run_eval(repeated, "val", None, SkillBank("alone", (s,)), root / f"truth-{s.skill_id}",
                                 policy=planted_policy(), progress=False,
                                 store_root=store).summary.primary.reward_mean - bare
            for s in skills}


class MustNotRun(KilledAfter):
    def __init__(self, policy: ExpertPolicy) -> None:
        super().__init__(policy, 0)

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        raise AssertionError("a complete gate must be skipped without any rollout")


def completed_counts(path: Path) -> Counter[str]:
    return Counter(t.episode_id for t in read_traces(path) if t.status == "completed")


@pytest.mark.e2e
def test_online_gate_recovers_planted_effects(tmp_path: Path, small_store_root: Path) -> None:
    params, pool = make_params(tmp_path), planted_pool()
    ledger = add_proposals([], pool)
    config = GateConfig(checkpoint_id="round-000-checkpoint", samples_per_task=2)
    result = run_online_gate(params, pool, tmp_path / "gate", config, ledger=ledger, policy=planted_policy(),
                             store_root=small_store_root, progress=False)
    truth = alone_effects(params, [PERSONA, NEUTRAL], tmp_path, small_store_root, samples=2)
    contributions = result.contributions
    estimate = contributions.primary
    beta, ci = estimate.coefficients, estimate.conf_int_95
    rewrite_id, add_id = (c.candidate_id for c in pool.candidates)
    assert estimate.cov_type == "cluster" and contributions.observations == 80
    assert truth["persona"] > 0.4 and truth["neutral"] == 0.0
    assert ci["persona"][0] > 0.0
    for chunk in ("persona", "neutral"):
        assert abs(beta[chunk] - truth[chunk]) < 0.08, (chunk, beta[chunk], truth[chunk])
    for inert in ("neutral", rewrite_id, add_id):
        low, high = ci[inert]
        assert low <= 0.0 <= high and abs(beta[inert]) < 0.1, (inert, beta[inert], ci[inert])
    status = {r.intervention_id: r.status for r in contributions.contributions}
    assert status["persona"] == "selected" and status[rewrite_id] == "rewrite_loser"
    assert contributions.replacement_winners["persona"] == "persona"
    # artifacts and their schemas
    gate = tmp_path / "gate"
    manifest = json.loads((gate / "online_gate_manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["checkpoint_id"] == "round-000-checkpoint"
    assert set(manifest["outputs"]) >= {"mask_assignments.json", "traces.jsonl", "summary.json", "contributions.json",
                                        "selected_skillbank.json", "selected_skill.md", "proposal_ledger.jsonl",
                                        "curriculum.json"}
    assert manifest["inputs"]["pool_sha256"] == pool.pool_sha256
    assert GateManifest.read(gate / "online_gate_manifest.json").to_dict() == manifest  # read back unchanged
    assert contributions.bare_baseline.checkpoint_id == "round-000-checkpoint"
    assert len(contributions.observations_table) == 80
    assert json.loads((gate / "summary.json").read_text())["counts"]["requested"] == 80
    assert [s.skill_id for s in result.selected_bank.skills] == [
        r.logical_chunk_id for r in contributions.contributions if r.status == "selected"]
    assert result.selected_bank.bank_version == "online-round-000-selected-v1"
    assert result.curriculum is not None and result.curriculum.round_id == "round-001"
    assert result.curriculum.source["skillbank_path"] == "selected_skillbank.json"  # draws independent of gate_dir
    assert [c.skill_id for c in result.curriculum.chunks] == [s.skill_id for s in result.selected_bank.skills]
    assert all(0.2 <= c.inclusion_probability <= 0.9 for c in result.curriculum.chunks)
    entries = {e.candidate_id: e for e in read_ledger(gate / "proposal_ledger.jsonl")}
    assert entries[rewrite_id].validation_result == "rewrite_loser"
    assert entries[add_id].validation_history[-1]["assignment_sha256"] == contributions.assignment_sha256
    assignment = load_mask_assignment(gate / "mask_assignments.json")
    injected = {t.episode_id: [s["skill_id"] for s in t.provenance["selected_skills"]]
                for t in read_traces(gate / "traces.jsonl")}
    assert all(injected[job.episode_id] == list(job.included_chunk_ids) for job in assignment.jobs)


@pytest.mark.e2e
def test_next_curriculum_is_independent_of_the_run_directory(tmp_path: Path, small_store_root: Path) -> None:
    params, pool = make_params(tmp_path), planted_pool()
    config = GateConfig(checkpoint_id="round-000-checkpoint")
    first = run_online_gate(params, pool, tmp_path / "a" / "gate", config, policy=planted_policy(),
                            store_root=small_store_root, progress=False)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    # the copy's rollouts are reused; only the fit runs again
    moved = run_online_gate(params, pool, tmp_path / "b" / "gate", config,
                            policy=MustNotRun(planted_policy()), store_root=small_store_root, progress=False)
    assert moved.manifest.inputs.bare_run_dir != first.manifest.inputs.bare_run_dir
    assert moved.contributions.bare_baseline.run_dir == "bare-val"
    assert moved.selected_bank.sha256 == first.selected_bank.sha256
    assert first.curriculum is not None and moved.curriculum is not None
    assert moved.curriculum.state_id == first.curriculum.state_id
    assert moved.curriculum.draw_id == first.curriculum.draw_id  # the next round draws the same treatments


class AnotherCheckpoint(KilledAfter):
    """The planted policy under another checkpoint digest, its replies unchanged: what one torch thread instead of
    two does to a trained organism (weights up to 3·10⁻⁶ apart, the same sampled episodes)."""

    def __init__(self, policy: ExpertPolicy, digest: str) -> None:
        super().__init__(policy, calls=10**9)
        self.digest = digest

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.policy.identity, "checkpoint_id": self.digest}


def _state_keyed(state: CurriculumState, group: int) -> tuple[str, ...] | None:
    """The reference's treatment (§2.1 keyed on ``state_id``): ``None`` for skill-free, else the chunks drawn."""
    if treatment_draw(state.seed, state.state_id, group, "skill-free") < state.skill_free_probability:
        return None
    return tuple(c.skill_id for c in state.chunks
                 if treatment_draw(state.seed, state.state_id, group, f"chunk:{c.skill_id}") < c.inclusion_probability)


def test_next_round_treatments_do_not_depend_on_the_checkpoint_digest(tmp_path: Path, small_store_root: Path) -> None:
    params, pool = make_params(tmp_path), planted_pool()
    config = GateConfig(checkpoint_id="round-000-checkpoint")
    one, two = (run_online_gate(params, pool, tmp_path / name / "gate", config,
                                policy=AnotherCheckpoint(planted_policy(), name * 16), store_root=small_store_root,
                                progress=False).curriculum for name in ("aaaa", "bbbb"))
    assert one is not None and two is not None
    # the digest reaches the selected bank (its bare run's plan) and so state_id, never the draws
    assert one.source["skillbank_sha256"] != two.source["skillbank_sha256"] and one.state_id != two.state_id
    assert one.draw_id == two.draw_id and one.chunks[0].contribution == two.chunks[0].contribution
    groups = [group_index(1, step, 0, slot, 32) for step in range(1, 21) for slot in range(10)]  # 200 groups
    assert [assign_group(one, g) for g in groups] == [replace(assign_group(two, g), state_id=one.state_id)
                                                      for g in groups]
    # keyed on state_id, as the reference keys them, most treatments would have been redrawn
    moved = sum(_state_keyed(one, g) != _state_keyed(two, g) for g in groups)
    assert moved > 50, moved


def test_rank_deficient_design_is_rejected_before_any_rollout(tmp_path: Path, small_store_root: Path) -> None:
    params, pool = make_params(tmp_path), planted_pool()
    config = GateConfig(checkpoint_id="round-000-checkpoint", task_limit=4)  # 4 rows for 4 columns
    with pytest.raises(RankDeficientDesignError, match="n must exceed k.*no redraw can help"):
        run_online_gate(params, pool, tmp_path / "gate", config, policy=MustNotRun(planted_policy()),
                        store_root=small_store_root, progress=False)
    assert not (tmp_path / "gate").exists()
    assert not list(tmp_path.rglob("traces.jsonl"))


def test_singular_first_draw_is_redrawn_and_recorded(tmp_path: Path, small_store_root: Path) -> None:
    params, pool = make_params(tmp_path), planted_pool()
    tasks = gate_task_ids(params, GateConfig(checkpoint_id="c", task_limit=10), small_store_root)
    seed = next(s for s in range(1000) if assign_online_masks(pool, tasks, mask_seed=s).redraw == 1)
    config = GateConfig(checkpoint_id="round-000-checkpoint", task_limit=10, mask_seed=seed)  # 10 rows, 4 columns
    result = run_online_gate(params, pool, tmp_path / "gate", config, policy=planted_policy(),
                             store_root=small_store_root, progress=False)
    assert result.manifest.status == "complete" and result.manifest.protocol.mask_redraw == 1
    assert load_mask_assignment(tmp_path / "gate" / "mask_assignments.json").redraw == 1
    assert result.contributions.observations == 10


def test_gate_inputs_are_checked() -> None:
    with pytest.raises(GateInputError, match="checkpoint_id"):
        GateConfig(checkpoint_id=" ")
    with pytest.raises(GateInputError, match="samples_per_task"):
        GateConfig(checkpoint_id="c", samples_per_task=0)
    plan = {"skills": {"provider": "none"}, "model": {"model_id": "m", "transport": {"timeout": 1}},
            "prompt": {}, "runtime": {}, "environment": {}, "split": "val", "seed": 7, "pipeline_version": "v",
            "jobs": [[1, 0], [2, 0]]}
    masked = {**plan, "skills": {"provider": "mask_assignment"}, "model": {"model_id": "m"}}
    check_bare_plan(plan, masked)  # transport is left out of the comparison
    with pytest.raises(PairingError, match="skills"):
        check_bare_plan({**plan, "skills": {"provider": "skillbank"}}, masked)
    with pytest.raises(PairingError, match="job set"):
        check_bare_plan({**plan, "jobs": [[1, 0]]}, masked)
    with pytest.raises(PairingError, match="runtime"):
        check_bare_plan({**plan, "runtime": {"max_turns": 3}}, masked)


@pytest.mark.e2e
def test_killed_gate_a_resumes_without_duplicates_then_is_skipped(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path)
    draft = as_draft(SkillBank("draft-1", (PERSONA, BUDGET, NEUTRAL)))
    config = GateConfig(checkpoint_id="warmstart", task_limit=24, batch_size=8)
    bare_dir = tmp_path / "bare"
    run_eval(params, "val", None, None, bare_dir, policy=planted_policy(), progress=False, limit=24,
             store_root=small_store_root)
    gate = tmp_path / "gate-a"
    with pytest.raises(KeyboardInterrupt):
        run_gate_a(params, draft, gate, config, bare_run_dir=bare_dir, policy=KilledAfter(planted_policy(), 25),
                   store_root=small_store_root, progress=False)
    partial = completed_counts(gate / "traces.jsonl")
    assert 0 < len(partial) < 24
    assert json.loads((gate / "gate_a_manifest.json").read_text())["status"] == "running"
    result = run_gate_a(params, draft, gate, config, bare_run_dir=bare_dir, policy=planted_policy(),
                        store_root=small_store_root, progress=False)
    counts = completed_counts(gate / "traces.jsonl")
    assert len(counts) == 24 and set(counts.values()) == {1}
    assert set(completed_counts(bare_dir / "traces.jsonl").values()) == {1}
    assert result.manifest.status == "complete" and result.contributions.observations == 24
    assert result.contributions.primary.cov_type == "HC3"
    assert (gate / "contributions.csv").read_text().splitlines()[0].startswith("intervention_id,order,coefficient")
    assert result.selected_bank.bank_version == "cold-start-gate-a-selected-v2"
    assert all("draft_only" not in s.metadata for s in result.selected_bank.skills)
    lines = (gate / "traces.jsonl").read_text().count("\n")
    again = run_gate_a(params, draft, gate, config, bare_run_dir=bare_dir, policy=MustNotRun(planted_policy()),
                       store_root=small_store_root, progress=False)
    assert again.contributions == result.contributions
    assert (gate / "traces.jsonl").read_text().count("\n") == lines


@pytest.mark.e2e
def test_ranking_check_runs_fixed_banks_paired_with_the_gate_bare_run(tmp_path: Path, small_store_root: Path) -> None:
    params = make_params(tmp_path)
    draft = as_draft(SkillBank("draft-1", (PERSONA, BUDGET, NEUTRAL)))
    config = GateConfig(checkpoint_id="warmstart", task_limit=40, batch_size=8)
    gate = tmp_path / "gate-a"
    with pytest.raises(GateInputError, match="no complete gate manifest"):
        run_ranking_check(params, gate, {}, k=1, policy=planted_policy(), store_root=small_store_root)
    result = run_gate_a(params, draft, gate, config, policy=planted_policy(), store_root=small_store_root,
                        progress=False)
    additivity = result.manifest.outcomes.additivity.to_dict()
    assert set(additivity) == {"testable", "reason", "statistic", "p_value", "rejected"}
    assert json.loads((gate / "contributions.json").read_text())["additivity"]["metric"] == "reward"
    versions = {s.skill_id: s for s in draft.skills}
    with pytest.raises(GateInputError, match="no skill for ranked"):
        run_ranking_check(params, gate, {"persona": PERSONA}, k=1, policy=planted_policy(),
                          store_root=small_store_root)
    check = run_ranking_check(params, gate, versions, k=1, random_seeds=(3,), policy=planted_policy(),
                              store_root=small_store_root, progress=False)
    assert check.arms["top"] == ("persona",) and check.tasks == 40
    assert sorted(p.name for p in (gate / "ranking").iterdir()) == ["bottom", "random-3", "top"]
    assert check.means["r_success"]["top"] > check.means["r_success"]["bottom"]
    assert check.contrasts["r_success"]["top-bare"].ci95[0] > 0  # the planted persona chunk alone helps
    stored = json.loads((gate / "ranking_check.json").read_text())
    assert stored["episodes"] == 120 and stored["arms"]["top"] == ["persona"]
    assert set(stored["contrasts"]) == {"reward", "r_success"}


def test_compare_to_truth_reports_spearman_and_coverage() -> None:
    from intraskill.gate.contributions import MetricEstimate
    from intraskill.organism.gate_validation import compare_to_truth

    estimate = MetricEstimate(
        coefficients={"a": 0.30, "b": 0.10, "c": -0.05, "d": 0.0}, observations=40, masked_mean=0.5,
        bare_mean=0.4, delta_mean=0.1,
        conf_int_95={"a": (0.20, 0.40), "b": (0.05, 0.15), "c": (-0.10, 0.00), "d": (-0.05, 0.05)})
    truth = measured_truth({"a": (0.25, (0.2, 0.3)), "b": (0.20, None), "c": (-0.02, None), "d": (0.01, None)})
    report = compare_to_truth(estimate, truth)
    assert report.chunks == 4
    assert report.coverage == 0.75  # only b's truth (0.20) lies outside its CI [0.05, 0.15]
    assert report.per_chunk["b"].covered is False and report.per_chunk["c"].covered is True
    assert report.spearman == pytest.approx(1.0)  # ranks a > b > d > c on both sides
    # an unbiased gate with these CIs (se 0.025-0.05) ranks well-separated truths well, but not perfectly
    assert 0.5 < report.attainable_spearman < 1.0
    assert report.to_dict()["simulation"] == {"draws": 4000, "seed": 20260901}
    with pytest.raises(ValueError, match="no chunk"):
        compare_to_truth(estimate, measured_truth({"z": (0.1, None)}))


def measured_truth(effects: dict[str, tuple[float, tuple[float, float] | None]]) -> GroundTruth:
    """A ground truth of these chunk effects, each with its 95 % CI (``None``: measured without noise)."""
    chunks = {chunk: {"role": "helpful", "target": None, "bare_success": 0.4, "alone_success": 0.4 + effect,
                      "effect": effect, "ci95": ci95 or (effect, effect), "pairs": 40, "protocol_error_rate": 0.0}
              for chunk, (effect, ci95) in effects.items()}
    return GroundTruth.from_dict({"bank_sha256": "b" * 64, "catalog_sha256": "c" * 64, "split": "val",
                                  "episodes_per_arm": 40, "seed": 1, "metric": "r_success",
                                  "method": "task_level_paired_percentile", "bootstrap_samples": 100,
                                  "seed_base": 1, "chunks": chunks})


def test_attainable_spearman_falls_with_ties_within_noise() -> None:
    from intraskill.organism.gate_validation import attainable_spearman

    spread = [0.4, 0.3, 0.2, 0.1, 0.0]
    assert attainable_spearman(spread, [0.001] * 5, [0.001] * 5) == pytest.approx(1.0)
    # seven of eight effects tied within their noise (the organism's situation): ranks are mostly noise
    tied = [0.10] + [0.03] * 7
    expected = attainable_spearman(tied, [0.01] * 8, [0.03] * 8)
    assert 0.1 < expected < 0.5
    # exact ties measured without noise (a deterministic teacher ignoring a chunk) cost less
    assert attainable_spearman([0.15, 0.17, 0.03, 0.02, 0.0, 0.0, 0.0, 0.0], [0.02, 0.02, 0.01, 0.01, 0, 0, 0, 0],
                               [0.03] * 8) > 0.6
    assert attainable_spearman(tied, [0.01] * 8, [0.03] * 8, seed=1) != expected  # the seed is the only source
    assert attainable_spearman(tied, [0.01] * 8, [0.03] * 8) == expected
    with pytest.raises(ValueError, match="differ in length"):
        attainable_spearman([0.1, 0.2], [0.01], [0.01, 0.01])


@pytest.mark.e2e
def test_gate_figures_from_gate_directories(tmp_path: Path, small_store_root: Path) -> None:
    from intraskill.plots import chunk_contributions, skill_evolution
    from intraskill.plots.gates import gate_outcomes, gate_tables, gate_validation

    params, pool = make_params(tmp_path), planted_pool()
    config = GateConfig(checkpoint_id="round-000-checkpoint", task_limit=20)
    run_online_gate(params, pool, tmp_path / "gate", config, policy=planted_policy(), store_root=small_store_root,
                    progress=False)
    contributions, outcomes = gate_tables({0: tmp_path / "gate"})
    assert list(outcomes.columns[:3]) == ["round", "bare_success", "masked_success"]
    assert len(contributions) == 4 and contributions["ci_lo"].notna().all()
    for figure in (chunk_contributions(contributions), skill_evolution(contributions), gate_outcomes(outcomes)):
        assert figure.axes
    points = [{"chunk": "a", "truth": 0.1, "beta": 0.12, "ci_lo": 0.05, "ci_hi": 0.2, "mask_seed": 1}]
    assert gate_validation(points).axes


@pytest.mark.e2e
def test_cli_gate_run_on_a_round_directory(tmp_path: Path, small_store_root: Path) -> None:
    import shutil

    import yaml
    from typer.testing import CliRunner

    from intraskill.cli import app
    from intraskill.paths import store_dir
    from intraskill.skills.pool import save_pool

    params = make_params(tmp_path)
    shutil.copytree(small_store_root, store_dir("small", 11, params.experiment.run_root))
    params_file = tmp_path / "gate.yaml"
    params_file.write_text(yaml.safe_dump(params.model_dump(mode="json")), encoding="utf-8")
    round_dir = tmp_path / "round-000"
    save_pool(planted_pool(), round_dir / "analysis" / "candidate_pool.json")
    result = CliRunner().invoke(app, ["gate", "run", "--params", str(params_file), "--round-dir", str(round_dir),
                                      "--task-limit", "12", "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "complete" and report["gate_dir"] == str(round_dir / "gate")
    assert report["outcomes"]["columns"] == 4
    manifest = json.loads((round_dir / "gate" / "online_gate_manifest.json").read_text())
    assert manifest["config"]["checkpoint_id"] == "round-000-checkpoint"
    bad = CliRunner().invoke(app, ["gate", "run", "--params", str(params_file), "--round-dir", str(round_dir),
                                   "--task-limit", "3", "--out", str(tmp_path / "other"), "--allow-outside-run-root", "--no-progress"])
    assert bad.exit_code == 1 and "rank deficient" in bad.output
    gate_dir = str(round_dir / "gate")
    shown = CliRunner().invoke(app, ["gate", "show", gate_dir])
    assert shown.exit_code == 0 and "additivity (reward" in shown.output
    neither = CliRunner().invoke(app, ["gate", "ranking", "--params", str(params_file), "--gate-dir", gate_dir])
    assert neither.exit_code == 1 and "exactly one of --draft" in neither.output
    ranking = CliRunner().invoke(app, ["gate", "ranking", "--params", str(params_file), "--gate-dir", gate_dir,
                                       "--pool", str(round_dir / "analysis" / "candidate_pool.json"), "--k", "1",
                                       "--no-progress", "--json"])
    assert ranking.exit_code == 0, ranking.output
    assert json.loads(ranking.stdout)["tasks"] == 12 and (round_dir / "gate" / "ranking_check.json").is_file()
    assert "ranking r_success: top-bottom" in CliRunner().invoke(app, ["gate", "show", gate_dir]).output


def test_gate_config_from_params() -> None:
    """The gate's K, m and mask seed come from ``gate:``, its next curriculum from ``round:``; settings override."""
    default = params_from_dict({"experiment": {"name": "g"}})
    assert GateConfig.from_params(default, "c") == GateConfig(checkpoint_id="c")
    params = params_from_dict({"experiment": {"name": "g"},
                               "round": {"q": 0.3, "rho_min": 0.1, "rho_max": 0.8, "curriculum_seed": 5},
                               "gate": {"active_skill_budget": 3, "samples_per_task": 2, "mask_seed": 9}})
    config = GateConfig.from_params(params, "c", task_limit=4)
    assert (config.q, config.rho_min, config.rho_max, config.curriculum_seed) == (0.3, 0.1, 0.8, 5)
    assert (config.active_skill_budget, config.samples_per_task, config.mask_seed) == (3, 2, 9)
    assert (config.checkpoint_id, config.task_limit) == ("c", 4)
    assert GateConfig.from_params(params, "c", mask_seed=2).mask_seed == 2


@pytest.mark.e2e
def test_gate_b_reports_a_planted_effect_on_test_and_resumes(tmp_path: Path, small_store_root: Path) -> None:
    """Gate B: the same policy on the same test jobs bare and with S₀, paired; a planted +0.7 success effect of
    the profile chunk shows with an interval above 0, and a finished Gate B runs no episode again."""
    params, s0 = make_params(tmp_path), SkillBank("s0", (PERSONA, NEUTRAL))
    out = tmp_path / "gate-b"
    result = run_gate_b(params, s0, out, policy=planted_policy(), task_limit=30, store_root=small_store_root,
                        progress=False)
    assert result.tasks == 30 and result.episodes == 60 and sum(result.transitions.values()) == 30
    success = result.success
    assert success.ci[0] > 0.2 and success.difference == pytest.approx(success.s0 - success.bare)
    assert result.transitions["0->1"] > result.transitions["1->0"]
    skills = {name: {tuple(s["skill_id"] for s in t.provenance.get("selected_skills") or [])
                     for t in read_traces(out / name / "traces.jsonl")} for name in ("bare", "s0")}
    assert skills == {"bare": {()}, "s0": {("persona", "neutral")}}
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["alignment"]["plan"]["status"] == "matched" and comparison["paired"]["pairs"] == 30
    assert "Gate B on 30 test tasks" in result.statement() and (out / "comparison.md").is_file()
    again = run_gate_b(params, s0, out, policy=MustNotRun(planted_policy()), task_limit=30,
                       store_root=small_store_root, progress=False)
    assert again == result
    with pytest.raises(ValueError, match="Gate B needs an S₀ with an enabled chunk"):
        run_gate_b(params, SkillBank("empty", ()), tmp_path / "empty", policy=planted_policy(),
                   store_root=small_store_root)


def test_shipped_gate_validation_reads_as_the_live_one(small_store_root: Path, tmp_path: Path) -> None:
    """A finished validation shipped as compact records (no traces, one task record per job) loads into the same
    report as the live directory, through the same loader; a missing gate is named."""
    from intraskill.evaluate.task_records import RECORD_KEYS, run_task_records
    from intraskill.organism.gate_validation import (
        load_validation,
        load_warmstart_validation,
        ship_validation,
        teacher_truth,
        validate_on_teacher,
    )
    from intraskill.params import load_params
    from intraskill.paths import resolve_project_path
    from intraskill.skills.bank import load_skillbank

    root = Path(__file__).resolve().parents[1]
    ci, organism = load_params(root / "params" / "ci.yaml"), load_params(root / "params" / "organism_additive.yaml")
    params = params_from_dict({**ci.model_dump(), "warmstart": organism.warmstart.model_dump()})
    truth = teacher_truth(params, load_skillbank(resolve_project_path(params.warmstart.skills)), tasks=8,
                          store_root=small_store_root)
    live = tmp_path / "live"
    validate_on_teacher(params, live, seeds=[7], samples_per_task=1, task_limit=40, truth=truth,
                        store_root=small_store_root, progress=False)
    truth_dir = tmp_path / "truth"
    truth_dir.mkdir()
    truth.write(truth_dir / "ground_truth.json")
    shipped = ship_validation(live, truth_dir, tmp_path / "shipped", seeds=[7], samples=[1])[1]
    expected = load_warmstart_validation(live, truth_dir, seeds=[7], samples_per_task=1)
    drop = lambda report: {k: v for k, v in report.to_dict().items() if k != "warmstart_dir"}
    assert drop(shipped) == drop(expected) and shipped.task_limit == 40
    assert shipped.warmstart_dir == str(tmp_path / "shipped" / "warmstart")
    assert not list((tmp_path / "shipped").rglob("traces.jsonl"))
    masked = run_task_records(tmp_path / "shipped" / "m1" / "seed-7")
    assert len(masked) == shipped.per_seed[0].observations and set(masked[0]) == RECORD_KEYS
    assert len(run_task_records(tmp_path / "shipped" / "m1" / "bare-val")) == 40
    with pytest.raises(FileNotFoundError, match="seed-9"):
        load_validation(tmp_path / "shipped", truth, seeds=[7, 9], samples_per_task=1)
