"""A co-evolution run directory whose one gate is real and planted: the scripted expert behind a
:class:`SkillConditionedLaw` where the REWRITE of chunk ``persona`` teaches the persona competence and the ADD
candidate teaches option choice, while ``persona`` and ``neutral`` themselves teach nothing. The gate then
rewrites ``persona``, adds the ADD and retires ``neutral``: every status of a version page, from real
rollouts and the real estimator."""

from __future__ import annotations

from pathlib import Path

from intraskill.layout import RunDir, round_id
from intraskill.params import Params, params_from_dict
from intraskill.pipeline.coevolve import CoEvolveSummary, RoundSummary
from intraskill.pipeline.gate_run import GateConfig, run_online_gate
from intraskill.policy.expert_policy import ExpertPolicy, SkillConditionedLaw
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.curriculum import build_curriculum, save_curriculum
from intraskill.skills.pool import (
    Candidate,
    CandidatePool,
    build_candidate_pool,
    online_candidate_id,
    save_pool,
)
from intraskill.trace2skill.ledger import add_proposals

PERSONA = Skill("persona", "### Read the profile\n- Search with the profile brand.", version="s0-1",
                metadata={"estimated_effect": 0.05})
NEUTRAL = Skill("neutral", "### Be polite\n- Write short messages.", version="s0-1", metadata={"estimated_effect": 0.02})
REWRITE_TEXT = "### Read the profile (rewritten)\n- Search with every profile preference."
ADD_TEXT = "### Pick the options\n- Select the colour and size the profile names."
REWRITE_ID = online_candidate_id("REWRITE", "persona", REWRITE_TEXT)
ADD_ID = online_candidate_id("ADD", None, ADD_TEXT)


def planted_params(run_root: Path) -> Params:
    return params_from_dict({
        "experiment": {"name": "planted", "seed": 7, "run_root": str(run_root)},
        "store": {"scale": "small", "seed": 11},
        "model": {"spec": "expert", "device": "cpu"},
        "sampling": {"temperature": 1.0, "max_tokens_per_turn": 48, "max_turns": 30},
        "evaluation": {"repeats": 1, "task_limit": None, "bootstrap_samples": 1000},
    })


def planted_pool() -> CandidatePool:
    rewrite = Candidate(REWRITE_ID, "REWRITE", "persona", REWRITE_TEXT,
                        {"title": "profile rewrite", "proposal_checkpoint": "round-000-checkpoint"})
    add = Candidate(ADD_ID, "ADD", None, ADD_TEXT, {"title": "options", "proposal_checkpoint": "round-000-checkpoint"})
    return build_candidate_pool(SkillBank("planted-1", (PERSONA, NEUTRAL)), (rewrite, add), round_id=round_id(0),
                                proposal_checkpoint="round-000-checkpoint")


def write_planted_coevolve(run_dir: Path, store_root: Path) -> Path:
    """``run_dir`` laid out as a one-round co-evolution run (curriculum, analysis pool, gate, summary)."""
    params = planted_params(run_dir.parent / "scratch")
    root = run_dir / round_id(0)
    r = params.round
    save_curriculum(build_curriculum(SkillBank("planted-1", (PERSONA, NEUTRAL)), round_id=round_id(0),
                                     skill_free_probability=r.q, rho_min=r.rho_min, rho_max=r.rho_max,
                                     seed=r.curriculum_seed), root / "curriculum.json")
    pool = planted_pool()
    save_pool(pool, root / "analysis" / "candidate_pool.json")
    law = SkillConditionedLaw(skill_for={"read_persona": REWRITE_ID, "choose_options": ADD_ID},
                              p_with={"read_persona": 0.95, "choose_options": 0.95},
                              p_without={"read_persona": 0.1, "choose_options": 0.1})
    result = run_online_gate(params, pool, root / "gate", GateConfig(checkpoint_id="round-000-checkpoint"),
                             ledger=add_proposals([], pool), policy=ExpertPolicy(seed=7, law=law),
                             store_root=store_root, progress=False)
    CoEvolveSummary(fingerprint="planted", rounds=[RoundSummary(
        round_index=0, root=str(root), checkpoint=str(root / "checkpoint" / "model"),
        pool_path=str(root / "analysis" / "candidate_pool.json"), gate_status=result.manifest.status,
        curriculum_path=None, gate_dir=str(result.gate_dir), gate_outcomes=result.manifest.outcomes)],
    ).write(RunDir(run_dir).summary)
    return run_dir
