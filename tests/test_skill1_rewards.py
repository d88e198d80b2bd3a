"""Skill1 rewards and Algorithm 1's update order against hand-computed values (docs/method.md §10.2)."""

from __future__ import annotations

import itertools
import math

import pytest

from intraskill.skills.library import SkillLibrary
from intraskill.training.skill1_rewards import (
    DistilledSkill,
    Skill1Rollout,
    ndcg,
    random_order_ndcg,
    rollout_rewards,
    skill1_step,
)

LOG2_3 = math.log2(3)


def test_ndcg_hand_computed() -> None:
    # Gains are the candidates' U. Ranking (1, 0) over U = (0.8, 0.4):
    # DCG = 0.4/log2 2 + 0.8/log2 3, IDCG = 0.8/log2 2 + 0.4/log2 3.
    expected = (0.4 + 0.8 / LOG2_3) / (0.8 + 0.4 / LOG2_3)
    assert ndcg([1, 0], [0.8, 0.4]) == pytest.approx(expected)
    assert expected == pytest.approx(0.859719, abs=1e-6)
    assert ndcg([0, 1], [0.8, 0.4]) == 1.0
    assert ndcg([2, 0, 1], [0.5, 1.0, 0.25]) == pytest.approx(
        (0.25 + 0.5 / LOG2_3 + 1.0 / 2) / (1.0 + 0.5 / LOG2_3 + 0.25 / 2)
    )
    assert ndcg([1, 0], [0.8, 0.4], cutoff=1) == pytest.approx(0.4 / 0.8)  # NDCG@1 = U(z) / max U
    assert ndcg([1, 0], [0.3, 0.3]) == 1.0  # ties are interchangeable
    assert ndcg([1, 0], [0.0, 0.0]) == 1.0  # every ordering is ideal
    with pytest.raises(ValueError, match="permutation"):
        ndcg([0, 0], [0.1, 0.2])


def _library() -> SkillLibrary:
    library = SkillLibrary(capacity=4)
    library.seed("d0", "s0", utility=0.8, uses=1)
    library.seed("d1", "s1", utility=0.4, uses=1)
    library.seed("d2", "s2", utility=0.0, uses=0)
    return library


def test_step_rewards_ema_then_admission_in_order() -> None:
    library = _library()
    rollouts = [
        Skill1Rollout("A", 11, 1.0, retrieved=(0, 1), ranking=(1, 0), distilled=DistilledSkill("dx", "sx")),
        Skill1Rollout("B", 11, 0.0, retrieved=(1, 2), ranking=(0, 1), distilled=DistilledSkill("dy", "sy")),
        Skill1Rollout("C", 12, 1.0, distilled=DistilledSkill("dz", "sz")),
        Skill1Rollout("D", 12, 0.0, retrieved=(0,), ranking=None),
    ]
    result = skill1_step(library, rollouts, round_index=2, step=5)
    a, b, c, d = result.rewards
    # Û and R_distill use the U of the start of the step (0.8, not the post-EMA 0.81).
    assert (a.r_util, a.u_hat, a.r_distill, a.selected) == (1.0, 0.8, pytest.approx(0.2), 1)
    assert a.r_rerank == pytest.approx(0.859719, abs=1e-6)
    assert (b.u_hat, b.r_distill, b.r_rerank, b.selected) == (0.4, -0.4, 1.0, 1)
    assert (c.u_hat, c.r_distill, c.r_rerank, c.selected) == (0.0, 1.0, None, None)  # empty retrieval
    assert (d.u_hat, d.r_distill, d.r_rerank, d.selected) == (0.8, -0.8, 0.0, 0)  # unparseable <rank>
    # The EMA runs over every retrieved skill of every rollout, in rollout order.
    assert [(s.skill_id, round(s.utility, 6), s.uses) for s in result.updated] == [
        (0, 0.81, 2),
        (1, 0.43, 2),
        (1, 0.4085, 3),
        (2, 0.0, 1),
        (0, 0.7695, 3),
    ]
    # Admission follows the EMA: only r = 1 rollouts, at the initial U; the full library evicts the lowest
    # post-EMA score (skill 2: U = 0).
    (x, z) = result.admissions
    assert (x.skill.desc, x.skill.utility, x.skill.uses, x.evicted) == ("dx", 0.5, 0, None)
    assert (z.skill.desc, z.evicted.skill_id) == ("dz", 2)
    assert (z.skill.provenance.task_id, z.skill.provenance.round, z.skill.provenance.step) == (12, 2, 5)
    assert [s.skill_id for s in library.skills] == [0, 1, 3, 4]


def test_rewards_see_no_update_from_the_same_step() -> None:
    library = _library()
    rollout = Skill1Rollout("A", 1, 1.0, retrieved=(0,), ranking=(0,))
    before = rollout_rewards(rollout, library)
    result = skill1_step(library, [rollout, rollout], round_index=0, step=0)
    assert result.rewards == (before, before)  # the second rollout's Û is still 0.8
    assert library.get(0).utility == pytest.approx(0.95 * (0.95 * 0.8 + 0.05) + 0.05)


def test_rollout_validation() -> None:
    with pytest.raises(ValueError, match="reward must be 0 or 1"):
        Skill1Rollout("A", 1, 0.5)
    with pytest.raises(ValueError, match=r"ranking must be a permutation of 0..1"):
        Skill1Rollout("A", 1, 1.0, retrieved=(3, 4), ranking=(0,))


@pytest.mark.parametrize("cutoff", [None, 1])
def test_random_order_baseline_gives_a_random_ranking_zero_expected_advantage(cutoff: int | None) -> None:
    # Young skills all near U = 0.5 with K = 3: without a baseline every ordering scores ~0.9-1 (a near-constant
    # positive reward); minus the random-order baseline a uniformly random ranking gets 0 in expectation.
    library = SkillLibrary(capacity=4)
    for i, utility in enumerate((0.55, 0.5, 0.45)):
        library.seed(f"d{i}", f"s{i}", utility=utility, uses=1)
    orders = list(itertools.permutations(range(3)))
    plain = [rollout_rewards(Skill1Rollout("r", 1, 1.0, (0, 1, 2), order), library, cutoff) for order in orders]
    based = [rollout_rewards(Skill1Rollout("r", 1, 1.0, (0, 1, 2), order), library, cutoff, "random_order")
             for order in orders]
    assert min(r.r_rerank for r in plain) > 0.8 and all(r.rerank_advantage == r.r_rerank for r in plain)
    assert math.fsum(r.rerank_advantage for r in based) / len(orders) == pytest.approx(0.0, abs=1e-12)
    assert [r.r_rerank for r in based] == [r.r_rerank for r in plain]  # NDCG itself is unchanged
    best = based[orders.index((0, 1, 2))]
    assert best.rerank_advantage > 0 and based[orders.index((2, 1, 0))].rerank_advantage < 0
    assert random_order_ndcg([0.8, 0.4], cutoff=1) == pytest.approx(0.75)  # (0.8 + 0.4) / 2 / 0.8
    assert random_order_ndcg([0.0, 0.0]) == 1.0  # every ordering is ideal: the advantage is 0
