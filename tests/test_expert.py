"""The scripted expert on the small store: success with all competences, drops without each."""

from __future__ import annotations

import random

import pytest

from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import (
    Competences,
    ScriptedExpert,
    expert_ablation,
    instruction_words,
    query_recall,
    run_expert_episode,
)
from intraskill.shop.types import Task


@pytest.fixture(scope="module")
def ablation(small_store) -> dict:
    return expert_ablation(small_store, "val")


def test_full_expert_succeeds_on_val(ablation: dict) -> None:
    assert ablation["tasks"] == 40
    assert ablation["success"]["all"] >= 0.95


@pytest.mark.parametrize("competence", ["read_persona", "choose_options", "inspect_candidates", "check_budget"])
def test_switching_a_competence_off_drops_success(ablation: dict, competence: str) -> None:
    assert ablation["success"][f"without_{competence}"] < ablation["success"]["all"]
    if competence in ("read_persona", "choose_options"):
        assert ablation["success"][f"without_{competence}"] <= 0.2


def test_persona_words_make_the_gold_rank_first(small_store) -> None:
    recall = query_recall(small_store, "val")["recall"]
    assert recall["simple_persona"]["recall@1"] >= 0.7
    assert recall["simple_persona"]["recall@20"] == 1.0
    assert recall["simple"]["recall@1"] <= recall["simple_persona"]["recall@1"] - 0.3


def test_episodes_are_valid_short_and_deterministic(small_store) -> None:
    catalog, index, _ = small_store
    engine = ShopEngine(catalog.products, catalog.goals, index)
    runs = []
    for _ in range(2):
        expert, session, actions = ScriptedExpert(Competences(), random.Random(3)), engine.new_session(), []
        for task_id in catalog.task_ids("test")[:15]:
            steps: list[str] = []
            final = run_expert_episode(session, expert, catalog.task(task_id),
                                       on_step=lambda a, r, steps=steps: steps.append((a, r["action_feedback"]["valid"])))
            assert final["termination_reason"] == "purchase" and len(steps) <= 30
            assert all(valid for _, valid in steps)
            actions.append([a for a, _ in steps])
        runs.append(actions)
    assert runs[0] == runs[1]
    assert runs[0][0][0].startswith("search[") and runs[0][0][-1] == "click[buy now]"


def test_expert_uses_only_public_information(small_store) -> None:
    catalog, index, _ = small_store
    task_id = catalog.task_ids("val")[0]
    task = catalog.task(task_id)
    assert isinstance(task, Task) and not hasattr(task, "goal_options")
    prefs = task.user_persona["preferences"]
    expert = ScriptedExpert()
    first = expert.act(task, {"page_type": "search_home", "actions": [], "last_action": {"action": "reset"}})
    assert first == f"search[{task.instruction_simple} {prefs['brand']} {prefs['material']}]"
    bare = Task(task.task_id, task.task_uid, task.instruction_simple, {})
    assert ScriptedExpert().act(bare, {"page_type": "search_home", "last_action": {"action": "reset"}}) == (
        f"search[{task.instruction_simple}]")


def test_decide_is_the_override_point(small_store) -> None:
    class NoPersona(ScriptedExpert):
        def decide(self, competence: str, task: Task) -> bool:
            return competence != "read_persona" and self.rng.random() < 2.0

    catalog, index, _ = small_store
    task = catalog.task(catalog.task_ids("val")[0])
    expert = NoPersona(rng=random.Random(0))
    action = expert.act(task, {"page_type": "search_home", "last_action": {"action": "reset"}})
    assert action == f"search[{task.instruction_simple}]"


def test_tool_call_mapping_and_helpers() -> None:
    assert ScriptedExpert.tool_call("search[a red kettle ]") == ("search", {"query": "a red kettle"})
    assert ScriptedExpert.tool_call("click[color=navy | white]") == ("click", {"value": "color=navy | white"})
    with pytest.raises(ValueError, match="canonical"):
        ScriptedExpert.tool_call("buy now")
    assert instruction_words("an organic tea tin around 25 dollars") == ["organic", "tea", "tin"]
    assert instruction_words("a quiet air fryer no more than 90 dollars") == ["quiet", "air", "fryer"]
    with pytest.raises(ValueError, match="competence"):
        Competences().without("telepathy")
