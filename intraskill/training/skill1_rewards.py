"""Skill1's per-rollout rewards and the library updates of one rollout step, in Algorithm 1's order.

Reference: docs/method.md §10.2. For every rollout of the step, with the library as it was
at the start of the step (batch-synchronous: all rollouts saw the same library):

1. R_util = r ∈ {0, 1};
2. Û = max U over the retrieved K (0 when nothing was retrieved, method §10.2);
3. R_distill = r − Û;
4. R_rerank = NDCG of the policy's ranking against the ordering by U (``None`` without candidates; 0 for an
   unparseable ``<rank>`` reply, method §10.2);

then the EMA U ← (1 − α)U + α·r over **every** retrieved skill of every rollout (rollout order), then the
admission of the distilled skills of successful rollouts. :func:`skill1_step` does all of it and returns
every quantity, so the order is visible in its result.

**NDCG gain.** The graded gain of a candidate is its utility U (the reference's first option, method §10.2):
DCG(σ) = Σ_i U(σ(i)) / log2(i + 1) over positions i = 1…k, NDCG = DCG(σ) / DCG(argsort(−U)). Graded gains
need no tie-breaking (candidates with equal U are interchangeable) and give partial credit in proportion to
how much utility the ranking puts first. When every U is 0 every ordering is ideal and NDCG is 1.

**Rerank baseline.** The paper trains J_rerank by REINFORCE on the raw NDCG with no baseline (§A.3). With graded
gains near one another (U ≈ 0.5 for every young skill) nearly every ordering scores close to 1, so the raw reward
is a near-constant positive push on whatever the policy ranked. ``rerank_baseline="random_order"`` subtracts the
NDCG a uniformly random ordering of the *same* candidates scores in expectation, E[NDCG] = mean(U)·Σ_{i≤k}
1/log2(i + 1) / IDCG (every position holds each candidate with probability 1/K): a per-rollout baseline that
compares no two rollouts (their candidate sets differ), under which a random ranking has zero expected advantage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from intraskill.skills.library import Admission, LibrarySkill, SkillLibrary, SkillProvenance


@dataclass(frozen=True)
class DistilledSkill:
    """A parsed distillation reply: ``desc`` from ``description_head``, ``strat`` from the lessons
    (method §10.1, step 5)."""

    desc: str
    strat: str


@dataclass(frozen=True)
class Skill1Rollout:
    """What one rollout contributes to the step.

    ``retrieved`` are the skill ids of B_K in retrieval order; ``ranking`` is the policy's permutation of
    positions ``0…K−1`` into ``retrieved`` (most useful first), or ``None`` when the ``<rank>`` reply did
    not parse; ``distilled`` is ``None`` when the distillation reply did not parse.
    """

    rollout_id: str
    task_id: int
    reward: float
    retrieved: tuple[int, ...] = ()
    ranking: tuple[int, ...] | None = None
    distilled: DistilledSkill | None = None

    def __post_init__(self) -> None:
        if self.reward not in (0.0, 1.0):
            raise ValueError(f"rollout {self.rollout_id!r}: reward must be 0 or 1, got {self.reward!r}")
        if len(set(self.retrieved)) != len(self.retrieved):
            raise ValueError(f"rollout {self.rollout_id!r}: retrieved skill ids repeat: {self.retrieved}")
        if self.ranking is not None and sorted(self.ranking) != list(range(len(self.retrieved))):
            raise ValueError(
                f"rollout {self.rollout_id!r}: ranking must be a permutation of "
                f"0..{len(self.retrieved) - 1}, "
                f"got {self.ranking}"
            )

    @property
    def selected(self) -> int | None:
        """z: the top-ranked candidate's skill id (the first retrieved when the ranking did not parse)."""
        if not self.retrieved:
            return None
        return self.retrieved[self.ranking[0] if self.ranking else 0]


@dataclass(frozen=True)
class Skill1RolloutRewards:
    """The rewards of one rollout, all computed with the U of the start of the step."""

    rollout_id: str
    selected: int | None
    utilities: tuple[float, ...]
    r_util: float
    u_hat: float
    r_distill: float
    r_rerank: float | None
    rerank_baseline: float = 0.0

    @property
    def rerank_advantage(self) -> float | None:
        """R_rerank minus its baseline: the REINFORCE weight of the rank reply (``None`` without candidates)."""
        return None if self.r_rerank is None else self.r_rerank - self.rerank_baseline


@dataclass(frozen=True)
class Skill1StepResult:
    """:func:`skill1_step`'s output: rewards (before any update), EMA-updated records in application order,
    then admissions."""

    rewards: tuple[Skill1RolloutRewards, ...]
    updated: tuple[LibrarySkill, ...]
    admissions: tuple[Admission, ...]


def ndcg(ranking: Sequence[int], gains: Sequence[float], cutoff: int | None = None) -> float:
    """NDCG@cutoff of ``ranking`` (positions into ``gains``) with graded ``gains``; 1.0 when all gains are 0.

    >>> round(ndcg([1, 0], [1.0, 0.5]), 6)  # (0.5 + 1/log2 3) / (1 + 0.5/log2 3)
    0.859719
    """
    if sorted(ranking) != list(range(len(gains))):
        raise ValueError(f"ranking must be a permutation of 0..{len(gains) - 1}, got {list(ranking)}")
    k = len(gains) if cutoff is None else min(cutoff, len(gains))
    if k < 1:
        raise ValueError(
            f"ndcg needs at least one ranked position, got cutoff={cutoff} over {len(gains)} gains"
        )

    def dcg(order: Sequence[float]) -> float:
        return math.fsum(g / math.log2(i + 2) for i, g in enumerate(order[:k]))

    ideal = dcg(sorted(gains, reverse=True))
    return 1.0 if ideal == 0 else dcg([gains[i] for i in ranking]) / ideal


def random_order_ndcg(gains: Sequence[float], cutoff: int | None = None) -> float:
    """The expected :func:`ndcg` of a uniformly random ranking of ``gains`` (the ``random_order`` baseline).

    >>> round(random_order_ndcg([1.0, 0.0], cutoff=1), 6)  # U(z)/max U is 1 or 0 with probability 1/2
    0.5
    """
    if not gains:
        raise ValueError("random_order_ndcg needs at least one gain")
    k = len(gains) if cutoff is None else min(cutoff, len(gains))
    ideal = math.fsum(g / math.log2(i + 2) for i, g in enumerate(sorted(gains, reverse=True)[:k]))
    if ideal == 0:
        return 1.0
    mean_gain = math.fsum(gains) / len(gains)
    return mean_gain * math.fsum(1 / math.log2(i + 2) for i in range(k)) / ideal


RerankBaseline = Literal["none", "random_order"]


def rollout_rewards(
    rollout: Skill1Rollout, library: SkillLibrary, ndcg_cutoff: int | None = None,
    rerank_baseline: RerankBaseline = "none",
) -> Skill1RolloutRewards:
    """R_util, Û, R_distill, R_rerank and its baseline (module docstring) of one rollout under the current U."""
    utilities = tuple(library.get(i).utility for i in rollout.retrieved)
    u_hat = max(utilities, default=0.0)
    if not utilities:
        r_rerank = None
    elif rollout.ranking is None:
        r_rerank = 0.0
    else:
        r_rerank = ndcg(rollout.ranking, utilities, ndcg_cutoff)
    baseline = random_order_ndcg(utilities, ndcg_cutoff) if utilities and rerank_baseline == "random_order" else 0.0
    return Skill1RolloutRewards(
        rollout.rollout_id,
        rollout.selected,
        utilities,
        rollout.reward,
        u_hat,
        rollout.reward - u_hat,
        r_rerank,
        baseline,
    )


def skill1_step(
    library: SkillLibrary,
    rollouts: Sequence[Skill1Rollout],
    round_index: int,
    step: int,
    ndcg_cutoff: int | None = None,
    rerank_baseline: RerankBaseline = "none",
) -> Skill1StepResult:
    """Rewards for every rollout, then the EMA over every retrieved skill, then admission (Algorithm 1, 9–13).

    ``ndcg_cutoff=1`` scores only the top choice (the scripts' ``rerank_train_top1``, method §10.4
    [inferred]). The caller commits the library's store after this call and takes the θ update afterwards.
    """
    rewards = tuple(rollout_rewards(r, library, ndcg_cutoff, rerank_baseline) for r in rollouts)
    updated = tuple(library.update(skill_id, r.reward) for r in rollouts for skill_id in r.retrieved)
    admissions = []
    for rollout in rollouts:
        if rollout.distilled is None:
            continue
        provenance = SkillProvenance("distilled", rollout.task_id, round_index, step)
        admission = library.admit(rollout.distilled.desc, rollout.distilled.strat, rollout.reward, provenance)
        if admission is not None:
            admissions.append(admission)
    return Skill1StepResult(rewards, updated, tuple(admissions))
