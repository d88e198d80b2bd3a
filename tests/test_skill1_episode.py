"""The Skill1 trajectory end to end: the random-init ``ci`` organism, the real MiniLM encoder and the small store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from reward_helpers import strict_reward

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import RuntimeConfig
from intraskill.agent.skill1_episode import SKILL1_SKILL_PREFIX, protocol_error_counts
from intraskill.agent.skill1_replies import ReplyFailure
from intraskill.params import Skill1Params, load_params
from intraskill.pipeline.skill1 import (
    Skill1GroupRun,
    admitted_groups,
    run_skill1_groups,
    skill1_rollout,
    skill1_segments,
    skill1_update,
    util_reward,
    varying_groups,
)
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.skills.library import SkillLibrary
from intraskill.skills.retrieval import SentenceEncoder
from intraskill.training.skill1_rewards import skill1_step

CI_PARAMS = Path(__file__).resolve().parents[1] / "params" / "ci.yaml"
SEEDS = (("buying clothes in a given colour and size", "Select every option axis before buying.", 0.9),
         ("buying kitchen items under a price limit", "Compare prices on the results page.", 0.2),
         ("buying shoes", "Check the size first.", 0.5))


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return SentenceEncoder()


@pytest.fixture(scope="module")
def organism():
    from intraskill.policy.factory import build_policy

    params = load_params(CI_PARAMS)
    policy = build_policy(params.model, None, store=params.store, experiment=params.experiment)[0]
    return params, policy


@pytest.mark.e2e
def test_untrained_organism_runs_skill1_groups_and_updates(organism, organism_engine, encoder) -> None:
    params, policy = organism
    runtime = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    library = SkillLibrary()
    for desc, strat, utility in SEEDS:
        library.seed(desc, strat, utility)
    tasks, g = organism_engine.train_ids[:2], 3
    run = run_skill1_groups(policy, lambda: InProcessEnvironment(organism_engine), library, encoder, tasks, g,
                            runtime, seed=params.experiment.seed, round_index=0, step=1,
                            skill1=Skill1Params(top_k=2))
    episodes = run.episodes
    assert len(run.groups) == 2 and [len(group) for group in run.groups.values()] == [g, g]
    assert sorted(run.task_ids.values()) == sorted(tasks)
    # the untrained model writes no well-formed reply: each is a protocol error of its type, nothing crashes
    counts = protocol_error_counts(episodes)
    assert (counts["query"], counts["rank"], counts["distill"]) == (6, 6, 6), counts
    for episode in episodes:
        assert episode.result.scored and episode.success is False
        assert all(isinstance(f, ReplyFailure) and f.is_protocol_error for f in episode.failures())
        assert episode.query_text == episode.task.instruction  # method §10.2 fallback
        assert len(episode.retrieved) == 2 and episode.ranking is None
        assert episode.selected == episode.candidates[0].skill  # bad rank → the first retrieved
        injected = episode.result.trace.provenance["selected_skills"]
        assert [s["skill_id"] for s in injected] == [f"{SKILL1_SKILL_PREFIX}{episode.selected.skill_id}"]
        assert injected[0]["content"] == episode.selected.strat
        segments = skill1_segments(episode)
        assert [s.kind for s in segments] == ["query", "rerank", "act", "distill"]
        for segment in segments:
            mask = segment.tokens.loss_mask
            assert mask[0] == 0 and sum(mask) > 0
        for segment in (segments[0], segments[1], segments[3]):  # one single-turn reply: prompt, then the reply
            mask = segment.tokens.loss_mask
            first = mask.index(1)
            assert set(mask[first:]) == {1} and set(mask[:first]) == {0}
        assert segments[2].tokens is episode.result.session_tokens
    update = skill1_update(run, library, Skill1Params())
    rewards = update.step.rewards
    assert len(rewards) == 6 and all(r.r_util == 0.0 and r.r_rerank == 0.0 for r in rewards)
    assert all(r.u_hat == max(r.utilities) and r.r_distill == -r.u_hat for r in rewards)
    assert len(update.step.updated) == 12 and update.step.admissions == ()  # EMA over all K; nothing admitted
    assert all(skill.uses > 0 for skill in library.skills if skill.skill_id in {u.skill_id for u in update.step.updated})
    assert [len(group.rewards) for group in update.groups] == [3, 3]
    assert len(update.samples) == 4 * 6
    assert {s.rollout_id for s in update.samples} == {e.job.episode_id for e in episodes}


@pytest.mark.e2e
def test_empty_library_gives_no_rank_reply(organism, organism_engine, encoder) -> None:
    params, policy = organism
    runtime = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    library = SkillLibrary()
    run = run_skill1_groups(policy, lambda: InProcessEnvironment(organism_engine), library, encoder,
                            organism_engine.train_ids[:1], 2, runtime, seed=3, round_index=0, step=2)
    for episode in run.episodes:
        assert episode.candidates == () and episode.rank is None and episode.selected is None
        assert "rank" not in episode.reply_tokens and episode.protocol_errors["rank"] == 0
        assert episode.result.trace.provenance["selected_skills"] == []
        assert [s.kind for s in skill1_segments(episode)] == ["query", "act", "distill"]
    update = skill1_update(run, library)
    assert all(r.u_hat == 0.0 and r.r_rerank is None for r in update.step.rewards)
    assert len(update.samples) == 3 * 2 and len(library) == 0


def test_expert_writes_well_formed_replies_and_successes_are_admitted(organism_engine, encoder) -> None:

    library = SkillLibrary()
    for desc, strat, utility in SEEDS:
        library.seed(desc, strat, utility)
    runtime = RuntimeConfig(max_turns=30, temperature=0.0)
    run = run_skill1_groups(ExpertPolicy(seed=1), lambda: InProcessEnvironment(organism_engine), library, encoder,
                            organism_engine.train_ids[:3], 2, runtime, seed=5, round_index=0, step=1)
    episodes = run.episodes
    assert protocol_error_counts(episodes) == {"query": 0, "rank": 0, "act": 0, "distill": 0}
    for episode in episodes:
        assert episode.query_text == " ".join(episode.task.instruction.split())
        assert episode.ranking == tuple(range(len(episode.candidates))) and len(episode.candidates) == 3
        assert episode.distill.task_success is episode.success
        assert episode.reply_tokens == {}  # the expert records no token stream
    winners = [e for e in episodes if e.success]
    assert winners, "the expert buys the right product on some small-store tasks"
    rollouts = [skill1_rollout(e) for e in episodes]
    result = skill1_step(library, rollouts, 0, 1)
    assert [a.skill.provenance.task_id for a in result.admissions] == [e.job.task_id for e in winners]
    assert len(library) == 3 + len(winners)
    assert all(a.skill.desc == winners[0].distill.desc for a in result.admissions)
    # the zero-variance filter of an oversampled step: groups whose J_util rewards vary first, then the others
    order = list(run.groups)
    for kind in ("success", "strict"):
        varying = varying_groups(run, kind)
        assert varying == [i for i in order if len({util_reward(e, kind) for e in run.groups[i]}) > 1]
        oversampled = Skill1Params(oversample=True, util_reward=kind)
        assert admitted_groups(run, oversampled, 2) == tuple(sorted(
            (varying + [i for i in order if i not in varying])[:2], key=order.index))
    assert admitted_groups(run, Skill1Params(), 2) == tuple(order)  # no oversampling: every scored group
    # the expert wins every rollout here: losing and half-right copies of a winner make the groups vary
    winner = winners[0]
    loser, half = (dataclasses.replace(winner, result=dataclasses.replace(winner.result, reward=strict_reward(r)))
                   for r in (0.0, 0.5))
    mixed = Skill1GroupRun(0, 1, {5: 0, 6: 0, 7: 0, 8: 0}, {5: (loser, loser), 6: (loser, half),
                                                             7: (loser, winner), 8: (winner, winner)})
    assert varying_groups(mixed, "success") == [7] and varying_groups(mixed, "strict") == [6, 7]
    assert admitted_groups(mixed, Skill1Params(oversample=True), 1) == (7,)
    assert admitted_groups(mixed, Skill1Params(oversample=True), 2) == (5, 7)  # topped up, in plan order
    assert admitted_groups(mixed, Skill1Params(oversample=True, util_reward="strict"), 2) == (6, 7)
