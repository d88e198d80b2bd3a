"""Episode admission (dynamic sampling filter) scenarios and metric denominators (method §3.4)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from reward_helpers import strict_reward

from intraskill.shop.reward import Reward
from intraskill.training.admission import (
    TECHNICAL_DROP_REASON,
    ZERO_STD_DROP_REASON,
    Decision,
    FinishedGroup,
    GroupAdmission,
    RolloutOutcome,
    UnscoredStreakError,
    admission_metrics,
    admit_groups,
)


def _group(index: int, rewards: list[float | None]) -> FinishedGroup:
    rollouts = []
    for k, r in enumerate(rewards):
        reward = None if r is None else strict_reward(r)
        rollouts.append(RolloutOutcome(f"g{index}-s{k}", k, f"g{index}-s{k}", reward))
    return FinishedGroup(index, tuple(rollouts))


def spread(i: int) -> FinishedGroup:
    return _group(i, [0.0, 1.0, 0.5, 0.0])


def tied(i: int, value: float = 0.0) -> FinishedGroup:
    return _group(i, [value] * 4)


def technical(i: int) -> FinishedGroup:
    return _group(i, [1.0, None, 0.0, 0.0])


def _decisions(result) -> list[tuple[str, str | None]]:
    return [(d.decision.value, d.reason) for d in result.decisions]


def test_technical_group_always_dropped_even_when_insufficient() -> None:
    result = admit_groups([technical(0), spread(1)], target=2)
    assert _decisions(result) == [("dropped", TECHNICAL_DROP_REASON), ("accepted", None)]
    assert not result.complete


def test_zero_std_dropped_only_while_spares_remain() -> None:
    # 5 submitted, target 3: two tied groups can be dropped, the third tie is kept (insufficient).
    groups = [tied(0), tied(1, 1.0), tied(2, 0.5), spread(3), spread(4)]
    result = admit_groups(groups, target=3)
    assert _decisions(result) == [
        ("dropped", ZERO_STD_DROP_REASON),
        ("dropped", ZERO_STD_DROP_REASON),
        ("accepted", None),
        ("accepted", None),
        ("accepted", None),
    ]
    assert result.complete and [g.group_index for g in result.accepted] == [2, 3, 4]


def test_target_reached_then_extra_finished_groups_discarded() -> None:
    result = admit_groups([spread(0), spread(1), tied(2), spread(3)], target=2)
    assert [d.decision for d in result.decisions] == [
        Decision.ACCEPTED,
        Decision.ACCEPTED,
        Decision.DISCARDED,
        Decision.DISCARDED,
    ]
    assert len(result.accepted) == 2


def test_spread_tolerance_is_inclusive_at_1e_minus_6() -> None:
    at_tol = _group(0, [0.0, 1e-6])
    above = _group(1, [0.0, 2e-6])
    result = admit_groups([at_tol, above, spread(2)], target=1)
    assert _decisions(result)[:2] == [("dropped", ZERO_STD_DROP_REASON), ("accepted", None)]


def test_release_step_one_shape_and_drop_rates() -> None:
    # Release step 1: 32 groups submitted, 4 technical drops, 12 zero-std drops, 16 admitted.
    groups = [technical(i) for i in range(4)] + [tied(i) for i in range(4, 20)]
    groups += [spread(i) for i in range(20, 32)]
    result = admit_groups(groups, target=16, wave_size=32)
    metrics = admission_metrics(result)
    assert result.complete and result.submitted == 32
    assert metrics["train_group_count"] == 16 and metrics["train_trajectory_count"] == 64
    assert metrics["technical_group_drop_count"] == 4 and metrics["zero_std_group_drop_count"] == 12
    assert metrics["technical_group_drop_rate"] == pytest.approx(0.2)  # 4 / (16 + 4)
    assert metrics["zero_std_group_drop_rate"] == pytest.approx(0.428571, abs=1e-6)  # 12 / (16 + 12)
    assert metrics["group_count"] == 32 and metrics["trajectory_count"] == 128


def test_generate_32_keep_16_gives_zero_std_rate_one_half() -> None:
    groups = [tied(i) if i % 2 == 0 else spread(i) for i in range(32)]
    metrics = admission_metrics(admit_groups(groups, target=16, wave_size=32))
    assert metrics["zero_std_group_drop_rate"] == 0.5
    assert metrics["technical_group_drop_rate"] == 0.0


def test_new_wave_after_technical_drops() -> None:
    admission = GroupAdmission(target=2)
    admission.submit(3)
    admission.offer(technical(0))
    assert not admission.needs_wave  # remaining 2 == target
    admission.offer(technical(1))
    assert admission.needs_wave  # remaining 1 < target
    with pytest.raises(ValueError, match="only 3 groups were submitted"):
        for i in (2, 3):
            admission.offer(spread(i))
    result = admit_groups([technical(0), technical(1), spread(2), tied(3), spread(4)], target=2, wave_size=3)
    assert result.submitted == 6 and result.complete
    assert _decisions(result)[3] == ("dropped", ZERO_STD_DROP_REASON)  # spares remain in the new wave


def test_unscored_streak_limit_raises_and_resets() -> None:
    with pytest.raises(UnscoredStreakError, match="8 consecutive groups"):
        admit_groups([technical(i) for i in range(8)], target=4)
    result = admit_groups([technical(i) for i in range(7)] + [spread(7)] + [technical(8)], target=4)
    assert result.unscored_streak == 1
    with pytest.raises(UnscoredStreakError):
        admit_groups([technical(0)], target=1, unscored_streak=7)


def test_outcome_metrics_denominators() -> None:
    groups = [_group(0, [1.0, 0.5, None, 0.0]), _group(1, [1.0, 1.0, 1.0, 1.0]), spread(2)]
    metrics = admission_metrics(admit_groups(groups, target=1))
    scored = [1.0, 0.5, 0.0, 1.0, 1.0, 1.0, 1.0]  # group 2 is discarded but still generated
    scored += [0.0, 1.0, 0.5, 0.0]
    assert metrics["trajectory_count"] == 12
    assert metrics["scored_rate"] == pytest.approx(11 / 12)
    assert metrics["reward_mean"] == pytest.approx(sum(scored) / 11)
    assert metrics["strict_reward_mean"] == metrics["reward_mean"]
    assert metrics["success_rate"] == pytest.approx(6 / 11)
    assert metrics["train_trajectory_count"] == 4


def test_empty_denominators_are_none() -> None:
    metrics = admission_metrics(admit_groups([], target=1))
    assert metrics["scored_rate"] is None and metrics["zero_std_group_drop_rate"] is None


def test_rollout_and_group_validation() -> None:
    with pytest.raises(ValueError, match="missing"):
        RolloutOutcome("r", 0, "r", Reward.from_dict({"reward": 1.0}))
    with pytest.raises(ValueError, match="r_success"):
        RolloutOutcome("r", 0, "r", replace(strict_reward(0.5), r_success=0.5))
    ok = RolloutOutcome("r", 0, "r", None)
    with pytest.raises(ValueError, match="repeats a rollout_id"):
        FinishedGroup(0, (ok, RolloutOutcome("r", 1, "r", None)))
    with pytest.raises(ValueError, match="target"):
        admit_groups([], target=0)


def test_from_episode_reads_runtime_result_shape() -> None:
    class Result:
        episode_id = "task-000001__sample-002"
        reward = strict_reward(0.4)

    outcome = RolloutOutcome.from_episode(Result(), sample_index=2)
    assert outcome.rollout_id == outcome.episode_id == "task-000001__sample-002"
    assert outcome.scored and not outcome.success
