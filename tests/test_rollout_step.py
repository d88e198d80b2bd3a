"""One rollout step with the scripted expert: shared treatments, triage and retries, admission wiring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import RuntimeConfig
from intraskill.chat.base import ChatRequest, Generation, SessionTokens
from intraskill.jsonl import read_jsonl
from intraskill.params import RoundParams
from intraskill.pipeline.rollout import RoundFiles, group_index, plan_wave, run_rollout_step
from intraskill.policy.expert_policy import ExpertPolicy, SkillConditionedLaw
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import Competences
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.curriculum import CurriculumError, CurriculumState, assign_group, build_curriculum
from intraskill.trace2skill.queue import read_analysis_queue
from intraskill.training.admission import UnscoredStreakError
from intraskill.training.metrics import rollout_step_metrics
from intraskill.training.triage import TriageClass

RUNTIME = RuntimeConfig(max_turns=30, max_tokens_per_turn=64, temperature=0.0)
LAW = SkillConditionedLaw(
    skill_for={"read_persona": "read-persona", "choose_options": "choose-options"},
    p_with={"read_persona": 1.0, "choose_options": 1.0},
    p_without={"read_persona": 0.0, "choose_options": 0.0},
)


def curriculum(q: float, seed: int = 20260901) -> CurriculumState:
    skills = [
        Skill("read-persona", "### Read the profile\n- Use the persona's preferences in the query.",
              metadata={"estimated_effect": 0.08}),
        Skill("choose-options", "### Choose every option\n- Select each option axis before buying.",
              metadata={"estimated_effect": 0.04}),
        Skill("check-price", "### Check the budget\n- Compare the price with the budget.",
              metadata={"estimated_effect": 0.01}),
    ]
    return build_curriculum(SkillBank("test-1", tuple(skills)), round_id="round-000", skill_free_probability=q,
                            seed=seed)


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def train_ids(small_store) -> list[int]:
    return list(small_store[0].task_ids("train"))


def step(engine, train_ids, root: Path, policy, cur, *, n=4, target=2, over=4, retry=True, **kwargs: Any):
    shape = RoundParams(n_samples_per_prompt=n, rollout_batch_size=target, over_sampling_batch_size=over,
                        full_skill_retry=retry, **kwargs.pop("config", {}))
    return run_rollout_step(policy, lambda: InProcessEnvironment(engine), cur, train_ids, shape, RUNTIME,
                            RoundFiles(root), seed=5, round_index=0, step=1, **kwargs)


def test_siblings_share_the_curriculum_treatment(engine, train_ids, tmp_path: Path) -> None:
    cur = curriculum(q=0.3)
    result = step(engine, train_ids, tmp_path, ExpertPolicy(law=LAW), cur, over=6, target=3)
    modes = set()
    for index, group in result.groups.items():
        expected = assign_group(cur, index)
        assert group.assignment == expected
        modes.add(expected.mode)
        siblings = [result.records[f"train-group-{index:09d}-sample-{k:09d}"] for k in range(4)]
        for record in siblings:
            assert record.assignment == expected.to_dict()
            assert record.injected_skill_ids == expected.skill_ids
            assert record.trace["provenance"]["training"] == {"round": 0, "step": 1, "wave": 0, "role": "rollout"}
    assert len(modes) >= 2, "the draw should give this step more than one treatment"
    metrics = rollout_step_metrics(result, cur, 0.3)
    assisted = [g.assignment for g in result.groups.values() if g.assignment.mode != "skill_free"]
    assert metrics["rollout/shopsim/skill_free_group_rate"] == pytest.approx(1 - len(assisted) / 6)
    share = sum("read-persona" in a.skill_ids for a in assisted) / len(assisted)
    assert metrics["rollout/shopsim/chunk/read-persona/inclusion_rate"] == pytest.approx(share)
    assert metrics["rollout/shopsim/chunk/read-persona/target_rho"] == pytest.approx(0.9)
    assert metrics["rollout/shopsim/q"] == 0.3


def test_a_changed_curriculum_is_refused_on_resume(engine, train_ids, tmp_path: Path) -> None:
    step(engine, train_ids, tmp_path, ExpertPolicy(law=LAW), curriculum(q=0.5))
    with pytest.raises(CurriculumError, match="ran under"):
        step(engine, train_ids, tmp_path, ExpertPolicy(law=LAW), curriculum(q=0.5, seed=1))


def test_all_wrong_groups_get_a_successful_full_skill_retry(engine, train_ids, tmp_path: Path) -> None:
    """q = 1: every group is skill-free, so the gated expert never reads the persona or picks options."""
    result = step(engine, train_ids, tmp_path, ExpertPolicy(law=LAW), curriculum(q=1.0))
    classes = [t.classification for t in result.triage]
    assert all(g.all_wrong for g in result.finished)
    assert set(classes) == {TriageClass.MODEL_INTERNALIZATION_DEFICIT}
    retries = read_jsonl(tmp_path / "retries.jsonl")
    assert len(retries) == 4 and all(r["episode_id"].endswith("-sample-000000004-full-skill-retry") for r in retries)
    assert all(r["provenance"]["skills"]["assignment"]["mode"] == "diagnostic_full_skill" for r in retries)
    assert all([s["skill_id"] for s in r["provenance"]["selected_skills"]] ==
               ["read-persona", "choose-options", "check-price"] for r in retries)
    trained = {r.episode_id for g in result.admission.accepted for r in g.rollouts}
    assert not trained & {r["episode_id"] for r in retries}
    metrics = rollout_step_metrics(result, None, 1.0)
    assert metrics["rollout/shopsim/all_wrong_group_rate"] == 1.0
    assert metrics["rollout/shopsim/full_skill_retry_success_rate"] == 1.0
    assert metrics["rollout/shopsim/internalization_deficit_rate"] == 1.0
    assert not (tmp_path / "analysis_queue.jsonl").exists()
    # zero-spread groups are dropped while spares remain, then admitted: 2 of 4 generated
    assert metrics["rollout/shopsim/zero_std_group_drop_count"] == 2
    assert metrics["rollout/shopsim/train_group_count"] == 2
    assert metrics["rollout/shopsim/group_count"] == 4


def test_failed_retries_are_queued_for_analysis(engine, train_ids, tmp_path: Path) -> None:
    blind = ExpertPolicy(Competences().without("read_persona").without("choose_options"))
    result = step(engine, train_ids, tmp_path, blind, curriculum(q=0.0))
    assert {t.classification for t in result.triage} == {TriageClass.FULL_SKILL_FAILURE_PENDING_ANALYSIS}
    queue = read_jsonl(tmp_path / "analysis_queue.jsonl")
    triage = read_jsonl(tmp_path / "triage.jsonl")
    assert [q["group_index"] for q in queue] == [t["group_index"] for t in triage] == sorted(result.groups)
    items = read_analysis_queue(tmp_path / "analysis_queue.jsonl")
    assert [item.episode_id for item in items] == [q["episode_id"] for q in queue]
    assert all(item.diagnostic_full_skill and item.split == "train" for item in items)
    for record in queue:
        assert record["trace"]["episode_id"] == record["episode_id"]
        assert record["trace"]["reward"]["r_success"] == 0.0
        assert record["trace"]["provenance"]["skills"]["assignment"]["mode"] == "diagnostic_full_skill"
        assert record["sibling_traces"] == "steps/step-0001/traces.jsonl"
    assert all(t["full_skill_retry"]["scored"] and t["schema_version"] == "shopsimrl-training-failure-triage-v1"
               for t in triage)
    # a second run of the step re-uses every episode and appends nothing
    again = step(engine, train_ids, tmp_path, blind, curriculum(q=0.0))
    assert again.generated_episodes == 0 and again.generated_retries == 0
    assert len(read_jsonl(tmp_path / "analysis_queue.jsonl")) == len(queue)
    assert len(read_jsonl(tmp_path / "triage.jsonl")) == len(triage)


def test_retries_can_be_disabled(engine, train_ids, tmp_path: Path) -> None:
    result = step(engine, train_ids, tmp_path, ExpertPolicy(law=LAW), curriculum(q=1.0), retry=False)
    assert {t.classification for t in result.triage} == {TriageClass.ALL_WRONG_RETRY_DISABLED}
    assert not (tmp_path / "retries.jsonl").exists()


class FailingSessions:
    """An expert whose generate raises for chosen sessions (their episodes end unscored)."""

    def __init__(self, failing: set[str]) -> None:
        self.policy, self.failing = ExpertPolicy(), failing

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        if any(r.session_id in self.failing for r in requests):
            raise RuntimeError("backend crashed")
        return self.policy.generate(requests)

    def end_session(self, session_id: str) -> SessionTokens | None:
        return self.policy.end_session(session_id)


def test_unscored_groups_are_always_dropped_and_trigger_a_new_wave(engine, train_ids, tmp_path: Path) -> None:
    first = group_index(0, 1, 0, 0, 2)
    policy = FailingSessions({f"train-group-{first:09d}-sample-000000001"})
    result = step(engine, train_ids, tmp_path, policy, curriculum(q=0.0), n=2, target=2, over=2)
    decisions = [(d.group_index, d.decision.value, d.reason) for d in result.admission.decisions]
    assert decisions[0] == (first, "dropped", "shopsim_unscored_technical_group")
    # the expert succeeds everywhere: zero-spread groups are dropped only while spares remain
    assert [d[1:] for d in decisions[1:]] == [("accepted", None), ("dropped", "shopsim_zero_std_group"),
                                              ("accepted", None)]
    assert result.waves == 2
    waves = {g.wave for g in result.groups.values()}
    assert waves == {0, 1}
    triage = {t.group.group_index: t.classification for t in result.triage}
    assert triage[first] is TriageClass.ENVIRONMENT_OR_RUNTIME_ERROR
    metrics = rollout_step_metrics(result, None, 0.0)
    assert metrics["rollout/shopsim/technical_group_drop_count"] == 1
    assert metrics["rollout/dynamic_filter/drop_shopsim_unscored_technical_group"] == 1
    assert metrics["rollout/shopsim/scored_rate"] == pytest.approx(7 / 8)
    assert metrics["rollout/shopsim/train_trajectory_count"] == 4


def test_consecutive_unscored_groups_abort(engine, train_ids, tmp_path: Path) -> None:
    shape = RoundParams(n_samples_per_prompt=2, rollout_batch_size=2, over_sampling_batch_size=2)
    failing = {f"train-group-{g.group_index:09d}-sample-000000000"
               for wave in range(3) for g in plan_wave(None, train_ids, shape, 5, 0, 1, wave)}
    with pytest.raises(UnscoredStreakError):
        step(engine, train_ids, tmp_path, FailingSessions(failing), None, n=2, target=2, over=2,
             config={"max_consecutive_failed_groups": 3})
