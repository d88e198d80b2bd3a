"""The organism's Skill1 warm start: the lesson expert's replies, its demonstrations on the ci parameters (real MiniLM
encoder, small store) and the shipped checkpoint against its manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.agent.skill1_episode import library_skill_chunk
from intraskill.agent.skill1_replies import (
    STRATEGY_FORMAT,
    DistillReply,
    QueryReply,
    RankReply,
    distill_messages,
    episode_summary,
    parse_distill,
    parse_query,
    parse_rank,
    rank_candidates,
    rank_messages,
)
from intraskill.agent.views import view_skills
from intraskill.chat.base import ChatRequest, Generation
from intraskill.organism.demos import Demonstration, teacher_law
from intraskill.organism.shipped import verify_shipped
from intraskill.organism.skill1_warmstart import (
    ROUND_ONLY,
    demo_libraries,
    lesson_library,
    s0_lessons,
    skill1_demonstrations,
    warmstart_skill1_settings,
)
from intraskill.params import ParamsError, load_params, params_from_dict
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.policy.factory import weights_digest
from intraskill.policy.warmstarts import resolve_checkpoint
from intraskill.skills.bank import load_skillbank
from intraskill.skills.render import render_skill_block
from intraskill.skills.retrieval import SentenceEncoder

ROOT = Path(__file__).resolve().parents[1]
CI = load_params(ROOT / "params" / "ci.yaml")
LESSONS = s0_lessons(load_skillbank(ROOT / "params" / "organism_s0.json"))
PERSONA = {"preferences": {"brand": "Kestrel", "color": "navy"}}


def reply(policy: ExpertPolicy, session: str, messages: list[dict[str, str]]) -> Generation:
    return policy.generate([ChatRequest(session, messages, [], 256, 0.0, 1.0, 0)])[0]


def stopped(text: str) -> Generation:
    return Generation(text=text, content=text, tool_calls=[], finish_reason="stop", prompt_tokens=0,
                      completion_tokens=0)


def test_lessons_carry_the_s0_titles_and_roles() -> None:
    by_chunk = {lesson.chunk: lesson for lesson in LESSONS.lessons}
    assert len(by_chunk) == 8
    assert (by_chunk["persona-query"].action, by_chunk["persona-query"].navigation,
            by_chunk["persona-query"].description) == ("Search with the profile",
                                                       "Search the task words plus the profile brand and material",
                                                       "the first search")
    assert {chunk: lesson.usefulness for chunk, lesson in by_chunk.items()
            if lesson.usefulness != 1.0} == {"stay-calm": 0.0, "buy-first-result": -1.0}
    strat = by_chunk["buy-first-result"].strat
    assert strat == STRATEGY_FORMAT.format(action="Buy fast", navigation="Open the first result and buy it at once")
    assert LESSONS.lesson_of(strat).chunk == "buy-first-result" and LESSONS.lesson_of("Check the size.") is None


def test_expert_ranks_by_planted_usefulness_ties_in_retrieval_order() -> None:
    by_chunk = {lesson.chunk: lesson for lesson in LESSONS.lessons}
    names = ["buy-first-result", "stay-calm", None, "budget-check", "persona-query"]
    candidates = [(by_chunk[n].description, by_chunk[n].strat) if n else ("buying shoes", "Check the size first.")
                  for n in names]
    messages = rank_messages("a navy scarf", PERSONA, candidates)
    assert rank_candidates(messages[1]["content"]) == candidates
    ranked = parse_rank(reply(ExpertPolicy(lessons=LESSONS), "e/rank", messages), len(candidates))
    # the first helpful strategy on top, the others in retrieval order
    assert ranked == RankReply((3, 0, 1, 2, 4))
    assert LESSONS.rank([candidates[i][1] for i in (0, 1, 2)]) == (1, 0, 2)  # neutral before harmful
    assert parse_rank(reply(ExpertPolicy(), "e/rank", messages), 5) == RankReply((0, 1, 2, 3, 4))


def test_distilled_lessons_are_seeded_varied_and_well_formed() -> None:
    summary = episode_summary([("search[a navy scarf]", True, None), ("click[buy now]", True, None)], "purchase",
                              True)
    messages = distill_messages("a navy scarf", PERSONA, summary)

    def lessons(seed: int) -> list[DistillReply]:
        policy = ExpertPolicy(seed=seed, lessons=LESSONS)
        return [parse_distill(reply(policy, f"ep-{i}/distill", messages)) for i in range(40)]

    drawn = lessons(3)
    assert all(isinstance(d, DistillReply) and d.task_success for d in drawn)
    assert drawn == lessons(3) and drawn != lessons(4)
    named = {LESSONS.lesson_of(d.strat).chunk for d in drawn}
    assert {"persona-query", "stay-calm", "buy-first-result"} <= named
    assert {d.desc for d in drawn} <= {lesson.description for lesson in LESSONS.lessons}
    failed = distill_messages("a navy scarf", PERSONA, summary.replace("success", "failure"))
    assert parse_distill(reply(ExpertPolicy(lessons=LESSONS), "x/distill", failed)).task_success is False


def test_a_strategy_naming_a_chunk_title_plays_as_that_chunk(organism_engine) -> None:
    by_chunk = {lesson.chunk: lesson for lesson in LESSONS.lessons}
    library = lesson_library([by_chunk["persona-query"]], CI.skill1)
    chunk = library_skill_chunk(library.get(0))
    assert LESSONS.skill_ids(render_skill_block(view_skills([chunk], "compact"))) == ("persona-query",)
    # ci's law: a helpful chunk's competence always runs with its chunk in context, never without
    law = teacher_law(load_skillbank(ROOT / "params" / "organism_s0.json"), CI.warmstart)
    config = RuntimeConfig(max_turns=2, temperature=0.0, view="compact")
    task = organism_engine.train_ids[0]
    queries = {}
    for name, skills in (("bare", ()), ("strategy", (chunk,))):
        policy = ExpertPolicy(seed=1, law=law, lessons=LESSONS)
        result = run_episodes(policy, lambda: InProcessEnvironment(organism_engine),
                              [EpisodeJob.create(task, 0, 1, skills)], config, progress=False)[0]
        queries[name] = result.trace.turns[0].action
    brand = organism_engine.goals[task].user_persona["preferences"]["brand"]
    assert brand in queries["strategy"] and brand not in queries["bare"], queries


@pytest.fixture(scope="module")
def demonstrations(organism_engine) -> tuple[list[Demonstration], dict]:
    data = CI.model_dump(mode="json")
    data["skill1"] = {"top_k": 2}
    data["skill1_warmstart"] = {"jobs": 6, "library_batch": 3, "empty_library_share": 0.0}
    data["sampling"]["max_turns"] = 15
    params = params_from_dict(data)
    law = teacher_law(load_skillbank(ROOT / "params" / "organism_s0.json"), params.warmstart)
    return skill1_demonstrations(params, organism_engine, organism_engine.train_ids, LESSONS, law, SentenceEncoder())


def test_demonstrations_record_every_reply_type_well_formed(demonstrations) -> None:
    demos, summary = demonstrations
    kinds = {"query": [], "rank": [], "distill": [], "act": []}
    for demo in demos:
        kinds[demo.episode_id.rpartition("/")[2] if "/" in demo.episode_id else "act"].append(demo)
    assert {kind: len(found) for kind, found in kinds.items()} == summary["per_reply_type"]
    assert len(kinds["query"]) == len(kinds["rank"]) == 6 and len(kinds["distill"]) == len(kinds["act"]) >= 5
    for demo in kinds["query"] + kinds["rank"] + kinds["distill"]:
        assert len(demo.segments) == 1  # one single-turn session per reply
    for demo in kinds["query"]:
        assert isinstance(parse_query(stopped(demo.segments[0][1])), QueryReply)
    for demo in kinds["rank"]:
        prompt, completion = demo.segments[0]
        strats = [strat for _, strat in rank_candidates(prompt.rpartition("<|im_start|>user\n")[2])]
        assert len(strats) == 2
        ranked = parse_rank(stopped(completion), 2)
        assert ranked == RankReply(LESSONS.rank(strats))
    distilled = [parse_distill(stopped(d.segments[0][1])) for d in kinds["distill"]]
    assert all(LESSONS.lesson_of(d.strat) is not None for d in distilled)
    for demo in kinds["act"]:
        assert demo.reward is not None and demo.skill_ids[0].startswith("skill1-")
        assert "Action Insight: " in demo.segments[0][0]  # the selected strategy is in the episode's prompt


def test_demonstration_libraries_are_seeded_subsets() -> None:
    libraries = demo_libraries(LESSONS, 50, 7, 0.2)
    assert libraries == demo_libraries(LESSONS, 50, 7, 0.2) and libraries != demo_libraries(LESSONS, 50, 8, 0.2)
    assert 0 < sum(not chosen for chosen in libraries) < 25
    assert all(len(set(chosen)) == len(chosen) <= 8 for chosen in libraries)


def test_skill1_warmstart_settings_are_validated() -> None:
    with pytest.raises(ParamsError, match="skill1_warmstart.out_dir"):
        params_from_dict({"experiment": {"name": "x"}, "skill1_warmstart": {"out_dir": "../elsewhere"}})
    with pytest.raises(ParamsError, match="skill1_warmstart.steps"):
        params_from_dict({"experiment": {"name": "x"}, "skill1_warmstart": {"steps": 0}})


def test_the_shipped_skill1_warm_start_matches_its_manifest() -> None:
    shipped = ROOT / "params" / "organism_skill1_warmstart"
    assert (shipped / "checkpoint" / "model.safetensors").stat().st_size <= 10 * 2**20
    assert verify_shipped(shipped) == []
    manifest = json.loads((shipped / "manifest.json").read_text())
    params = load_params(ROOT / "params" / "organism_skill1.yaml")
    assert manifest["params"]["skill1_warmstart"] == params.skill1_warmstart.model_dump(mode="json")
    # reply budgets came later, at defaults; the RL objective's settings do not make the warm start
    recorded = {k: v for k, v in manifest["params"]["skill1"].items() if k not in ROUND_ONLY}
    assert recorded == warmstart_skill1_settings(params.skill1)
    assert manifest["base"]["checkpoint_sha256"] == weights_digest(ROOT / "params" / "organism_warmstart" /
                                                                     "checkpoint")
    assert manifest["lessons"] == LESSONS.identity
    assert resolve_checkpoint(params) == (str(shipped / "checkpoint"), None)
