"""Triage: classes, retry identity, record schema and frontier metrics (method §3.1–3.2)."""

from __future__ import annotations

import json

import pytest
from reward_helpers import strict_reward

from intraskill.training.admission import FinishedGroup, RolloutOutcome
from intraskill.training.triage import (
    TRIAGE_SCHEMA,
    RetryOutcome,
    TriageClass,
    classify_group,
    frontier_metrics,
    needs_full_skill_retry,
    retry_episode_id,
    retry_sample_index,
    triage_group,
)


def _group(index: int, rewards: list[float | None], indices: list[int] | None = None) -> FinishedGroup:
    indices = indices or list(range(len(rewards)))
    rollouts = tuple(
        RolloutOutcome(f"e{index}-{k}", k, f"e{index}-{k}", None if r is None else strict_reward(r))
        for k, r in zip(indices, rewards)
    )
    return FinishedGroup(index, rollouts)


def _retry(group: FinishedGroup, reward: float | None) -> RetryOutcome:
    scored = None if reward is None else strict_reward(reward)
    return RetryOutcome("runs/r0/group-000000001/full-skill-retry.json", retry_episode_id(group), scored)


ALL_WRONG = [0.0, 0.5, 0.25, 0.0]


def test_all_wrong_is_strict() -> None:
    assert _group(0, ALL_WRONG).all_wrong
    assert not _group(0, [0.0, 1.0, 0.0]).all_wrong
    assert not _group(0, [0.0, None, 0.0]).all_wrong  # unscored sibling: not all-wrong
    assert needs_full_skill_retry(_group(0, ALL_WRONG))
    assert not needs_full_skill_retry(_group(0, ALL_WRONG), retry_enabled=False)


@pytest.mark.parametrize(
    ("rewards", "retry_reward", "enabled", "expected"),
    [
        ([0.0, 1.0, 0.3], None, True, TriageClass.NOT_FRONTIER),
        ([1.0, None, 0.0], None, True, TriageClass.ENVIRONMENT_OR_RUNTIME_ERROR),  # unscored beats success
        (ALL_WRONG, "unscored", True, TriageClass.ENVIRONMENT_OR_RUNTIME_ERROR),
        (ALL_WRONG, 1.0, True, TriageClass.MODEL_INTERNALIZATION_DEFICIT),
        (ALL_WRONG, 0.5, True, TriageClass.FULL_SKILL_FAILURE_PENDING_ANALYSIS),
        (ALL_WRONG, None, False, TriageClass.ALL_WRONG_RETRY_DISABLED),
    ],
)
def test_classes(rewards, retry_reward, enabled, expected) -> None:
    group = _group(3, rewards)
    retry = None
    if retry_reward == "unscored":
        retry = _retry(group, None)
    elif retry_reward is not None:
        retry = _retry(group, retry_reward)
    assert classify_group(group, retry, enabled) is expected


def test_classification_errors() -> None:
    group = _group(1, ALL_WRONG)
    with pytest.raises(ValueError, match="run its full-skill retry first"):
        classify_group(group, None, retry_enabled=True)
    with pytest.raises(ValueError, match="not all-wrong"):
        classify_group(_group(2, [1.0, 0.0]), _retry(group, 0.0))
    with pytest.raises(ValueError, match="-full-skill-retry"):
        RetryOutcome("x.json", "train-group-000000001-sample-000000004", None)


def test_retry_identity() -> None:
    group = _group(42, [0.0, 0.0, 0.0], indices=[0, 7, 3])
    assert retry_sample_index(group) == 8
    assert retry_episode_id(group) == "train-group-000000042-sample-000000008-full-skill-retry"


def test_record_to_dict_schema() -> None:
    group = _group(9, [0.0, 0.0], indices=[1, 0])
    retry = _retry(group, 0.0)
    assignment = {"mode": "assisted", "skill_ids": ["c1"]}
    record = triage_group(group, {"state_id": "s0", "sha256": "ab"}, assignment, retry)
    data = json.loads(json.dumps(record.to_dict()))
    assert data["schema_version"] == TRIAGE_SCHEMA == "shopsimrl-training-failure-triage-v1"
    assert data["classification"] == "full_skill_failure_pending_analysis"
    assert data["curriculum"] == {"identity": {"state_id": "s0", "sha256": "ab"}}
    assert data["assignment"]["skill_ids"] == ["c1"]
    assert [s["sample_index"] for s in data["siblings"]] == [0, 1]
    first = {"sample_index": 0, "episode_id": "e9-0", "reward": strict_reward(0.0).to_dict(), "scored": True}
    assert data["siblings"][0] == first
    assert data["full_skill_retry"] == {
        "trace_path": retry.trace_path,
        "episode_id": "train-group-000000009-sample-000000002-full-skill-retry",
        "reward": strict_reward(0.0).to_dict(),
        "scored": True,
    }
    assert triage_group(_group(1, [1.0]), {}, {}).to_dict()["full_skill_retry"] is None


def test_frontier_metrics_reproduce_release_step_one() -> None:
    # Release step 1: 32 groups, 4 with an unscored sibling, 3 all-wrong with failed retries.
    records = [triage_group(_group(i, [1.0, None, 0.0]), {}, {}) for i in range(4)]
    for i in range(4, 7):
        group = _group(i, ALL_WRONG)
        records.append(triage_group(group, {}, {}, _retry(group, 0.0)))
    records += [triage_group(_group(i, [1.0, 0.0]), {}, {}) for i in range(7, 32)]
    metrics = frontier_metrics(records)
    assert metrics["all_wrong_group_rate"] == pytest.approx(0.107143, abs=1e-6)  # 3 / 28 scored groups
    assert metrics["full_skill_retry_rate"] == pytest.approx(0.09375)  # 3 / 32
    assert metrics["full_skill_retry_success_rate"] == 0.0
    assert metrics["internalization_deficit_rate"] == 0.0
    assert metrics["pending_analysis_rate"] == pytest.approx(0.09375)
    assert metrics["runtime_error_group_rate"] == pytest.approx(0.125)  # 4 / 32


def test_retry_success_rate_is_over_scored_retries() -> None:
    records = []
    for i, retry_reward in enumerate([1.0, 0.0, None, 1.0]):
        group = _group(i, ALL_WRONG)
        records.append(triage_group(group, {}, {}, _retry(group, retry_reward)))
    metrics = frontier_metrics(records)
    assert metrics["full_skill_retry_rate"] == 1.0
    assert metrics["full_skill_retry_success_rate"] == pytest.approx(2 / 3)
    assert metrics["internalization_deficit_rate"] == 0.5
    assert metrics["runtime_error_group_rate"] == 0.25
    assert frontier_metrics([])["all_wrong_group_rate"] is None
