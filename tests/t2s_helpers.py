"""Real failed full-skill retries for the Trace2Skill tests: the scripted expert with a competence off."""

from __future__ import annotations

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import Competences
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import render_chunk
from intraskill.trace2skill.mechanisms import MECHANISMS
from intraskill.trace2skill.queue import AnalysisItem

OPTION_CHUNK = Skill("chunk-options", "### Options\n\n- Applies when: a product page\n- Procedure:\n  1. pick\n"
                     "- Verify: all axes\n- Avoid: guessing", version="active-1",
                     metadata={"mechanism": "option_selection", "estimated_effect": 0.01})
QUERY_CHUNK = Skill("chunk-query", render_chunk(MECHANISMS["query_formulation"].chunk), version="active-1",
                    metadata={"competence": "read_persona", "estimated_effect": 0.02})
BANK = SkillBank("organism-test-s0", (QUERY_CHUNK, OPTION_CHUNK))


def failed_retries(engine: ShopEngine, task_ids: list[int], without: str, bank: SkillBank = BANK,
                   limit: int = 4) -> list[AnalysisItem]:
    """Play the expert without ``without`` as full-skill retries (all bank chunks injected); the failures."""
    jobs = [EpisodeJob.create(task_id, 8, seed=3, skills=bank.enabled_skills()) for task_id in task_ids]
    results = run_episodes(ExpertPolicy(Competences().without(without)), lambda: InProcessEnvironment(engine),
                           jobs, RuntimeConfig(), progress=False)
    items = []
    for index, result in enumerate(results):
        if result.scored and result.reward.r_success == 0:
            episode = f"train-group-{index:09d}-sample-000000008-full-skill-retry"
            result.trace.episode_id = episode
            items.append(AnalysisItem(episode, index, result.task_id, "train", True, result.trace))
    return items[:limit]
