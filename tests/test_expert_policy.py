"""ExpertPolicy: the scripted expert behind the Policy protocol, reading only the runtime's messages."""

from __future__ import annotations

import json
import random

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.agent.tools import build_tools
from intraskill.chat.base import Policy
from intraskill.chat.chatml import parse_tool_calls, render_tool_call
from intraskill.policy.expert_policy import (
    ExpertPolicy,
    SkillConditionedLaw,
    competences_from_tag,
    competences_tag,
    page_state,
)
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.observation import render_observation
from intraskill.shop.scripted_expert import Competences, ScriptedExpert, run_expert_episode
from intraskill.skills.bank import Skill

ABLATED = Competences().without("read_persona").without("check_budget")


def _engine(small_store, language: str = "en") -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index, StoreConfig(language=language))


def _direct(engine: ShopEngine, catalog, task_ids, competences: Competences) -> list[tuple[float, int]]:
    outcomes = []
    for task_id in task_ids:
        session = engine.new_session()
        expert = ScriptedExpert(competences, random.Random(0))
        final = run_expert_episode(session, expert, catalog.task(task_id))
        outcomes.append((final["reward"], session.action_count))
    return outcomes


def _via_runtime(engine, task_ids, policy, language="en", skills=(), view="standard") -> list:
    jobs = [EpisodeJob.create(task_id, 0, 7, skills) for task_id in task_ids]
    return run_episodes(policy, lambda: InProcessEnvironment(engine), jobs,
                        RuntimeConfig(max_turns=30, language=language, view=view), progress=False)


def test_expert_policy_is_a_policy() -> None:
    assert isinstance(ExpertPolicy(), Policy)


@pytest.mark.parametrize("view", ["standard", "compact"])
@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("competences", [Competences(), ABLATED], ids=["all", "ablated"])
def test_runtime_episodes_match_the_scripted_expert(small_store, language: str,
                                                    competences: Competences, view: str) -> None:
    """Through the chat messages alone (either view) the policy takes exactly the expert's actions."""
    catalog = small_store[0]
    engine = _engine(small_store, language)
    task_ids = list(catalog.task_ids("val"))[:20]
    results = _via_runtime(engine, task_ids, ExpertPolicy(competences, language=language), language, view=view)
    assert [r.status for r in results] == ["completed"] * len(task_ids)
    assert [(r.reward.reward, r.steps) for r in results] == _direct(engine, catalog, task_ids, competences)
    assert all(r.protocol_errors == 0 and r.invalid_actions == 0 for r in results)


def test_turns_are_hermes_tool_calls(small_store) -> None:
    catalog = small_store[0]
    result = _via_runtime(_engine(small_store), list(catalog.task_ids("val"))[:1], ExpertPolicy())[0]
    for turn in result.trace.turns:
        assert len(turn.tool_calls) == 1
        call = turn.tool_calls[0]
        assert turn.raw_output == render_tool_call(call["name"], call["arguments"])
        assert parse_tool_calls(turn.raw_output)[0] == ""
        name, arguments = ScriptedExpert.tool_call(turn.action)
        assert (call["name"], json.loads(call["arguments"])) == (name, arguments)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_page_state_inverts_the_renderer(small_store, language: str) -> None:
    """Every page of real episodes parses back to the fields the expert reads."""
    catalog = small_store[0]
    engine = _engine(small_store, language)
    states = []
    for task_id in list(catalog.task_ids("val"))[:8]:
        session = engine.new_session()
        run_expert_episode(session, ScriptedExpert(ABLATED), catalog.task(task_id),
                           on_step=lambda _a, response: states.append(response["observation_state"]))
    pages = [s for s in states if s["page_type"] in ("search_results", "product_detail")]
    assert {s["page_type"] for s in pages} == {"search_results", "product_detail"}
    for state in pages:
        parsed = page_state(render_observation(state, language), build_tools(state, language), language)
        assert parsed["page_type"] == state["page_type"] and parsed["actions"] == state["actions"]
        if state["page_type"] == "search_results":
            expected = [(p["asin"], " ".join(p["title"].split()), p["key_attributes"])
                        for p in state["products"]]
            assert [(p["asin"], p["title"], p["key_attributes"]) for p in parsed["products"]] == expected
        else:
            assert parsed["product"]["asin"] == state["product"]["asin"]
            for key in ("available_options", "selected_options", "missing_option_axes"):
                assert parsed[key] == state[key], key
            if not state["missing_option_axes"] and state["selected_price"] is not None:
                assert parsed["selected_price"] == pytest.approx(state["selected_price"])


def test_skill_conditioned_law_switches_competences(small_store) -> None:
    """p_with = 1 / p_without = 0: the injected skill turns read_persona on, its absence off."""
    catalog = small_store[0]
    engine = _engine(small_store)
    task_ids = list(catalog.task_ids("val"))[:12]
    law = SkillConditionedLaw(skill_for={"read_persona": "persona-skill"}, p_with={"read_persona": 1.0},
                                p_without={"read_persona": 0.0})
    skill = Skill("persona-skill", "### Read the profile\n\n- Applies when: always")
    with_skill = _via_runtime(engine, task_ids, ExpertPolicy(law=law), skills=[skill])
    without = _via_runtime(engine, task_ids, ExpertPolicy(law=law))
    full = [v for v, _ in _direct(engine, catalog, task_ids, Competences())]
    no_persona = [v for v, _ in _direct(engine, catalog, task_ids, Competences().without("read_persona"))]
    assert full != no_persona
    assert [r.reward.reward for r in with_skill] == full
    assert [r.reward.reward for r in without] == no_persona
    assert ExpertPolicy(law=law).identity["law"]["skill_for"] == {"read_persona": "persona-skill"}


def test_law_and_tags_validate() -> None:
    with pytest.raises(ValueError, match="p_with.read_persona"):
        SkillConditionedLaw({"read_persona": "s"}, {"read_persona": 1.5}, {"read_persona": 0.0})
    with pytest.raises(ValueError, match="skill_for: unknown competences"):
        SkillConditionedLaw({"telepathy": "s"}, {}, {})
    assert competences_tag(ABLATED) == "without:read_persona,check_budget"
    assert competences_from_tag(competences_tag(ABLATED)) == ABLATED
    assert competences_from_tag("all") == Competences()
    with pytest.raises(ValueError, match="telepathy"):
        competences_from_tag("without:telepathy")


def test_messages_without_a_page_are_refused() -> None:
    from intraskill.chat.base import ChatRequest

    messages = [{"role": "system", "content": "x"}, {"role": "user", "content": "hello"}]
    request = ChatRequest("s", messages, [], 16)
    with pytest.raises(ValueError, match="first user message"):
        ExpertPolicy().generate([request])
